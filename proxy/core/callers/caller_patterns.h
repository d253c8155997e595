// Which callers may use a listener or a route (docs/tls.md "Callers"). A
// caller is the identity read from its verified client certificate; a
// pattern is that identity written out exactly, or a prefix ending in `*`
// ("spiffe://cluster/ns/*"), or "*" alone for any verified caller.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace onelayer {

// One pattern against one identity. An empty identity (no verified client
// certificate) matches nothing, not even "*".
bool caller_pattern_matches(std::string_view pattern, std::string_view identity);

// An empty list allows every caller, with or without a certificate;
// otherwise the identity must match one of the patterns.
bool callers_allow(const std::vector<std::string>& patterns, std::string_view identity);

// Why a pattern cannot be used, or "" when it can: empty, or a `*` that is
// not the last character (patterns are exact or end in `*`).
std::string caller_pattern_problem(std::string_view pattern);

}  // namespace onelayer
