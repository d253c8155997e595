#include <doctest/doctest.h>

#include <string>

#include "core/grpc/grpc_error_answer.h"

using namespace onelayer;

namespace {

std::string field(const Headers& h, std::string_view name) {
  const Header* f = find_header(h, name);
  return f ? f->value : "<none>";
}

}  // namespace

TEST_CASE("OnelayerErrorReasonsMapToTheDocumentedGrpcStatuses") {
  for (auto r : {"connect_failure", "upstream_reset", "bad_upstream_response", "circuit_open", "draining",
                 "upstream_tls", "max_connections"})
    CHECK(grpc_status_for_error(r, 502) == GrpcStatus::unavailable);
  CHECK(grpc_status_for_error("deadline_exceeded", 504) == GrpcStatus::deadline_exceeded);
  CHECK(grpc_status_for_error("no_route", 404) == GrpcStatus::unimplemented);
  CHECK(grpc_status_for_error("body_too_large", 413) == GrpcStatus::resource_exhausted);
  CHECK(grpc_status_for_error("headers_too_large", 431) == GrpcStatus::resource_exhausted);
  CHECK(grpc_status_for_error("overloaded", 503) == GrpcStatus::resource_exhausted);
  CHECK(grpc_status_for_error("bad_request", 400) == GrpcStatus::internal);
  CHECK(grpc_status_for_error("header_timeout", 408) == GrpcStatus::internal);
  // The reason wins over the HTTP status it came with.
  CHECK(grpc_status_for_error("deadline_exceeded", 503) == GrpcStatus::deadline_exceeded);
}

TEST_CASE("OtherReasonsFollowGrpcsHttpStatusMapping") {
  CHECK(grpc_status_for_error("fault_injected", 503) == GrpcStatus::unavailable);
  CHECK(grpc_status_for_error("fault_injected", 500) == GrpcStatus::unknown);
  CHECK(grpc_status_for_http_status(400) == GrpcStatus::internal);
  CHECK(grpc_status_for_http_status(401) == GrpcStatus::unauthenticated);
  CHECK(grpc_status_for_http_status(403) == GrpcStatus::permission_denied);
  CHECK(grpc_status_for_http_status(404) == GrpcStatus::unimplemented);
  for (int s : {429, 502, 503, 504}) CHECK(grpc_status_for_http_status(s) == GrpcStatus::unavailable);
  for (int s : {200, 418, 500, 501}) CHECK(grpc_status_for_http_status(s) == GrpcStatus::unknown);
}

TEST_CASE("GrpcErrorAnswerIsTrailersOnlyFields") {
  Headers out;
  append_grpc_error_fields(out, "connect_failure", 502, {{"x-retry-exhausted", "layer-a"}});
  const Headers expected = {{"content-type", "application/grpc"},
                            {"grpc-status", "14"},
                            {"grpc-message", "connect_failure"},
                            {"x-onelayer-error", "connect_failure"},
                            {"x-retry-exhausted", "layer-a"}};
  CHECK(out == expected);
}

TEST_CASE("OverloadedGrpcAnswerCarriesPushbackInsteadOfRetryAfter") {
  Headers out;
  append_grpc_error_fields(out, "overloaded", 503, {{"Retry-After", "3"}, {"Content-Length", "10"}});
  CHECK(field(out, "grpc-status") == "8");
  CHECK(field(out, "grpc-retry-pushback-ms") == "3000");
  CHECK(field(out, "retry-after") == "<none>");
  CHECK(field(out, "content-length") == "<none>");
  Headers dated;
  append_grpc_error_fields(dated, "overloaded", 503, {{"Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"}});
  CHECK(field(dated, "grpc-retry-pushback-ms") == "<none>");
  CHECK(dated.size() == 4);
}

TEST_CASE("AnInjectedGrpcStatusReplacesTheMappedOne") {
  Headers out;
  append_grpc_error_fields(out, "fault_injected", 503, {{"grpc-status", "13"}});
  CHECK(field(out, "grpc-status") == "13");
  CHECK(count_headers(out, "grpc-status") == 1);
  Headers bad;
  append_grpc_error_fields(bad, "fault_injected", 503, {{"grpc-status", "99"}});
  CHECK(field(bad, "grpc-status") == "14");  // invalid: the mapping stands
  CHECK(count_headers(bad, "grpc-status") == 1);
}
