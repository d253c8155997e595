// gRPC status codes (grpc/doc/statuscodes.md) and their names: the
// `retry_on` words (Envoy's spelling: lower case, hyphens), the
// onelayer_retries_total reason of a gRPC trigger and the access log.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace onelayer {

enum class GrpcStatus : uint8_t {
  ok = 0,
  cancelled = 1,
  unknown = 2,
  invalid_argument = 3,
  deadline_exceeded = 4,
  not_found = 5,
  already_exists = 6,
  permission_denied = 7,
  resource_exhausted = 8,
  failed_precondition = 9,
  aborted = 10,
  out_of_range = 11,
  unimplemented = 12,
  internal = 13,
  unavailable = 14,
  data_loss = 15,
  unauthenticated = 16,
};
inline constexpr int kGrpcStatusCount = 17;

constexpr int grpc_code(GrpcStatus s) { return static_cast<int>(s); }

// "ok", "cancelled", "unknown", "invalid-argument", "deadline-exceeded", ...
// "unauthenticated".
const char* grpc_status_name(GrpcStatus);
// The inverse of grpc_status_name (exact, lower case); nullopt for any other word.
std::optional<GrpcStatus> grpc_status_from_name(std::string_view name);
// The status of code 0..16; nullopt outside.
std::optional<GrpcStatus> grpc_status_from_code(int code);

// The five names `retry_on` accepts (Envoy's retry-grpc-on set): cancelled,
// deadline-exceeded, internal, resource-exhausted, unavailable.
bool is_retry_on_grpc_status(GrpcStatus);

// A grpc-status field value: one or two digits (no sign, no spaces) naming 0..16.
// Anything else (empty, "14 ", "+1", "17", "014") is invalid: nullopt.
std::optional<GrpcStatus> parse_grpc_status(std::string_view value);

}  // namespace onelayer
