// gRPC over HTTP/2 as a proxy sees it: which requests are gRPC calls and the
// names of the fields onelayer reads and writes (docs/grpc.md).
#pragma once

#include <string_view>

#include "core/base/grpc_field_names.h"
#include "core/http/http_headers.h"

namespace onelayer {

// A Content-Type of a gRPC call: "application/grpc" alone or followed by
// "+format" (application/grpc+proto) or parameters, ASCII case-insensitive,
// OWS around ignored. application/grpc-web is not: its trailers travel in
// the body, and nothing here applies to it.
bool is_grpc_content_type(std::string_view content_type);
// The request's first Content-Type field is a gRPC one.
bool is_grpc_request(const Headers& request_headers);

}  // namespace onelayer
