#include <doctest/doctest.h>

#include "core/fleet/retried_arrival.h"

using namespace onelayer;
using namespace onelayer::fleet;

namespace {
bool retried(std::initializer_list<std::pair<const char*, const char*>> kv) {
  Headers h;
  for (auto& [k, v] : kv) h.push_back({k, v});
  return arrival_was_retried(h, "x-retry-attempt");
}
}  // namespace

TEST_CASE("FleetArrivalRetriedByAnyLayerCounts") {
  CHECK_FALSE(retried({}));
  CHECK_FALSE(retried({{"x-retry-attempt", "1"}}));
  CHECK(retried({{"X-Retry-Attempt", "2"}}));
  CHECK_FALSE(retried({{"grpc-previous-rpc-attempts", "0"}}));
  CHECK(retried({{"grpc-previous-rpc-attempts", "1"}}));
  CHECK_FALSE(retried({{"x-envoy-attempt-count", "1"}}));
  CHECK(retried({{"x-envoy-attempt-count", "3"}}));
}

TEST_CASE("FleetArrivalIgnoresValuesThatAreNotNumbers") {
  CHECK_FALSE(retried({{"x-retry-attempt", "2x"}}));
  CHECK_FALSE(retried({{"x-envoy-attempt-count", "-5"}}));
  CHECK_FALSE(retried({{"x-retry-attempt", ""}}));
  CHECK_FALSE(retried({{"x-retry-attempt", "99999999999999999999999"}}));
}
