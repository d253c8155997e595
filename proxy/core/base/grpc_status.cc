#include "core/base/grpc_status.h"

#include <array>

namespace onelayer {
namespace {

constexpr std::array<const char*, kGrpcStatusCount> kNames = {
    "ok",           "cancelled",          "unknown",        "invalid-argument",  "deadline-exceeded",
    "not-found",    "already-exists",     "permission-denied", "resource-exhausted", "failed-precondition",
    "aborted",      "out-of-range",       "unimplemented",  "internal",          "unavailable",
    "data-loss",    "unauthenticated"};

}  // namespace

const char* grpc_status_name(GrpcStatus s) {
  const auto i = static_cast<size_t>(s);
  return i < kNames.size() ? kNames[i] : "unknown";
}

std::optional<GrpcStatus> grpc_status_from_name(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (name == kNames[i]) return static_cast<GrpcStatus>(i);
  }
  return std::nullopt;
}

std::optional<GrpcStatus> grpc_status_from_code(int code) {
  if (code < 0 || code >= kGrpcStatusCount) return std::nullopt;
  return static_cast<GrpcStatus>(code);
}

bool is_retry_on_grpc_status(GrpcStatus s) {
  switch (s) {
    case GrpcStatus::cancelled:
    case GrpcStatus::deadline_exceeded:
    case GrpcStatus::internal:
    case GrpcStatus::resource_exhausted:
    case GrpcStatus::unavailable: return true;
    default: return false;
  }
}

std::optional<GrpcStatus> parse_grpc_status(std::string_view value) {
  // Two digits reach every code; more can only be leading zeros or too big.
  if (value.empty() || value.size() > 2) return std::nullopt;
  int code = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    code = code * 10 + (c - '0');
  }
  return grpc_status_from_code(code);
}

}  // namespace onelayer
