// How long a request may take: the route's timeout, shortened by what the
// caller says it will wait (x-request-timeout-ms, gRPC's grpc-timeout). The
// smallest wins; a caller can never lengthen the route's deadline.
#pragma once

#include <optional>

#include "core/config/config.h"
#include "core/http/http_headers.h"

namespace onelayer {

// Several grpc-timeout fields: the smallest valid one (parse_grpc_timeout);
// nullopt when none is valid.
std::optional<Millis> incoming_grpc_timeout(const Headers& h);

// min(route_timeout, incoming_timeout_ms, incoming_grpc_timeout). The
// grpc-timeout field is read on every request: only gRPC callers send it.
Millis request_timeout(Millis route_timeout, const Headers& h, const HeaderNames& names);

}  // namespace onelayer
