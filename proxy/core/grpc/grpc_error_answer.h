// onelayer's own answers to gRPC callers (docs/grpc.md): an HTTP 200
// Trailers-Only response whose headers say the gRPC status, never an HTTP
// error page a gRPC client would report as a protocol failure.
#pragma once

#include <string_view>

#include "core/base/grpc_status.h"
#include "core/http/http_headers.h"

namespace onelayer {

// The gRPC status of the answer onelayer makes for `reason` (its
// x-onelayer-error value) with HTTP status `http_status`:
//   connect_failure, upstream_reset, bad_upstream_response, upstream_tls,
//   circuit_open, draining, max_connections          -> 14 UNAVAILABLE
//   deadline_exceeded                                 -> 4 DEADLINE_EXCEEDED
//   no_route                                          -> 12 UNIMPLEMENTED
//   body_too_large, headers_too_large, overloaded     -> 8 RESOURCE_EXHAUSTED
//   bad_request, header_timeout, upgrade_not_allowed  -> 13 INTERNAL
// Any other reason (fault_injected, ...) follows gRPC's own mapping of HTTP
// statuses (doc/http-grpc-status-mapping.md): 400 INTERNAL, 401
// UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 UNIMPLEMENTED, 429 502 503 504
// UNAVAILABLE, anything else UNKNOWN.
GrpcStatus grpc_status_for_error(std::string_view reason, int http_status);

// gRPC's mapping of an HTTP status alone (the last rule above).
GrpcStatus grpc_status_for_http_status(int http_status);

// Appends the header fields of that Trailers-Only answer after `:status
// 200` (which the HTTP/2 codec writes): content-type application/grpc,
// grpc-status, grpc-message (the reason, which needs no percent-encoding),
// x-onelayer-error, then each field of `extra` (x-retry-exhausted, ...;
// a valid grpc-status in `extra` replaces the mapped one: an injected fault)
// except Retry-After, which becomes grpc-retry-pushback-ms in milliseconds
// (delay-seconds only; an unparseable one is dropped), and except framing
// fields (content-length, transfer-encoding) that a Trailers-Only response
// cannot carry.
void append_grpc_error_fields(Headers& out, std::string_view reason, int http_status, const Headers& extra);

}  // namespace onelayer
