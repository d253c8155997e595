#include <doctest/doctest.h>

#include "core/base/random.h"
#include "core/hedging/hedge_policy.h"
#include "core/retry/retry_budget.h"

using namespace onelayer;
using namespace std::chrono_literals;

namespace {

const TimePoint kT0 = TimePoint{} + 100s;

RetryPolicy hedged_policy(LatencyThreshold after, uint32_t max = 1, uint32_t max_attempts = 3) {
  RetryPolicy p;
  p.max_attempts = max_attempts;
  p.hedge.enabled = true;
  p.hedge.after = after;
  p.hedge.max = max;
  return p;
}

LatencyThreshold fixed(Millis d) { return LatencyThreshold{d, 0}; }
LatencyThreshold pct(uint8_t p) { return LatencyThreshold{Millis{0}, p}; }

RetryState::Request get() { return {"GET", false, true, false}; }

// 95 first attempts of 4ms and 5 of 500ms: p90 ~4ms, p99 ~500ms.
void fill(UpstreamLatency& l, TimePoint at) {
  for (int i = 0; i < 95; ++i) l.first_attempt.record(4ms, at);
  for (int i = 0; i < 5; ++i) l.first_attempt.record(500ms, at);
  for (int i = 0; i < 100; ++i) l.success.record(i < 50 ? 4ms : 300ms, at);
}

// A GET whose first attempt started at kT0, with its plan.
struct Hedged {
  RetryPolicy p;
  RetryState rs;
  HedgePlan h;
  UpstreamLatency lat;
  explicit Hedged(RetryPolicy policy, Millis timeout = 1000ms) : p(std::move(policy)), rs(p, timeout, kT0, get()), h(p) {
    rs.on_attempt_started();
  }
  HedgePlan::Decision due(TimePoint at, RetryBudget* budget = nullptr, HedgePlan::Due d = {}) {
    return h.on_due(rs, at, d, budget, lat);
  }
};

}  // namespace

TEST_CASE("HedgeAppliesOnlyToRequestsThisLayerMayRepeat") {
  RetryPolicy p = hedged_policy(fixed(50ms));
  CHECK(HedgePlan::applies(p, RetryState(p, 1000ms, kT0, get())));
  // POST without a key: never hedged; with one: hedged.
  CHECK_FALSE(HedgePlan::applies(p, RetryState(p, 1000ms, kT0, {"POST", false, true, false})));
  CHECK(HedgePlan::applies(p, RetryState(p, 1000ms, kT0, {"POST", true, true, false})));
  // An idempotent route makes POST repeatable.
  CHECK(HedgePlan::applies(p, RetryState(p, 1000ms, kT0, {"POST", false, true, false, true})));
  // A body past buffer_limit, an outer owner: never.
  CHECK_FALSE(HedgePlan::applies(p, RetryState(p, 1000ms, kT0, {"GET", false, false, false})));
  CHECK_FALSE(HedgePlan::applies(p, RetryState(p, 1000ms, kT0, {"GET", false, true, true})));
  // No hedge block.
  RetryPolicy plain;
  plain.max_attempts = 3;
  CHECK_FALSE(HedgePlan::applies(plain, RetryState(plain, 1000ms, kT0, get())));
}

TEST_CASE("HedgeFixedAfterIsDueExactlyAfterFromTheFirstAttempt") {
  Hedged x(hedged_policy(fixed(50ms)));
  CHECK(x.h.next_delay(x.lat, kT0, kT0) == 50ms);
  CHECK(x.h.next_delay(x.lat, kT0, kT0 + 20ms) == 30ms);
  CHECK(x.h.next_delay(x.lat, kT0, kT0 + 80ms) == 0ms);
  RetryBudget budget({0.2, 10}, kT0);
  HedgePlan::Decision d = x.due(kT0 + 50ms, &budget);
  CHECK(d.hedge);
  CHECK(d.declined == Decline::none);
  CHECK(x.h.sent() == 1);
  // One token spent; the floor refilled half of one meanwhile (10 a second).
  CHECK(budget.tokens(kT0 + 50ms) == doctest::Approx(9.5));
  // max 1: nothing more is planned or sent.
  CHECK_FALSE(x.h.next_delay(x.lat, kT0 + 50ms, kT0 + 50ms).has_value());
  CHECK_FALSE(x.due(kT0 + 100ms, &budget).hedge);
}

TEST_CASE("HedgeAfterPercentileReadsTheUpstreamsFirstAttemptLatency") {
  Hedged x(hedged_policy(pct(90)));
  // Too few samples: no estimate, no hedge planned.
  CHECK_FALSE(x.h.next_delay(x.lat, kT0, kT0).has_value());
  fill(x.lat, kT0);
  // p90 of the mix is 4ms, read as its bucket's upper bound (4.096ms), rounded up to 5ms.
  CHECK(x.h.next_delay(x.lat, kT0, kT0) == 5ms);
  RetryPolicy p99 = hedged_policy(pct(99));
  HedgePlan h99(p99);
  const Millis d = *h99.next_delay(x.lat, kT0, kT0);
  CHECK(d >= 500ms);
  CHECK(d <= 563ms);
}

TEST_CASE("HedgeNotSentOnceAHeadArrivedOrAfterMax") {
  Hedged x(hedged_policy(fixed(10ms), 2));
  HedgePlan::Due head;
  head.head_received = true;
  HedgePlan::Decision d = x.due(kT0 + 10ms, nullptr, head);
  CHECK_FALSE(d.hedge);
  CHECK(d.declined == Decline::none);  // not needed: not counted
  CHECK(x.due(kT0 + 10ms).hedge);
  x.rs.on_attempt_started();
  CHECK(x.h.next_delay(x.lat, kT0 + 10ms, kT0 + 10ms) == 10ms);
  CHECK(x.due(kT0 + 20ms).hedge);
  x.rs.on_attempt_started();
  CHECK(x.h.sent() == 2);
  CHECK(x.due(kT0 + 30ms).declined == Decline::none);
}

TEST_CASE("HedgeWithoutABudgetTokenIsDeclined") {
  Hedged x(hedged_policy(fixed(10ms)));
  RetryBudget budget({0.2, 0}, kT0);  // no floor: empty
  HedgePlan::Decision d = x.due(kT0 + 10ms, &budget);
  CHECK_FALSE(d.hedge);
  CHECK(d.declined == Decline::budget_exhausted);
  CHECK(x.h.sent() == 0);
  // Five requests deposit one token: the next due hedge goes.
  for (int i = 0; i < 5; ++i) budget.on_request(kT0 + 11ms);
  CHECK(x.due(kT0 + 12ms, &budget).hedge);
}

TEST_CASE("HedgeSpendsTheFleetBudgetWhenTheUpstreamHasOne") {
  // scope: fleet: the bucket holds only what the fleet's syncs grant. A
  // hedge spends from it like a retry and is counted as one for the fleet.
  Hedged x(hedged_policy(fixed(10ms), 3, 5));
  RetryBudgetConfig cfg{0.2, 10};
  cfg.scope = BudgetScope::fleet;
  RetryBudget budget(cfg, kT0);
  for (int i = 0; i < 50; ++i) budget.on_request(kT0);  // local deposits do not feed a fleet bucket
  CHECK(x.due(kT0 + 10ms, &budget).declined == Decline::budget_exhausted);
  budget.load_fleet_share(1'000'000, 1'000'000);  // the fleet grants one token
  CHECK(x.due(kT0 + 11ms, &budget).hedge);
  CHECK(x.due(kT0 + 22ms, &budget).declined == Decline::budget_exhausted);
  CHECK(x.h.sent() == 1);
  const fleet::FleetCounts c = budget.take_counts();
  CHECK(c.retries == 1);
  CHECK(c.first_attempts == 50);
}

TEST_CASE("HedgeCountsAgainstMaxAttempts") {
  Hedged x(hedged_policy(fixed(10ms), 3, 2));
  CHECK(x.due(kT0 + 10ms).hedge);
  x.rs.on_attempt_started();
  // Two attempts of max_attempts 2: the second hedge is declined.
  HedgePlan::Decision d = x.due(kT0 + 20ms);
  CHECK_FALSE(d.hedge);
  CHECK(d.declined == Decline::attempts_exhausted);
}

TEST_CASE("HedgeNeedsAnEndpointNotYetTried") {
  Hedged x(hedged_policy(fixed(10ms)));
  HedgePlan::Due none_left;
  none_left.untried_endpoint = false;
  CHECK(x.due(kT0 + 10ms, nullptr, none_left).declined == Decline::attempts_exhausted);
}

TEST_CASE("HedgeNotStartedWithLessTimeLeftThanAfter") {
  // 50ms left at kT0 + 50ms: exactly `after`, still fits.
  Hedged x(hedged_policy(fixed(50ms)), 100ms);
  CHECK(x.due(kT0 + 50ms).hedge);
  // 49ms left: declined deadline.
  Hedged y(hedged_policy(fixed(50ms)), 100ms);
  CHECK(y.due(kT0 + 51ms).declined == Decline::deadline);
}

TEST_CASE("MinTimeLeftDeclinesAHedgeAsDeadlineTooShort") {
  RetryPolicy p = hedged_policy(fixed(10ms));
  p.min_time_left = pct(90);
  Hedged x(p, 400ms);
  fill(x.lat, kT0);  // success p90 is 300ms (read within an eighth above)
  const Millis need = min_time_left(x.p, x.lat, kT0 + 10ms);
  CHECK(need >= 300ms);
  CHECK(need <= 338ms);
  // 390ms left: enough.
  CHECK(x.due(kT0 + 10ms).hedge);
  Hedged y(p, 400ms);
  fill(y.lat, kT0);
  // 200ms left: below p90 of the recent successes; no token spent.
  RetryBudget budget({0.2, 10}, kT0);
  CHECK(y.due(kT0 + 200ms, &budget).declined == Decline::deadline_too_short);
  CHECK(budget.tokens(kT0 + 200ms) == doctest::Approx(12.0));  // 10 + 0.2s of the floor
}

TEST_CASE("MinTimeLeftOffOrWithoutSamplesDeclinesNothing") {
  RetryPolicy p = hedged_policy(fixed(10ms));
  UpstreamLatency lat;
  CHECK(min_time_left(p, lat, kT0) == 0ms);
  p.min_time_left = pct(50);
  CHECK(min_time_left(p, lat, kT0) == 0ms);  // no estimate yet
  p.min_time_left = fixed(250ms);
  CHECK(min_time_left(p, lat, kT0) == 250ms);
}

TEST_CASE("MinTimeLeftDeclinesARetryAsDeadlineTooShortAndMarksIt") {
  RetryPolicy p;
  p.max_attempts = 3;
  p.backoff = Backoff{Millis{100}, Millis{100}, Jitter::none};
  RetryState rs(p, 1000ms, kT0, get());
  rs.set_min_time_left(300ms);
  struct NoRandom : Random {
    uint64_t next() override { return 0; }
  } rng;
  AttemptResult r;
  r.status = 503;
  rs.on_attempt_started();
  // 700ms left, 100ms backoff: 600ms after the wait, enough.
  RetryState::Decision d = rs.on_attempt_result(r, kT0 + 300ms, false, rng, nullptr);
  CHECK(d.retry);
  rs.on_attempt_started();
  // 350ms left, 100ms backoff: 250ms after the wait, below 300ms.
  d = rs.on_attempt_result(r, kT0 + 650ms, false, rng, nullptr);
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::deadline_too_short);
  CHECK(d.mark_exhausted);
  CHECK(std::string(decline_name(Decline::deadline_too_short)) == "deadline_too_short");
  CHECK(is_counted_decline(Decline::deadline_too_short));
}

TEST_CASE("HedgeWinnerIsTheFirstAnswerThatIsNotRetryable") {
  RetryOn on;  // default: connect-failure, reset, timeout, 502 503 504
  AttemptResult ok;
  ok.status = 200;
  CHECK(HedgePlan::wins(ok, on));
  AttemptResult not_found;
  not_found.status = 404;
  CHECK(HedgePlan::wins(not_found, on));
  AttemptResult unavailable;
  unavailable.status = 503;
  CHECK_FALSE(HedgePlan::wins(unavailable, on));
  AttemptResult reset;
  reset.outcome = AttemptOutcome::reset;
  CHECK_FALSE(HedgePlan::wins(reset, on));
  // gRPC: a listed status lets the others run on, another commits.
  on.grpc_statuses = {GrpcStatus::unavailable};
  AttemptResult g;
  g.status = 200;
  g.grpc = GrpcStatus::unavailable;
  CHECK_FALSE(HedgePlan::wins(g, on));
  g.grpc = GrpcStatus::invalid_argument;
  CHECK(HedgePlan::wins(g, on));
}

TEST_CASE("HedgeGrpcPushbackDelaysTheNextAndNegativeStops") {
  Hedged x(hedged_policy(fixed(10ms), 3, 5));
  CHECK(x.h.next_delay_at_once(kT0) == 0ms);
  x.h.on_pushback(GrpcPushback{false, 40ms}, kT0);
  CHECK(x.h.next_delay_at_once(kT0 + 15ms) == 25ms);
  CHECK(x.h.next_delay(x.lat, kT0, kT0) == 40ms);
  CHECK(x.h.next_delay(x.lat, kT0, kT0 + 35ms) == 5ms);
  CHECK(x.h.next_delay(x.lat, kT0, kT0 + 45ms) == 0ms);
  x.h.on_pushback(GrpcPushback{true, 0ms}, kT0 + 50ms);
  CHECK(x.h.stopped());
  CHECK_FALSE(x.h.next_delay(x.lat, kT0, kT0 + 50ms).has_value());
  CHECK_FALSE(x.h.next_delay_at_once(kT0 + 50ms).has_value());
  CHECK(x.due(kT0 + 60ms).declined == Decline::none);
}
