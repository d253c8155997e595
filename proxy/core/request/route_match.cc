#include "core/request/route_match.h"

#include <algorithm>

#include "core/callers/caller_patterns.h"

namespace onelayer {
namespace {

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return lower(x) == lower(y);
         });
}

std::string_view strip_brackets(std::string_view h) {
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') return h.substr(1, h.size() - 2);
  return h;
}

bool path_matches(std::string_view prefix, std::string_view target) {
  // `OPTIONS *` asks about the server as a whole: only a catch-all route
  // (every path) takes it.
  if (target == "*") return prefix == "/";
  target = target.substr(0, target.find_first_of("?#"));
  return target.substr(0, prefix.size()) == prefix;
}

bool method_matches(const std::vector<std::string>& methods, std::string_view method) {
  if (methods.empty()) return true;
  return std::find(methods.begin(), methods.end(), method) != methods.end();
}

}  // namespace

std::string_view host_without_port(std::string_view h) {
  if (!h.empty() && h.front() == '[') {
    size_t close = h.find(']');
    if (close == std::string_view::npos) return h.substr(1);  // malformed: keep what is there
    return h.substr(1, close - 1);
  }
  size_t colon = h.find(':');
  if (colon != std::string_view::npos) h = h.substr(0, colon);
  if (!h.empty() && h.back() == '.') h.remove_suffix(1);
  return h;
}

bool host_matches(std::string_view pattern, std::string_view host) {
  if (pattern.empty()) return true;
  if (pattern.size() >= 2 && pattern[0] == '*' && pattern[1] == '.') {
    std::string_view suffix = pattern.substr(1);  // ".suffix"
    // At least one character must precede the dot: "*.b" matches "a.b", not "b".
    return host.size() > suffix.size() &&
           iequals(host.substr(host.size() - suffix.size()), suffix);
  }
  return iequals(strip_brackets(pattern), host);
}

static bool destination_matches(const RouteMatch& m, const Destination* dst) {
  if (!m.destination && m.destination_port == 0) return true;
  if (!dst) return false;
  return (!m.destination || m.destination->contains(*dst)) && (m.destination_port == 0 || m.destination_port == dst->port);
}

const Route* match_route(const Listener& listener, std::string_view host, std::string_view path,
                         std::string_view method, const Destination* dst, std::string_view caller,
                         bool* caller_refused) {
  std::string_view bare_host = host_without_port(host);
  if (caller_refused) *caller_refused = false;
  for (const Route& route : listener.routes) {
    if (!route.implicit && destination_matches(route.match, dst) && host_matches(route.match.host, bare_host) && path_matches(route.match.path_prefix, path) &&
        method_matches(route.match.methods, method)) {
      // The first route for this request decides: one that leaves the
      // caller out is not passed over for a broader route after it.
      if (callers_allow(route.match.callers, caller)) return &route;
      if (caller_refused) *caller_refused = true;
      return nullptr;
    }
  }
  return nullptr;
}

}  // namespace onelayer
