#include <doctest/doctest.h>

#include "core/retry/grpc_attempt.h"

using namespace onelayer;

TEST_CASE("GrpcOutcomeFollowsAHeadOf200WithoutGrpcStatus") {
  CHECK(grpc_outcome_follows(200, {{"content-type", "application/grpc"}}));
  CHECK_FALSE(grpc_outcome_follows(200, {{"content-type", "application/grpc"}, {"grpc-status", "14"}}));
  CHECK_FALSE(grpc_outcome_follows(200, {{"Grpc-Status", "0"}}));
  CHECK_FALSE(grpc_outcome_follows(503, {{"content-type", "application/grpc"}}));
}

TEST_CASE("GrpcOutcomeIsReadFromTrailersOnlyHeadOrTrailers") {
  AttemptResult r;
  read_grpc_outcome(200, {{"grpc-status", "14"}, {"grpc-retry-pushback-ms", "300"}}, r);
  CHECK(r.grpc == GrpcStatus::unavailable);
  REQUIRE(r.pushback);
  CHECK(*r.pushback == GrpcPushback{false, Millis{300}});

  AttemptResult stop;
  read_grpc_outcome(200, {{"grpc-status", "14"}, {"grpc-retry-pushback-ms", "-1"}}, stop);
  REQUIRE(stop.pushback);
  CHECK(stop.pushback->stop);

  AttemptResult invalid;
  read_grpc_outcome(200, {{"grpc-status", "99"}}, invalid);
  CHECK_FALSE(invalid.grpc);
  CHECK_FALSE(invalid.pushback);

  // A non-200 answer is classified by its HTTP status alone.
  AttemptResult http;
  read_grpc_outcome(503, {{"grpc-status", "14"}, {"grpc-retry-pushback-ms", "5"}}, http);
  CHECK_FALSE(http.grpc);
  CHECK_FALSE(http.pushback);
}
