// What the proxy decides about a downstream HTTP/1.x request head before and
// right after routing it: refuse it (status, x-onelayer-error reason, a
// detail for the log line) or forward it, with the host and path to route
// by and the target to send upstream. Pure: the shell parses the head, calls
// these, routes, and carries the verdict out. Every rule here is one that
// llhttp 8.1 leaves to its user, or one where two hops could disagree about
// what a request means (a desync).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/config.h"
#include "core/http/http_headers.h"

namespace onelayer {

// The largest Content-Length forwarded: 2^53 - 1 (8 PiB). Every parser an
// upstream may use represents it exactly, including those that keep numbers
// as doubles or as signed 64-bit integers; a larger length is refused rather
// than read differently by the next hop.
inline constexpr uint64_t kMaxContentLength = (uint64_t{1} << 53) - 1;

// The most header fields one request head may carry, on either front: above
// it the request is refused with 431 headers_too_large.
inline constexpr size_t kMaxRequestHeaderFields = 128;

// The methods the HTTP/1.1 front's parser (llhttp 8.1, HTTP mode) accepts,
// case-sensitive: GET, POST, the WebDAV ones, PATCH, PURGE and the others
// it knows. A method outside them is refused with 400 bad_request, on
// HTTP/2 as on HTTP/1.1, so both fronts forward the same requests.
bool is_known_method(std::string_view method);

// The request-line and framing facts the parser found.
struct RequestHeadFacts {
  std::string_view method;
  std::string_view target;
  uint8_t http_major = 1;  // 2: an HTTP/2 stream's head, translated
  uint8_t http_minor = 1;
  bool obs_fold = false;  // a header line continued another one
  bool chunked = false;
  bool has_content_length = false;
  uint64_t content_length = 0;
  // The codec checked every name and value (see validate_request_headers).
  bool checked_by_codec = false;
};

struct RequestVerdict {
  int status = 0;            // 0: go on; else the status to answer with
  const char* reason = "";   // x-onelayer-error, when status != 0
  const char* detail = "";   // for the log line, when status != 0
  const char* hint = "";     // for the client (the response body), when status != 0
  std::string host;          // routing host: Host, or the absolute-form authority
  std::string path;          // routing path ("*" for OPTIONS *)
  std::string upstream_target;  // what the upstream gets as request target
  size_t underscore_fields_dropped = 0;
  bool refused() const { return status != 0; }
};

// Before routing. Refuses, all with 400 bad_request: CONNECT (its hint says
// that onelayer originates TLS itself and how to configure it), a version other
// than 1.x, a target byte that is whitespace, a control or not ASCII, any
// Transfer-Encoding but `chunked` alone, a Content-Length above
// kMaxContentLength, obs-fold and the header problems of
// validate_request_headers, header names with an underscore when the policy
// is reject, and a target that is neither origin-form, `*` (OPTIONS only)
// nor absolute-form http(s) without userinfo.
//
// May change `headers`: with UnderscoreHeaders::drop the fields whose name
// has an underscore are removed (counted in underscore_fields_dropped); an
// absolute-form target's authority replaces Host, or becomes it when there
// was none (RFC 9112 3.2.2), so that the upstream sees the host the request
// was routed by.
RequestVerdict check_request_head(const RequestHeadFacts& head, Headers& headers,
                                  UnderscoreHeaders underscores);

// After routing, for a request a route takes: a Content-Length over
// max_body_bytes (0: no limit) is 413 body_too_large; an Expect other than
// 100-continue is 417. Sets *expect_continue when the client waits for
// "100 Continue" before sending its body.
RequestVerdict check_routed_request(const RequestHeadFacts& head, const Headers& headers,
                                    uint64_t max_body_bytes, bool* expect_continue);

// A request that asks to switch protocols (RFC 9110 7.8): an `Upgrade`
// field and `upgrade` among its Connection options. `protocols` holds the
// requested protocols the listener forwards (`listeners[].upgrades`, lower
// case; "websocket/13" counts as websocket), comma-joined as they go
// upstream. Refused: an upgrade to nothing the listener forwards (400
// upgrade_not_allowed, the hint lists what it forwards), and one over
// HTTP/1.0 or with a body (400 bad_request). An `Upgrade` field without the
// Connection option is no request to switch, nor is one that offers only
// h2c (clients fall back from it): Upgrade is then dropped as hop-by-hop.
struct UpgradeVerdict {
  bool requested = false;
  std::string protocols;
  int status = 0;
  const char* reason = "";
  const char* detail = "";
  std::string hint;
  bool refused() const { return status != 0; }
};
UpgradeVerdict check_upgrade(const RequestHeadFacts& head, const Headers& headers,
                             const std::vector<std::string>& allowed);

}  // namespace onelayer
