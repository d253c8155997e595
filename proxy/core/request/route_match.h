// Route selection: which of a listener's routes serves a request.
// Pure; called once per request on the hot path, so it allocates nothing.
#pragma once

#include <string_view>

#include "core/config/config.h"

namespace onelayer {

// First matching route of the listener (file order), or nullptr.
// host: the Host header value; the port is ignored, comparison is
// case-insensitive, "[::1]:80" is handled and one trailing dot is dropped.
// A route's host is "" (any), exact, or "*.suffix" (matches "a.suffix",
// not "suffix" itself). An empty host (no Host header) matches only routes
// without a host. path: the request target; the query and fragment are
// ignored and the prefix comparison is byte-wise and case-sensitive
// ("/items" matches "/items", "/items/1" and "/itemsX", like Envoy's prefix).
// A path of "*" (`OPTIONS *`) matches only routes whose prefix is "/".
// method: exact, upper case. dst: the connection's original destination
// (transparent listeners; null elsewhere): a route with `destination` or
// `destination_port` matches only a destination inside them. Implicit
// routes (a transparent listener's fallback) are never matched here.
// caller: the client's verified identity ("": none), matched against each
// route's `callers` (core/callers); a route with callers never matches a
// client without an identity. The first route that matches host, path,
// method and destination decides: when its callers leave the caller out,
// no route matches (later ones are not tried) and *caller_refused (if
// given) is set: the answer is 403 caller_not_allowed.
const Route* match_route(const Listener& listener, std::string_view host, std::string_view path,
                         std::string_view method, const Destination* dst = nullptr, std::string_view caller = {},
                         bool* caller_refused = nullptr);

// The host part of a Host header value, without port and IPv6 brackets:
// "Example.com:80" -> "Example.com", "[::1]:80" -> "::1". Case is kept.
std::string_view host_without_port(std::string_view host_header);

// True when `host` (as returned by host_without_port) matches a route's host
// pattern ("" matches anything).
bool host_matches(std::string_view pattern, std::string_view host);

}  // namespace onelayer
