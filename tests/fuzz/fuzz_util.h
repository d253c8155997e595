// Helpers shared by the libFuzzer targets: a failed invariant aborts (so
// libFuzzer records a crash with the input), plus independent checks of
// header lists (written here, not taken from the code under test).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/http/http_headers.h"

namespace fuzz {

// Not assert(): it must hold in every build type.
#define FUZZ_REQUIRE(cond)                                                                  \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// RFC 9110 5.6.2 tchar, written independently of core/http/http_headers.cc.
inline bool tchar(unsigned char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

inline bool token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!tchar(c)) return false;
  return true;
}

// What may go on the wire as a field value: no CTL but HTAB, no DEL.
inline bool safe_value(std::string_view v) {
  for (unsigned char c : v)
    if ((c < 0x20 && c != '\t') || c == 0x7F) return false;
  return true;
}

inline size_t count_named(const onelayer::Headers& h, std::string_view lname) {
  size_t n = 0;
  for (const auto& f : h) n += lower(f.name) == lname ? 1 : 0;
  return n;
}

inline const onelayer::Header* first_named(const onelayer::Headers& h, std::string_view lname) {
  for (const auto& f : h)
    if (lower(f.name) == lname) return &f;
  return nullptr;
}

// Comma-separated, OWS-trimmed, non-empty list members of every `lname` field.
inline std::vector<std::string> list_members(const onelayer::Headers& h, std::string_view lname) {
  std::vector<std::string> out;
  for (const auto& f : h) {
    if (lower(f.name) != lname) continue;
    std::string_view v = f.value;
    size_t start = 0;
    for (size_t i = 0; i <= v.size(); ++i) {
      if (i == v.size() || v[i] == ',') {
        std::string_view m = v.substr(start, i - start);
        while (!m.empty() && (m.front() == ' ' || m.front() == '\t')) m.remove_prefix(1);
        while (!m.empty() && (m.back() == ' ' || m.back() == '\t')) m.remove_suffix(1);
        if (!m.empty()) out.push_back(lower(m));
        start = i + 1;
      }
    }
  }
  return out;
}

inline bool in_list(const std::vector<std::string>& list, std::string_view lname) {
  for (const auto& s : list)
    if (s == lname) return true;
  return false;
}

// The header block a proxy puts on the wire is safe: every line is exactly
// "token: value\r\n" with a clean value, so no field can be split in two.
inline void require_clean_serialization(const onelayer::Headers& h) {
  std::string wire;
  onelayer::append_serialized(h, wire);
  size_t pos = 0;
  size_t lines = 0;
  while (pos < wire.size()) {
    size_t crlf = wire.find("\r\n", pos);
    FUZZ_REQUIRE(crlf != std::string::npos);
    std::string_view line(wire.data() + pos, crlf - pos);
    FUZZ_REQUIRE(line.find('\r') == std::string_view::npos);
    FUZZ_REQUIRE(line.find('\n') == std::string_view::npos);
    FUZZ_REQUIRE(line.find('\0') == std::string_view::npos);
    size_t colon = line.find(':');
    FUZZ_REQUIRE(colon != std::string_view::npos && token(line.substr(0, colon)));
    FUZZ_REQUIRE(safe_value(line.substr(colon + 1)));
    ++lines;
    pos = crlf + 2;
  }
  FUZZ_REQUIRE(lines == h.size());
}

}  // namespace fuzz
