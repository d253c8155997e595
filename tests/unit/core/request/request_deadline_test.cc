#include <doctest/doctest.h>

#include "core/request/request_deadline.h"

using namespace onelayer;

TEST_CASE("GrpcTimeoutShortensTheRouteDeadlineLikeRequestTimeoutMs") {
  const HeaderNames names;
  const Millis route{15'000};
  CHECK(request_timeout(route, {}, names) == route);
  CHECK(request_timeout(route, {{"grpc-timeout", "600m"}}, names) == Millis{600});
  CHECK(request_timeout(route, {{"Grpc-Timeout", "2S"}, {"x-request-timeout-ms", "900"}}, names) == Millis{900});
  CHECK(request_timeout(route, {{"grpc-timeout", "300m"}, {"x-request-timeout-ms", "900"}}, names) == Millis{300});
  // A caller never lengthens the route's deadline.
  CHECK(request_timeout(route, {{"grpc-timeout", "1H"}}, names) == route);
  // Garbage is ignored, the smallest valid field wins.
  CHECK(request_timeout(route, {{"grpc-timeout", "5x"}}, names) == route);
  CHECK(request_timeout(route, {{"grpc-timeout", "800m"}, {"grpc-timeout", "bad"}, {"grpc-timeout", "700m"}}, names) ==
        Millis{700});
  CHECK(incoming_grpc_timeout({{"grpc-timeout", "1n"}}) == Millis{1});
  CHECK_FALSE(incoming_grpc_timeout({{"x-request-timeout-ms", "5"}}));
}
