// grpc-retry-pushback-ms (gRPC A6, "Pushback"): the server's own "retry in N
// ms", or "do not retry" when the value is negative or not a number.
#pragma once

#include <string_view>

#include "core/config/config.h"

namespace onelayer {

struct GrpcPushback {
  bool stop = false;  // negative or unparseable: do not retry
  Millis wait{0};     // when !stop: the exact wait asked for
  bool operator==(const GrpcPushback&) const = default;
};

// A field that is present: digits only (spaces and tabs around are ignored)
// is a wait, saturating at kRetryAfterSaturation like Retry-After; anything
// else ("-1", "", "1.5", "+3", "3ms") is stop.
GrpcPushback parse_grpc_pushback(std::string_view value);

}  // namespace onelayer
