#include <doctest/doctest.h>

#include "core/upstream/outlier_detector.h"

using namespace onelayer;
using namespace std::chrono_literals;
using Kind = OutlierDetector::Event::Kind;
using Reason = OutlierDetector::Reason;
using Failure = OutlierDetector::Failure;

namespace {

const TimePoint kT0 = TimePoint{} + 1000s;

OutlierDetectionConfig od(uint32_t failures = 5, Millis base = 10s, Millis max = 300s, uint32_t pct = 50) {
  return {true, failures, base, max, pct};
}

HealthCheckConfig hc(uint32_t unhealthy = 3, uint32_t healthy = 2) {
  HealthCheckConfig c;
  c.enabled = true;
  c.unhealthy = unhealthy;
  c.healthy = healthy;
  return c;
}

OutlierDetector make(size_t n, OutlierDetectionConfig o = od(), HealthCheckConfig h = {}) {
  OutlierDetector d(o, h);
  d.resize(n);
  return d;
}

OutlierDetector::Event fail_n(OutlierDetector& d, size_t i, int n, TimePoint now) {
  OutlierDetector::Event ev;
  for (int k = 0; k < n; ++k) ev = d.on_failure(i, now, Failure::failure);
  return ev;
}

// Picks i for its probe and reports the verdict.
OutlierDetector::Event probe(OutlierDetector& d, size_t i, TimePoint now, bool ok) {
  REQUIRE(d.probe_due(i, now));
  d.on_picked(i, now);
  return ok ? d.on_success(i, now) : d.on_failure(i, now, Failure::failure);
}

}  // namespace

TEST_CASE("DetectorEjectsAfterConsecutiveFailures") {
  auto d = make(2);
  CHECK(fail_n(d, 0, 4, kT0).kind == Kind::none);
  CHECK(d.available(0, kT0));
  auto ev = d.on_failure(0, kT0, Failure::failure);
  CHECK(ev.kind == Kind::ejected);
  CHECK(ev.reason == Reason::consecutive_failures);
  CHECK(ev.duration == 10s);
  CHECK(ev.in_a_row == 1);
  CHECK(d.ejected(0));
  CHECK_FALSE(d.available(0, kT0));
  CHECK(d.ejections_total(0) == 1);
}

TEST_CASE("DetectorSuccessResetsTheFailureCount") {
  auto d = make(2);
  fail_n(d, 0, 4, kT0);
  d.on_success(0, kT0);
  CHECK(fail_n(d, 0, 4, kT0).kind == Kind::none);
  CHECK_FALSE(d.ejected(0));
}

TEST_CASE("DetectorProbeIsDueExactlyAtBaseEjection") {
  auto d = make(2);
  fail_n(d, 0, 5, kT0);
  CHECK_FALSE(d.probe_due(0, kT0 + 9999ms));
  CHECK_FALSE(d.available(0, kT0 + 9999ms));
  CHECK(d.probe_due(0, kT0 + 10s));
  CHECK(d.available(0, kT0 + 10s));
}

TEST_CASE("DetectorOnlyOneProbeAtATime") {
  auto d = make(2);
  fail_n(d, 0, 5, kT0);
  d.on_picked(0, kT0 + 10s);
  CHECK_FALSE(d.available(0, kT0 + 10s));  // its probe is in flight
  d.on_cancel(0);                          // the client went away: due again
  CHECK(d.probe_due(0, kT0 + 10s));
}

TEST_CASE("DetectorSuccessfulProbeReturnsTheEndpoint") {
  auto d = make(2);
  fail_n(d, 0, 5, kT0);
  auto ev = probe(d, 0, kT0 + 10s, true);
  CHECK(ev.kind == Kind::returned);
  CHECK_FALSE(d.ejected(0));
  CHECK(d.available(0, kT0 + 10s));
  // Back with a clean count.
  CHECK(fail_n(d, 0, 4, kT0 + 10s).kind == Kind::none);
}

TEST_CASE("DetectorFailedProbeEjectsForBaseTimesEjectionsInARow") {
  auto d = make(2);
  fail_n(d, 0, 5, kT0);
  auto ev = probe(d, 0, kT0 + 10s, false);
  CHECK(ev.kind == Kind::ejected);
  CHECK(ev.reason == Reason::probe_failed);
  CHECK(ev.duration == 20s);
  CHECK_FALSE(d.probe_due(0, kT0 + 10s + 19999ms));
  CHECK(d.probe_due(0, kT0 + 30s));
  ev = probe(d, 0, kT0 + 30s, false);
  CHECK(ev.duration == 30s);
  CHECK(ev.in_a_row == 3);
  CHECK(d.ejections_total(0) == 3);
}

TEST_CASE("DetectorEjectionTimeIsCappedAtMaxEjection") {
  auto d = make(2, od(5, 10s, 25s));
  fail_n(d, 0, 5, kT0);
  TimePoint t = kT0 + 10s;
  CHECK(probe(d, 0, t, false).duration == 20s);
  t += 20s;
  CHECK(probe(d, 0, t, false).duration == 25s);
  t += 25s;
  CHECK(probe(d, 0, t, false).duration == 25s);
}

TEST_CASE("DetectorEjectionsInARowResetAfterStayingInAsLongAsTheLastEjection") {
  auto d = make(2);
  fail_n(d, 0, 5, kT0);
  TimePoint t = kT0 + 10s;
  probe(d, 0, t, false);  // 20 s
  t += 20s;
  probe(d, 0, t, true);  // back at t
  d.on_success(0, t + 19999ms);  // not yet 20 s in
  CHECK(fail_n(d, 0, 5, t + 19999ms).duration == 30s);  // third in a row
  auto d2 = make(2);
  fail_n(d2, 0, 5, kT0);
  t = kT0 + 10s;
  probe(d2, 0, t, false);
  t += 20s;
  probe(d2, 0, t, true);
  d2.on_success(0, t + 20s);  // in for as long as its last ejection
  CHECK(fail_n(d2, 0, 5, t + 20s).duration == 10s);
}

TEST_CASE("DetectorConnectTimeoutEjectsAtOnce") {
  auto d = make(2);
  auto ev = d.on_failure(1, kT0, Failure::connect_timeout);
  CHECK(ev.kind == Kind::ejected);
  CHECK(ev.reason == Reason::connect_timeout);
  CHECK(ev.duration == 10s);
}

TEST_CASE("DetectorNeverEjectsTheLastEndpoint") {
  auto d = make(1, od(1, 10s, 300s, 100));
  CHECK(d.on_failure(0, kT0, Failure::connect_timeout).kind == Kind::none);
  CHECK_FALSE(d.ejected(0));
  auto d2 = make(2, od(1, 10s, 300s, 100));
  CHECK(d2.on_failure(0, kT0, Failure::failure).kind == Kind::ejected);
  CHECK(d2.on_failure(1, kT0, Failure::failure).kind == Kind::none);
  CHECK(d2.available(1, kT0));
}

TEST_CASE("DetectorHonoursMaxEjectedPercent") {
  auto d = make(4, od(1, 10s, 300s, 50));
  CHECK(d.on_failure(0, kT0, Failure::failure).kind == Kind::ejected);
  CHECK(d.on_failure(1, kT0, Failure::failure).kind == Kind::ejected);  // 2 of 4 = 50%
  CHECK(d.on_failure(2, kT0, Failure::failure).kind == Kind::none);     // 3 of 4 would be 75%
  // The refused ejection keeps its count: once there is room, the next failure ejects.
  probe(d, 0, kT0 + 10s, true);
  CHECK(d.on_failure(2, kT0 + 10s, Failure::failure).kind == Kind::ejected);
  auto d3 = make(3, od(1, 10s, 300s, 50));
  CHECK(d3.on_failure(0, kT0, Failure::failure).kind == Kind::ejected);  // 1 of 3
  CHECK(d3.on_failure(1, kT0, Failure::failure).kind == Kind::none);     // 2 of 3 > 50%
}

TEST_CASE("DetectorIgnoresResultsOfAttemptsStartedBeforeTheEjection") {
  auto d = make(2);
  fail_n(d, 0, 5, kT0);
  CHECK(d.on_success(0, kT0 + 1ms).kind == Kind::none);
  CHECK(d.on_failure(0, kT0 + 1ms, Failure::failure).kind == Kind::none);
  CHECK(d.ejected(0));
  CHECK(d.ejections_total(0) == 1);
  CHECK_FALSE(d.probe_due(0, kT0 + 9999ms));  // the ejection was not extended either
  CHECK(d.probe_due(0, kT0 + 10s));
}

TEST_CASE("DetectorDisabledNeverEjectsPassively") {
  OutlierDetectionConfig off = od(1);
  off.enabled = false;
  auto d = make(3, off);
  CHECK(fail_n(d, 0, 10, kT0).kind == Kind::none);
  CHECK(d.on_failure(0, kT0, Failure::connect_timeout).kind == Kind::none);
  CHECK_FALSE(d.ejected(0));
}

TEST_CASE("DetectorHealthChecksEjectAfterUnhealthyAndReturnAfterHealthy") {
  auto d = make(2, od(), hc(3, 2));
  CHECK(d.on_check(0, false, kT0).kind == Kind::none);
  CHECK(d.on_check(0, false, kT0 + 5s).kind == Kind::none);
  auto ev = d.on_check(0, false, kT0 + 10s);
  CHECK(ev.kind == Kind::ejected);
  CHECK(ev.reason == Reason::health_check);
  // No timed probe: only checks bring it back.
  CHECK_FALSE(d.probe_due(0, kT0 + 1h));
  CHECK_FALSE(d.available(0, kT0 + 1h));
  CHECK(d.on_check(0, true, kT0 + 15s).kind == Kind::none);
  CHECK(d.on_check(0, true, kT0 + 20s).kind == Kind::returned);
  CHECK(d.available(0, kT0 + 20s));
}

TEST_CASE("DetectorAPassedCheckBreaksTheUnhealthyStreak") {
  auto d = make(2, od(), hc(3, 2));
  d.on_check(0, false, kT0);
  d.on_check(0, false, kT0);
  d.on_check(0, true, kT0);
  CHECK(d.on_check(0, false, kT0).kind == Kind::none);
  CHECK(d.on_check(0, false, kT0).kind == Kind::none);
  CHECK(d.on_check(0, false, kT0).kind == Kind::ejected);
}

TEST_CASE("DetectorAllInFailingOnlyWhenEveryEndpointThatIsInFails") {
  auto d = make(2);
  CHECK_FALSE(d.all_in_failing());
  d.on_success(1, kT0);
  d.on_failure(0, kT0, Failure::failure);
  CHECK_FALSE(d.all_in_failing());  // endpoint 1 still answers
  d.on_failure(1, kT0, Failure::failure);
  CHECK(d.all_in_failing());
  // Once 0 is ejected, 1 alone is the upstream.
  auto e = make(2);
  e.on_success(1, kT0);
  fail_n(e, 0, 5, kT0);
  CHECK_FALSE(e.all_in_failing());
  e.on_failure(1, kT0, Failure::failure);
  CHECK(e.all_in_failing());
}

TEST_CASE("DetectorAbsentEndpointsAreNeitherPickedNorCounted") {
  auto d = make(3, od(1, 10s, 300s, 50));
  d.set_present(2, false);
  CHECK_FALSE(d.available(2, kT0));
  CHECK(d.on_failure(0, kT0, Failure::failure).kind == Kind::ejected);  // 1 of 2 present
  CHECK(d.on_failure(1, kT0, Failure::failure).kind == Kind::none);     // the last one in
}

TEST_CASE("DetectorAServerErrorBreaksTheStreakButMarksTheEndpointFailing") {
  auto d = make(2);
  fail_n(d, 0, 4, kT0);
  d.on_server_error(0);
  CHECK(fail_n(d, 0, 4, kT0).kind == Kind::none);
  d.on_success(1, kT0);
  d.on_server_error(1);
  CHECK(d.all_in_failing());
}
