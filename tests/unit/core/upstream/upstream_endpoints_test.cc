#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/upstream/upstream_endpoints.h"
#include "scripted_random.h"

using namespace onelayer;
using namespace std::chrono_literals;
using onelayer::test::ScriptedRandom;
using Result = UpstreamEndpoints::Result;
using Kind = OutlierDetector::Event::Kind;

namespace {

const TimePoint kT0 = TimePoint{} + 1000s;
constexpr uint32_t kNone = UpstreamEndpoints::kNone;

Upstream upstream(std::vector<HostPort> eps, Balance b = Balance::round_robin) {
  Upstream u;
  u.name = "u";
  u.endpoints = std::move(eps);
  u.balance = b;
  return u;
}

const HostPort kA{"127.0.0.1", 8001}, kB{"127.0.0.1", 8002}, kC{"127.0.0.1", 8003};

}  // namespace

TEST_CASE("EndpointsLiteralEndpointsAreOneMemberEach") {
  UpstreamEndpoints e(upstream({kA, kB}));
  auto m = e.members();
  REQUIRE(m.size() == 2);
  CHECK(m[0].label == "127.0.0.1:8001");
  CHECK(m[0].address == "127.0.0.1");
  CHECK(m[1].endpoint == 1);
}

TEST_CASE("EndpointsAnEjectedMemberGetsNoAttemptsUntilItsProbe") {
  UpstreamEndpoints e(upstream({kA, kB}));
  ScriptedRandom none{};
  for (int k = 0; k < 5; ++k) {
    auto p = e.pick(kT0, none, 0, kNone);
    if (p.member == 0) {
      e.report(0, Result::failure, kT0, 1ms);
    } else {
      e.report(p.member, Result::success, kT0, 1ms);
    }
  }
  // round_robin: 0,1,0,1,0 -> three failures of 0 so far; two more eject it.
  e.report(e.pick(kT0, none, 0, kNone).member, Result::success, kT0, 1ms);  // 1
  auto p = e.pick(kT0, none, 0, kNone);
  REQUIRE(p.member == 0);
  e.report(0, Result::failure, kT0, 1ms);
  e.report(e.pick(kT0, none, 0, kNone).member, Result::success, kT0, 1ms);
  p = e.pick(kT0, none, 0, kNone);
  REQUIRE(p.member == 0);
  auto rep = e.report(0, Result::failure, kT0, 1ms);
  CHECK(rep.event.kind == Kind::ejected);
  CHECK_FALSE(rep.upstream_failing);
  for (int k = 0; k < 20; ++k) {
    auto q = e.pick(kT0 + 9999ms, none, 0, kNone);
    CHECK(q.member == 1);
    e.report(q.member, Result::success, kT0 + 9999ms, 1ms);
  }
  // Due: the probe goes first, and only one.
  auto probe = e.pick(kT0 + 10s, none, 0, kNone);
  CHECK(probe.member == 0);
  CHECK(probe.probe);
  auto other = e.pick(kT0 + 10s, none, 0, kNone);
  CHECK(other.member == 1);
  e.report(1, Result::success, kT0 + 10s, 1ms);
  CHECK(e.report(0, Result::success, kT0 + 10s + 2ms, 2ms).event.kind == Kind::returned);
  CHECK_FALSE(e.members()[0].ejected);
  CHECK(e.members()[0].ejections_total == 1);
}

TEST_CASE("EndpointsARetryPrefersAMemberNotTriedYet") {
  UpstreamEndpoints e(upstream({kA, kB, kC}, Balance::p2c));
  ScriptedRandom rng{0, 0, 0, 0};
  auto first = e.pick(kT0, rng, 0, kNone);
  uint64_t tried = uint64_t{1} << first.member;
  auto second = e.pick(kT0, rng, tried, first.member);
  CHECK(second.member != first.member);
  tried |= uint64_t{1} << second.member;
  ScriptedRandom none{};
  auto third = e.pick(kT0, none, tried, second.member);  // one left: no draw
  CHECK(third.member != first.member);
  CHECK(third.member != second.member);
}

TEST_CASE("EndpointsBreakerFailureOnlyWhenEveryMemberInFails") {
  UpstreamEndpoints e(upstream({kA, kB}));
  ScriptedRandom none{};
  e.pick(kT0, none, 0, kNone);
  e.pick(kT0, none, 0, kNone);
  e.report(1, Result::success, kT0, 1ms);
  CHECK_FALSE(e.report(0, Result::failure, kT0, 1ms).upstream_failing);
  e.pick(kT0, none, 0, kNone);
  CHECK(e.report(1, Result::failure, kT0, 1ms).upstream_failing);
}

TEST_CASE("EndpointsConnectTimeoutEjectsAtOnce") {
  UpstreamEndpoints e(upstream({kA, kB}));
  ScriptedRandom none{};
  auto p = e.pick(kT0, none, 0, kNone);
  auto rep = e.report(p.member, Result::connect_timeout, kT0 + 250ms, 250ms);
  CHECK(rep.event.kind == Kind::ejected);
  CHECK(rep.event.reason == OutlierDetector::Reason::connect_timeout);
  for (int k = 0; k < 4; ++k) CHECK(e.pick(kT0 + 1s, none, 0, kNone).member != p.member);
}

TEST_CASE("EndpointsDnsNamesBalancePerResolvedAddress") {
  UpstreamEndpoints e(upstream({{"svc.local", 8080}, kA}));
  auto m = e.members();
  REQUIRE(m.size() == 2);
  CHECK(m[0].label == "svc.local:8080");
  CHECK(m[0].address.empty());  // not resolved yet: any of its addresses
  e.set_addresses(0, {"10.0.0.1", "10.0.0.2"});
  m = e.members();
  REQUIRE(m.size() == 3);
  CHECK(m[0].label == "127.0.0.1:8001");
  CHECK(m[1].label == "svc.local:8080/10.0.0.1");
  CHECK(m[2].label == "svc.local:8080/10.0.0.2");
  CHECK(m[2].address == "10.0.0.2");
  ScriptedRandom none{};
  std::vector<std::string> got;
  for (int k = 0; k < 3; ++k) {
    auto p = e.pick(kT0, none, 0, kNone);
    got.emplace_back(p.address);
    e.report(p.member, Result::success, kT0, 1ms);
  }
  CHECK(got == std::vector<std::string>{"127.0.0.1", "10.0.0.1", "10.0.0.2"});
  // An address that leaves DNS leaves the balancer.
  e.set_addresses(0, {"10.0.0.2"});
  m = e.members();
  REQUIRE(m.size() == 2);
  CHECK(m[1].label == "svc.local:8080/10.0.0.2");
}

TEST_CASE("EndpointsDualStackAnswerBalancesOnlyItsIpv4Addresses") {
  // localhost on Debian's /etc/hosts: ::1 and 127.0.0.1, in either order.
  UpstreamEndpoints e(upstream({{"localhost", 8080}}));
  e.set_addresses(0, {"::1", "127.0.0.1"});
  auto m = e.members();
  REQUIRE(m.size() == 1);
  CHECK(m[0].label == "localhost:8080/127.0.0.1");
  ScriptedRandom none{};
  for (int k = 0; k < 4; ++k) {
    auto p = e.pick(kT0, none, 0, kNone);
    CHECK(p.address == "127.0.0.1");  // never ::1: a server on 127.0.0.1 only sees every request
    e.report(p.member, Result::success, kT0, 1ms);
  }
  // An IPv6-only answer is balanced on.
  UpstreamEndpoints v6(upstream({{"v6.svc", 8080}}));
  v6.set_addresses(0, {"fd00::1", "fd00::2"});
  m = v6.members();
  REQUIRE(m.size() == 2);
  CHECK(m[0].address == "fd00::1");
  CHECK(m[1].address == "fd00::2");
}

TEST_CASE("EndpointsHealthCheckVerdictsEjectAndReturn") {
  Upstream u = upstream({kA, kB});
  u.health_check.enabled = true;
  u.health_check.unhealthy = 1;
  u.health_check.healthy = 1;
  UpstreamEndpoints e(u);
  CHECK(e.check(0, false, kT0).event.kind == Kind::ejected);
  ScriptedRandom none{};
  CHECK(e.pick(kT0 + 1h, none, 0, kNone).member == 1);
  CHECK(e.check(0, true, kT0 + 1h).event.kind == Kind::returned);
}

TEST_CASE("EndpointsSameMembersDecidesWhetherStateCarriesOver") {
  Upstream u = upstream({kA, kB});
  UpstreamEndpoints e(u);
  Upstream v = u;
  v.outlier_detection.consecutive_failures = 2;
  CHECK(e.same_members(v));
  v.endpoints.push_back(kC);
  CHECK_FALSE(e.same_members(v));
  Upstream w = u;
  w.balance = Balance::p2c;
  CHECK_FALSE(e.same_members(w));
}
