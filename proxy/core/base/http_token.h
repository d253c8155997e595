// RFC 9110 5.6.2 tokens (method names, field names, parameter names): the
// one rule the config loader, the header rules and baggage share. Inline,
// as every header name of every message is checked with it.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace onelayer {

// Letters, digits and `others`, as a table of bytes.
constexpr std::array<bool, 256> make_byte_table(std::string_view others) {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[static_cast<size_t>(c)] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[static_cast<size_t>(c)] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[static_cast<size_t>(c)] = true;
  for (char c : others) t[static_cast<unsigned char>(c)] = true;
  return t;
}

// tchar, as a table.
inline constexpr std::array<bool, 256> kTchar = make_byte_table("!#$%&'*+-.^_`|~");

// tchar+, non-empty. No early exit (names are short, branches cost more),
// four bytes a step.
inline bool is_token(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  bool ok = n != 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) ok &= kTchar[p[i]] & kTchar[p[i + 1]] & kTchar[p[i + 2]] & kTchar[p[i + 3]];
  for (; i < n; ++i) ok &= kTchar[p[i]];
  return ok;
}

}  // namespace onelayer
