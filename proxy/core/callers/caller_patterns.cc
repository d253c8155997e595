#include "core/callers/caller_patterns.h"

namespace onelayer {

bool caller_pattern_matches(std::string_view pattern, std::string_view identity) {
  if (identity.empty() || pattern.empty()) return false;
  if (pattern.back() == '*') {
    std::string_view prefix = pattern.substr(0, pattern.size() - 1);
    return identity.substr(0, prefix.size()) == prefix;
  }
  return pattern == identity;
}

bool callers_allow(const std::vector<std::string>& patterns, std::string_view identity) {
  if (patterns.empty()) return true;
  for (const std::string& p : patterns) {
    if (caller_pattern_matches(p, identity)) return true;
  }
  return false;
}

std::string caller_pattern_problem(std::string_view pattern) {
  if (pattern.empty()) return "a caller pattern is empty";
  size_t star = pattern.find('*');
  if (star != std::string_view::npos && star + 1 != pattern.size())
    return "'*' may only end a caller pattern (exact identity, or a prefix followed by '*')";
  return "";
}

}  // namespace onelayer
