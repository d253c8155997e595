#include "core/grpc/grpc_error_answer.h"

#include <array>
#include <string>
#include <utility>

#include "core/grpc/grpc_protocol.h"

namespace onelayer {
namespace {

constexpr std::array<std::pair<std::string_view, GrpcStatus>, 15> kByReason = {{
    {"connect_failure", GrpcStatus::unavailable},
    {"upstream_reset", GrpcStatus::unavailable},
    {"bad_upstream_response", GrpcStatus::unavailable},
    {"upstream_tls", GrpcStatus::unavailable},
    {"circuit_open", GrpcStatus::unavailable},
    {"draining", GrpcStatus::unavailable},
    {"max_connections", GrpcStatus::unavailable},
    {"deadline_exceeded", GrpcStatus::deadline_exceeded},
    {"no_route", GrpcStatus::unimplemented},
    {"body_too_large", GrpcStatus::resource_exhausted},
    {"headers_too_large", GrpcStatus::resource_exhausted},
    {"overloaded", GrpcStatus::resource_exhausted},
    {"bad_request", GrpcStatus::internal},
    {"header_timeout", GrpcStatus::internal},
    {"upgrade_not_allowed", GrpcStatus::internal},
}};

// Delay-seconds (RFC 9110 10.2.3) as milliseconds; -1 for anything else.
// Shedding writes whole seconds, so a date never needs reading here.
int64_t retry_after_ms(std::string_view value) {
  const std::string_view v = trim_ows(value);
  if (v.empty() || v.size() > 9) return -1;
  int64_t s = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return -1;
    s = s * 10 + (c - '0');
  }
  return s * 1000;
}

}  // namespace

GrpcStatus grpc_status_for_http_status(int http_status) {
  switch (http_status) {
    case 400: return GrpcStatus::internal;
    case 401: return GrpcStatus::unauthenticated;
    case 403: return GrpcStatus::permission_denied;
    case 404: return GrpcStatus::unimplemented;
    case 429:
    case 502:
    case 503:
    case 504: return GrpcStatus::unavailable;
    default: return GrpcStatus::unknown;
  }
}

GrpcStatus grpc_status_for_error(std::string_view reason, int http_status) {
  for (const auto& [name, status] : kByReason) {
    if (name == reason) return status;
  }
  return grpc_status_for_http_status(http_status);
}

void append_grpc_error_fields(Headers& out, std::string_view reason, int http_status, const Headers& extra) {
  GrpcStatus status = grpc_status_for_error(reason, http_status);
  if (const Header* given = find_header(extra, kGrpcStatusField)) status = parse_grpc_status(given->value).value_or(status);
  out.push_back({"content-type", "application/grpc"});
  out.push_back({std::string(kGrpcStatusField), std::to_string(grpc_code(status))});
  out.push_back({std::string(kGrpcMessageField), std::string(reason)});
  out.push_back({"x-onelayer-error", std::string(reason)});
  for (const Header& f : extra) {
    if (iequals(f.name, "retry-after")) {
      const int64_t ms = retry_after_ms(f.value);
      if (ms >= 0) out.push_back({std::string(kGrpcPushbackField), std::to_string(ms)});
      continue;
    }
    if (iequals(f.name, "content-length") || iequals(f.name, "transfer-encoding") ||
        iequals(f.name, kGrpcStatusField))
      continue;
    out.push_back(f);
  }
}

}  // namespace onelayer
