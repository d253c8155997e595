#include "shell/proxy/attempt.h"

#include <doctest/doctest.h>

using namespace onelayer;
using namespace std::chrono_literals;

TEST_CASE("AttemptOwesItsMembersVerdictExactlyOnce") {
  Attempt a;
  CHECK_FALSE(a.verdict_owed());
  CHECK(a.take_member() == UpstreamEndpoints::kNone);
  auto* ep = reinterpret_cast<EndpointState*>(0x10);  // only compared
  const TimePoint t0 = TimePoint{} + 5s;
  a.request_end_sent = true;
  a.begin(ep, 3, 1, t0);
  CHECK(a.endpoint == ep);
  CHECK(a.address == 1);
  CHECK(a.started == t0);
  CHECK_FALSE(a.request_end_sent);  // a new attempt has had nothing yet
  CHECK(a.verdict_owed());
  CHECK(a.take_member() == 3);
  CHECK_FALSE(a.verdict_owed());
  CHECK(a.take_member() == UpstreamEndpoints::kNone);
  CHECK(a.endpoint == ep);  // still there for the log and Host
}
