#include <doctest/doctest.h>

#include <string>
#include <utility>

#include "core/base/grpc_status.h"

using namespace onelayer;

TEST_CASE("GrpcStatusNamesAreEnvoysAndRoundTripForEveryCode") {
  const std::pair<GrpcStatus, const char*> names[] = {
      {GrpcStatus::ok, "ok"},
      {GrpcStatus::cancelled, "cancelled"},
      {GrpcStatus::deadline_exceeded, "deadline-exceeded"},
      {GrpcStatus::resource_exhausted, "resource-exhausted"},
      {GrpcStatus::internal, "internal"},
      {GrpcStatus::unavailable, "unavailable"},
      {GrpcStatus::failed_precondition, "failed-precondition"},
      {GrpcStatus::unauthenticated, "unauthenticated"}};
  for (const auto& [status, name] : names) CHECK(std::string(grpc_status_name(status)) == name);
  for (int code = 0; code < kGrpcStatusCount; ++code) {
    auto s = grpc_status_from_code(code);
    REQUIRE(s);
    CHECK(grpc_code(*s) == code);
    CHECK(grpc_status_from_name(grpc_status_name(*s)) == s);
  }
  CHECK(grpc_code(GrpcStatus::unavailable) == 14);
  CHECK(grpc_code(GrpcStatus::deadline_exceeded) == 4);
  CHECK_FALSE(grpc_status_from_code(-1));
  CHECK_FALSE(grpc_status_from_code(17));
  for (auto word : {"UNAVAILABLE", "Unavailable", "deadline_exceeded", "", "14", "unavailable "})
    CHECK_FALSE(grpc_status_from_name(word));
}

TEST_CASE("RetryOnTakesExactlyEnvoysFiveGrpcNames") {
  int listed = 0;
  for (int code = 0; code < kGrpcStatusCount; ++code)
    if (is_retry_on_grpc_status(static_cast<GrpcStatus>(code))) ++listed;
  CHECK(listed == 5);
  for (auto s : {GrpcStatus::cancelled, GrpcStatus::deadline_exceeded, GrpcStatus::internal,
                 GrpcStatus::resource_exhausted, GrpcStatus::unavailable})
    CHECK(is_retry_on_grpc_status(s));
}

TEST_CASE("GrpcStatusValueIsDigitsOnlyFromZeroToSixteen") {
  CHECK(parse_grpc_status("0") == GrpcStatus::ok);
  CHECK(parse_grpc_status("14") == GrpcStatus::unavailable);
  CHECK(parse_grpc_status("16") == GrpcStatus::unauthenticated);
  CHECK(parse_grpc_status("04") == GrpcStatus::deadline_exceeded);
  for (auto bad : {"", "17", "99", "-1", "+1", " 14", "14 ", "1a", "014", "x", "1.0"})
    CHECK_FALSE(parse_grpc_status(bad));
}
