// The names of the fields gRPC adds to HTTP (PROTOCOL-HTTP2.md, gRPC A6 and
// A6's pushback) that onelayer reads or writes. Here, below the HTTP rules,
// because the request rewrite (core/http) replaces grpc-timeout and
// grpc-previous-rpc-attempts on every gRPC attempt.
#pragma once

#include <string_view>

namespace onelayer {

inline constexpr std::string_view kGrpcStatusField = "grpc-status";
inline constexpr std::string_view kGrpcMessageField = "grpc-message";
inline constexpr std::string_view kGrpcTimeoutField = "grpc-timeout";
inline constexpr std::string_view kGrpcPushbackField = "grpc-retry-pushback-ms";
inline constexpr std::string_view kGrpcPreviousAttemptsField = "grpc-previous-rpc-attempts";

}  // namespace onelayer
