// grpc-timeout (gRPC over HTTP/2, PROTOCOL-HTTP2.md): TimeoutValue is 1 to 8
// ASCII digits, TimeoutUnit one of H (hours), M (minutes), S (seconds),
// m (milliseconds), u (microseconds), n (nanoseconds).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "core/base/clock.h"

namespace onelayer {

// The value as whole milliseconds, sub-millisecond parts rounded up (so a
// positive timeout never reads as 0: "1n" is 1ms, "0n" is 0ms). nullopt for
// anything outside the grammar: no digits, more than 8, a sign, spaces, an
// unknown or missing unit.
std::optional<Millis> parse_grpc_timeout(std::string_view value);

// `left` in gRPC's format, for the grpc-timeout of an attempt: the finest
// unit (n, u, m, S, M, H) whose value fits in 8 digits, rounded down, so the
// value never promises more than is left and is never 0 for a positive
// time. 0 or less gives "0n". (Every int64 count of nanoseconds fits in M.)
std::string format_grpc_timeout(std::chrono::nanoseconds left);

}  // namespace onelayer
