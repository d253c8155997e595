// libFuzzer target for the W3C Baggage code (core/http/baggage.h).
// Input: "<header>\n<key>\n<value>" (missing parts are empty; the value may
// hold anything, newlines included). Invariants checked with abort():
// - baggage_get never fails and returns valid UTF-8;
// - baggage_merge with a token key: the result fits kMaxBaggageBytes, has the
//   key exactly once, reads back as the value, keeps every other member in
//   order, is a fixed point of a second merge, and exists whenever the input
//   was small enough; with a non-token key it refuses;
// - percent_encode_baggage_value yields baggage-octets only and round-trips.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/http/baggage.h"
#include "core/http/http_headers.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Non-empty trimmed members, written independently of the code under test.
std::vector<std::string_view> members(std::string_view h) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= h.size(); ++i) {
    if (i == h.size() || h[i] == ',') {
      std::string_view m = trim_ows(h.substr(start, i - start));
      if (!m.empty()) out.push_back(m);
      start = i + 1;
    }
  }
  return out;
}

std::string_view member_key(std::string_view m) {
  size_t end = m.find_first_of("=;");
  return trim_ows(m.substr(0, end));
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    unsigned char c1 = len > 1 ? static_cast<unsigned char>(s[i + 1]) : 0x80;
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F))
      return false;
    for (size_t k = 1; k < len; ++k) {
      unsigned char ck = static_cast<unsigned char>(s[i + k]);
      if (ck < 0x80 || ck > 0xBF) return false;
    }
    i += len;
  }
  return true;
}

bool is_baggage_octet(unsigned char c) {
  return c == 0x21 || (c >= 0x23 && c <= 0x2B) || (c >= 0x2D && c <= 0x3A) || (c >= 0x3C && c <= 0x5B) ||
         (c >= 0x5D && c <= 0x7E);
}

void check_encoding(std::string_view value) {
  std::string enc = onelayer::percent_encode_baggage_value(value);
  for (unsigned char c : enc) require(is_baggage_octet(c));
  auto back = onelayer::baggage_get("k=" + enc, "k");
  require(back.has_value());
  if (valid_utf8(value)) require(*back == value);
}

void check_merge(std::string_view header, std::string_view key, std::string_view value) {
  auto merged = onelayer::baggage_merge(header, key, value);
  if (!onelayer::is_token(key)) {
    require(!merged.has_value());
    return;
  }
  const size_t worst = header.size() + 1 + key.size() + 1 + 3 * value.size();
  if (worst <= onelayer::kMaxBaggageBytes) require(merged.has_value());
  if (!merged) return;
  require(merged->size() <= onelayer::kMaxBaggageBytes);

  size_t with_key = 0;
  for (std::string_view m : members(*merged)) with_key += member_key(m) == key ? 1 : 0;
  require(with_key == 1);

  auto got = onelayer::baggage_get(*merged, key);
  require(got.has_value());
  if (valid_utf8(value)) require(*got == value);

  // Every member without our key survives, in order.
  std::vector<std::string_view> before;
  for (std::string_view m : members(header))
    if (member_key(m) != key) before.push_back(m);
  std::vector<std::string_view> after;
  for (std::string_view m : members(*merged))
    if (member_key(m) != key) after.push_back(m);
  require(before == after);

  require(onelayer::baggage_merge(*merged, key, value) == merged);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t nl1 = in.find('\n');
  std::string_view header = in.substr(0, nl1);
  std::string_view rest = nl1 == std::string_view::npos ? std::string_view() : in.substr(nl1 + 1);
  size_t nl2 = rest.find('\n');
  std::string_view key = rest.substr(0, nl2);
  std::string_view value = nl2 == std::string_view::npos ? std::string_view() : rest.substr(nl2 + 1);

  for (std::string_view k : {key, std::string_view("retry-owner")}) {
    auto got = onelayer::baggage_get(header, k);
    if (got) require(valid_utf8(*got));
    check_merge(header, k, value);
  }
  check_encoding(value);
  return 0;
}
