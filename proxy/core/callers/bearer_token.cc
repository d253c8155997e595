#include "core/callers/bearer_token.h"

#include <cstddef>

namespace onelayer {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Walk the longer of the two, so a short guess costs as much as a long one.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  // Read through a volatile so the compiler keeps the whole loop.
  volatile unsigned result = diff;
  return result == 0;
}

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t'; }

bool scheme_is_bearer(std::string_view s) {
  constexpr std::string_view kBearer = "bearer";
  if (s.size() != kBearer.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kBearer[i]) return false;
  }
  return true;
}

}  // namespace

bool bearer_token_matches(std::string_view authorization, std::string_view token) {
  if (token.empty()) return false;
  size_t i = 0;
  while (i < authorization.size() && is_blank(authorization[i])) ++i;
  size_t scheme_end = i;
  while (scheme_end < authorization.size() && !is_blank(authorization[scheme_end])) ++scheme_end;
  if (!scheme_is_bearer(authorization.substr(i, scheme_end - i))) return false;
  size_t start = scheme_end;
  while (start < authorization.size() && is_blank(authorization[start])) ++start;
  if (start == scheme_end) return false;  // "Bearer" and the token need a space between them
  size_t end = authorization.size();
  while (end > start && is_blank(authorization[end - 1])) --end;
  if (end == start) return false;
  return constant_time_equal(authorization.substr(start, end - start), token);
}

}  // namespace onelayer
