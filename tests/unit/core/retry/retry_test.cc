#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/base/default_random.h"
#include "core/base/random.h"
#include "core/retry/circuit_breaker.h"
#include "core/retry/retry.h"
#include "core/retry/retry_budget.h"
#include "scripted_random.h"

using namespace onelayer;
using namespace std::chrono_literals;
using onelayer::test::ScriptedRandom;

namespace {

const TimePoint kStart = TimePoint{} + 100s;

Backoff make_backoff(int64_t base, int64_t cap, Jitter j) { return Backoff{Millis{base}, Millis{cap}, j}; }

// max_attempts 3, no jitter (base 100ms, cap 1s), Retry-After honored up to 5s.
RetryPolicy plain_policy() {
  RetryPolicy p;
  p.max_attempts = 3;
  p.backoff = make_backoff(100, 1000, Jitter::none);
  return p;
}

RetryState::Request get_request() { return {"GET", false, true, false}; }

AttemptResult status(int code) {
  AttemptResult r;
  r.status = code;
  return r;
}

AttemptResult outcome(AttemptOutcome o, bool reached = true) {
  AttemptResult r;
  r.outcome = o;
  r.request_may_have_reached = reached;
  return r;
}

// One attempt then its result, as the shell does it.
RetryState::Decision attempt(RetryState& s, const AttemptResult& r, TimePoint now, Random& rng,
                             RetryBudget* budget = nullptr, bool response_started = false) {
  s.on_attempt_started();
  return s.on_attempt_result(r, now, response_started, rng, budget);
}

}  // namespace

// ---- classification and names --------------------------------------------

TEST_CASE("IdempotentMethodsAreExactlyTheRfcSix") {
  for (auto m : {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"}) CHECK(is_idempotent_method(m));
  for (auto m : {"POST", "PATCH", "CONNECT", "get", "Put", "", "GETX"}) CHECK_FALSE(is_idempotent_method(m));
}

TEST_CASE("RetryOnDecidesWhichOutcomesAreRetryable") {
  RetryOn on;  // defaults: all three failures, 429 502 503 504
  CHECK(is_retryable_outcome(outcome(AttemptOutcome::connect_failure), on));
  CHECK(is_retryable_outcome(outcome(AttemptOutcome::reset), on));
  CHECK(is_retryable_outcome(outcome(AttemptOutcome::timeout), on));
  for (int code : {429, 502, 503, 504}) CHECK(is_retryable_outcome(status(code), on));
  for (int code : {200, 204, 301, 400, 404, 500, 501}) CHECK_FALSE(is_retryable_outcome(status(code), on));

  RetryOn narrow;
  narrow.connect_failure = false;
  narrow.reset = false;
  narrow.timeout = false;
  narrow.statuses = {500};
  CHECK_FALSE(is_retryable_outcome(outcome(AttemptOutcome::connect_failure), narrow));
  CHECK_FALSE(is_retryable_outcome(outcome(AttemptOutcome::reset), narrow));
  CHECK_FALSE(is_retryable_outcome(outcome(AttemptOutcome::timeout), narrow));
  CHECK_FALSE(is_retryable_outcome(status(503), narrow));
  CHECK(is_retryable_outcome(status(500), narrow));
}

TEST_CASE("TriggerNamesMatchRetryOnSpelling") {
  CHECK(trigger_name(outcome(AttemptOutcome::connect_failure)) == "connect-failure");
  CHECK(trigger_name(outcome(AttemptOutcome::reset)) == "reset");
  CHECK(trigger_name(outcome(AttemptOutcome::timeout)) == "timeout");
  CHECK(trigger_name(status(503)) == "503");
  CHECK(trigger_name(status(429)) == "429");
}

TEST_CASE("DeclineNamesAreTheMetricLabels") {
  CHECK(std::string(decline_name(Decline::not_idempotent)) == "not_idempotent");
  CHECK(std::string(decline_name(Decline::body_too_large)) == "body_too_large");
  CHECK(std::string(decline_name(Decline::attempts_exhausted)) == "attempts_exhausted");
  CHECK(std::string(decline_name(Decline::budget_exhausted)) == "budget_exhausted");
  CHECK(std::string(decline_name(Decline::deadline)) == "deadline");
  CHECK(std::string(decline_name(Decline::retry_after_beyond_deadline)) == "retry_after_beyond_deadline");
  CHECK(std::string(decline_name(Decline::outer_owner)) == "outer_owner");
  CHECK(std::string(decline_name(Decline::inner_exhausted)) == "inner_exhausted");
  CHECK(std::string(decline_name(Decline::circuit_open)) == "circuit_open");
  CHECK(std::string(decline_name(Decline::none)) == "none");
  CHECK(std::string(decline_name(Decline::not_retryable)) == "not_retryable");
}

// ---- backoff ---------------------------------------------------------------

TEST_CASE("BackoffNoJitterDoublesUpToCap") {
  ScriptedRandom rng{};  // must not be used
  const Backoff b = make_backoff(50, 1000, Jitter::none);
  CHECK(backoff_delay(b, 1, 0ms, rng) == 50ms);
  CHECK(backoff_delay(b, 2, 0ms, rng) == 100ms);
  CHECK(backoff_delay(b, 3, 0ms, rng) == 200ms);
  CHECK(backoff_delay(b, 5, 0ms, rng) == 800ms);
  CHECK(backoff_delay(b, 6, 0ms, rng) == 1000ms);  // 1600 capped
  CHECK(backoff_delay(b, 0, 0ms, rng) == 50ms);    // 0 read as the first retry
  CHECK(rng.used() == 0);
}

TEST_CASE("BackoffHugeRetryNumberSaturatesAtCapWithoutOverflow") {
  ScriptedRandom rng{};
  const Backoff b = make_backoff(3, 1'000'000'000'000, Jitter::none);
  CHECK(backoff_delay(b, 63, 0ms, rng) == Millis{1'000'000'000'000});
  CHECK(backoff_delay(b, 64, 0ms, rng) == Millis{1'000'000'000'000});
  CHECK(backoff_delay(b, std::numeric_limits<uint32_t>::max(), 0ms, rng) == Millis{1'000'000'000'000});
  CHECK(backoff_delay(b, 30, 0ms, rng) == Millis{3LL << 29});
}

TEST_CASE("BackoffFullJitterIsUniformZeroToExponential") {
  const Backoff b = make_backoff(100, 1000, Jitter::full);
  ScriptedRandom rng{37, 100, 1000, 1000, 1001};
  CHECK(backoff_delay(b, 1, 0ms, rng) == 37ms);     // d=100: 37 % 101
  CHECK(backoff_delay(b, 1, 0ms, rng) == 100ms);    // inclusive upper end
  CHECK(backoff_delay(b, 3, 0ms, rng) == 198ms);    // d=400: 1000 % 401
  CHECK(backoff_delay(b, 5, 0ms, rng) == 1000ms);   // d=1600 capped to 1000: 1000 % 1001
  CHECK(backoff_delay(b, 5, 0ms, rng) == 0ms);      // 1001 % 1001
}

TEST_CASE("BackoffEqualJitterKeepsAtLeastHalf") {
  const Backoff b = make_backoff(100, 1000, Jitter::equal);
  ScriptedRandom rng{30, 0, 100, 13, 14};
  CHECK(backoff_delay(b, 2, 0ms, rng) == 130ms);  // d=200: 100 + 30
  CHECK(backoff_delay(b, 2, 0ms, rng) == 100ms);  // lower end d/2
  CHECK(backoff_delay(b, 2, 0ms, rng) == 200ms);  // upper end d
  const Backoff odd = make_backoff(25, 1000, Jitter::equal);
  CHECK(backoff_delay(odd, 1, 0ms, rng) == 25ms);  // d=25: 12 + 13 % 14, reaches d exactly
  CHECK(backoff_delay(odd, 1, 0ms, rng) == 12ms);  // 12 + 14 % 14
}

TEST_CASE("BackoffDecorrelatedJitterGrowsFromPreviousWait") {
  const Backoff b = make_backoff(100, 1000, Jitter::decorrelated);
  ScriptedRandom rng{50, 400, 2000, 7, 0};
  CHECK(backoff_delay(b, 1, 999ms, rng) == 150ms);   // n=1 ignores prev: [100, 300], 100 + 50 % 201
  CHECK(backoff_delay(b, 2, 150ms, rng) == 149ms);   // [100, 450]: 100 + 400 % 351
  CHECK(backoff_delay(b, 3, 900ms, rng) == 1000ms);  // [100, 2700]: 2100, capped
  CHECK(backoff_delay(b, 4, 10ms, rng) == 100ms);    // prev*3 < base: [100, 100]
  CHECK(backoff_delay(b, 5, 0ms, rng) == 100ms);
}

TEST_CASE("BackoffZeroBaseNeverWaits") {
  ScriptedRandom rng{5, 5, 5};
  CHECK(backoff_delay(make_backoff(0, 1000, Jitter::full), 4, 0ms, rng) == 0ms);
  CHECK(backoff_delay(make_backoff(0, 1000, Jitter::equal), 4, 0ms, rng) == 0ms);
  CHECK(backoff_delay(make_backoff(0, 1000, Jitter::none), 4, 0ms, rng) == 0ms);
}

TEST_CASE("BackoffRandomInputsStayWithinZeroAndCap") {
  DefaultRandom gen(12345);
  DefaultRandom rng(678);
  const Jitter kinds[] = {Jitter::full, Jitter::equal, Jitter::decorrelated, Jitter::none};
  for (int i = 0; i < 20000; ++i) {
    const int64_t cap = gen.between(0, 120'000);
    const int64_t base = gen.between(0, cap);
    const Backoff b = make_backoff(base, cap, kinds[i % 4]);
    const auto n = static_cast<uint32_t>(gen.between(0, 80));
    const Millis prev{gen.between(0, 400'000)};
    const Millis w = backoff_delay(b, n, prev, rng);
    CHECK(w >= 0ms);
    CHECK(w <= b.cap);
    if (b.jitter == Jitter::decorrelated) CHECK(w >= b.base);
    if (b.jitter == Jitter::equal) {
      const long double d = std::min<long double>(cap, base * std::pow(2.0L, std::max<uint32_t>(n, 1) - 1));
      CHECK(w.count() >= static_cast<int64_t>(d) / 2);
    }
  }
}

TEST_CASE("DefaultRandomBetweenStaysInRangeAndUniformBelowOne") {
  DefaultRandom rng(1);
  for (int i = 0; i < 10000; ++i) {
    const int64_t v = rng.between(-3, 3);
    CHECK(v >= -3);
    CHECK(v <= 3);
    const double u = rng.uniform();
    CHECK(u >= 0.0);
    CHECK(u < 1.0);
  }
  CHECK(rng.between(5, 5) == 5);
  CHECK(rng.between(7, 2) == 7);
  ScriptedRandom max{~uint64_t{0}};
  CHECK(max.uniform() < 1.0);
}

// ---- RetryState: the happy path ---------------------------------------------

TEST_CASE("GetOn503RetriesWithExponentialWaitsUntilAttemptsExhausted") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 15s, kStart, get_request());
  ScriptedRandom rng{};
  CHECK(s.owns_retries());

  auto d1 = attempt(s, status(503), kStart, rng);
  CHECK(d1.retry);
  CHECK(d1.wait == 100ms);
  CHECK(trigger_name(d1.trigger) == "503");
  CHECK(d1.declined == Decline::none);

  auto d2 = attempt(s, outcome(AttemptOutcome::reset), kStart + 200ms, rng);
  CHECK(d2.retry);
  CHECK(d2.wait == 200ms);
  CHECK(trigger_name(d2.trigger) == "reset");

  auto d3 = attempt(s, status(503), kStart + 500ms, rng);
  CHECK_FALSE(d3.retry);
  CHECK(d3.declined == Decline::attempts_exhausted);
  CHECK(d3.mark_exhausted);
  CHECK(s.attempts_started() == 3);
}

TEST_CASE("FinalResponsesAreNotRetriedNorCountedAsDeclined") {
  const RetryPolicy p = plain_policy();
  ScriptedRandom rng{};
  for (int code : {200, 201, 304, 404, 500, 501}) {
    RetryState s(p, 15s, kStart, get_request());
    auto d = attempt(s, status(code), kStart, rng);
    CHECK_FALSE(d.retry);
    CHECK(d.declined == Decline::not_retryable);
    CHECK_FALSE(d.mark_exhausted);
  }
}

TEST_CASE("OutcomeMissingFromRetryOnIsFinal") {
  RetryPolicy p = plain_policy();
  p.retry_on.timeout = false;
  RetryState s(p, 15s, kStart, get_request());
  ScriptedRandom rng{};
  auto d = attempt(s, outcome(AttemptOutcome::timeout), kStart, rng);
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::not_retryable);
  CHECK(trigger_name(d.trigger) == "timeout");
}

// ---- safety ------------------------------------------------------------------

TEST_CASE("PostWithoutKeyIsNotRetried") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 15s, kStart, {"POST", false, true, false});
  ScriptedRandom rng{};
  auto d = attempt(s, status(503), kStart, rng);
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::not_idempotent);
  CHECK_FALSE(d.mark_exhausted);
}

TEST_CASE("PostWithIdempotencyKeyIsRetried") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 15s, kStart, {"POST", true, true, false});
  ScriptedRandom rng{};
  auto d = attempt(s, status(503), kStart, rng);
  CHECK(d.retry);
  CHECK(d.wait == 100ms);
}

TEST_CASE("PostThatNeverReachedUpstreamIsRetried") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 15s, kStart, {"POST", false, true, false});
  ScriptedRandom rng{};
  auto d = attempt(s, outcome(AttemptOutcome::connect_failure, /*reached=*/false), kStart, rng);
  CHECK(d.retry);
  CHECK(trigger_name(d.trigger) == "connect-failure");
}

TEST_CASE("PostResetAfterSendingIsNotRetried") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 15s, kStart, {"PATCH", false, true, false});
  ScriptedRandom rng{};
  auto d = attempt(s, outcome(AttemptOutcome::reset), kStart, rng);
  CHECK(d.declined == Decline::not_idempotent);
  auto d2 = attempt(s, outcome(AttemptOutcome::connect_failure, /*reached=*/true), kStart, rng);
  CHECK(d2.declined == Decline::not_idempotent);
}

TEST_CASE("OversizedBodyIsNotRetried") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 15s, kStart, {"PUT", false, false, false});
  ScriptedRandom rng{};
  auto d = attempt(s, status(503), kStart, rng);
  CHECK(d.declined == Decline::body_too_large);
  CHECK_FALSE(d.mark_exhausted);
}

TEST_CASE("ResponseAlreadyStartedIsNeverRetried") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 15s, kStart, get_request());
  ScriptedRandom rng{};
  auto d = attempt(s, outcome(AttemptOutcome::reset), kStart, rng, nullptr, /*response_started=*/true);
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::not_retryable);
  CHECK_FALSE(d.mark_exhausted);
}

TEST_CASE("InnerExhaustedResponseIsFinalAndNotRemarked") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 15s, kStart, {"POST", false, false, true});  // inner check comes first
  ScriptedRandom rng{};
  AttemptResult r = status(503);
  r.inner_exhausted = true;
  auto d = attempt(s, r, kStart, rng);
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::inner_exhausted);
  CHECK_FALSE(d.mark_exhausted);
}

TEST_CASE("OuterOwnerMakesOneAttemptAndNeverMarks") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 15s, kStart, {"GET", false, true, true});
  ScriptedRandom rng{};
  CHECK_FALSE(s.owns_retries());
  auto d = attempt(s, status(503), kStart, rng);
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::outer_owner);
  CHECK_FALSE(d.mark_exhausted);
  CHECK_FALSE(s.on_circuit_open().mark_exhausted);
}

TEST_CASE("SingleAttemptRouteDeclinesWithoutMarking") {
  RetryPolicy p = plain_policy();
  p.max_attempts = 1;
  RetryState s(p, 15s, kStart, get_request());
  ScriptedRandom rng{};
  CHECK_FALSE(s.owns_retries());
  auto d = attempt(s, status(503), kStart, rng);
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::attempts_exhausted);
  CHECK_FALSE(d.mark_exhausted);
}

TEST_CASE("CircuitOpenDeclineMarksOnlyWhenOwningRetries") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 15s, kStart, get_request());
  auto d = s.on_circuit_open();
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::circuit_open);
  CHECK(d.mark_exhausted);
  RetryPolicy single = plain_policy();
  single.max_attempts = 1;
  RetryState s1(single, 15s, kStart, get_request());
  CHECK_FALSE(s1.on_circuit_open().mark_exhausted);
}

// ---- Retry-After and clamps -------------------------------------------------------

TEST_CASE("RetryAfterRaisesWaitAboveBackoff") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 15s, kStart, get_request());
  ScriptedRandom rng{};
  AttemptResult r = status(503);
  r.retry_after = 1000ms;
  auto d = attempt(s, r, kStart, rng);
  CHECK(d.retry);
  CHECK(d.wait == 1000ms);
}

TEST_CASE("RetryAfterShorterThanBackoffKeepsBackoff") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 15s, kStart, get_request());
  ScriptedRandom rng{};
  AttemptResult r = status(429);
  r.retry_after = 30ms;
  auto d = attempt(s, r, kStart, rng);
  CHECK(d.wait == 100ms);
}

TEST_CASE("RetryAfterIgnoredWhenNotHonored") {
  RetryPolicy p = plain_policy();
  p.retry_after.honor = false;
  RetryState s(p, 2s, kStart, get_request());
  ScriptedRandom rng{};
  AttemptResult r = status(503);
  r.retry_after = 3600s;
  auto d = attempt(s, r, kStart, rng);
  CHECK(d.retry);
  CHECK(d.wait == 100ms);
}

TEST_CASE("RetryAfterBeyondDeadlineGivesUp") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 2s, kStart, get_request());
  ScriptedRandom rng{};
  AttemptResult r = status(503);
  r.retry_after = 3600s;
  auto d = attempt(s, r, kStart + 10ms, rng);
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::retry_after_beyond_deadline);
  CHECK(d.mark_exhausted);
}

TEST_CASE("RetryAfterBeyondMaxGivesUpEvenWithTimeLeft") {
  const RetryPolicy p = plain_policy();  // retry_after.max 5s
  RetryState s(p, 60s, kStart, get_request());
  ScriptedRandom rng{};
  AttemptResult r = status(503);
  r.retry_after = 5001ms;
  auto d = attempt(s, r, kStart, rng);
  CHECK(d.declined == Decline::retry_after_beyond_deadline);
}

TEST_CASE("RetryAfterEqualToMaxIsHonored") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 60s, kStart, get_request());
  ScriptedRandom rng{};
  AttemptResult r = status(503);
  r.retry_after = 5000ms;
  auto d = attempt(s, r, kStart, rng);
  CHECK(d.retry);
  CHECK(d.wait == 5000ms);
}

TEST_CASE("RetryAfterWithinMaxButBeyondTimeLeftGivesUp") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 2s, kStart, get_request());
  ScriptedRandom rng{};
  AttemptResult r = status(503);
  r.retry_after = 1000ms;
  auto d = attempt(s, r, kStart + 1500ms, rng);  // 500ms left
  CHECK(d.declined == Decline::retry_after_beyond_deadline);
  CHECK(d.mark_exhausted);
}

TEST_CASE("SaturatedRetryAfterGivesUpWithoutOverflow") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 2s, kStart, get_request());
  ScriptedRandom rng{};
  AttemptResult r = status(503);
  r.retry_after = Millis::max();
  auto d = attempt(s, r, kStart, rng);
  CHECK(d.declined == Decline::retry_after_beyond_deadline);
}

TEST_CASE("BackoffWaitIsClampedToRetryAfterMax") {
  RetryPolicy p = plain_policy();
  p.max_attempts = 5;
  p.backoff = make_backoff(1000, 10'000, Jitter::none);
  p.retry_after.max = 3000ms;
  RetryState s(p, 60s, kStart, get_request());
  ScriptedRandom rng{};
  CHECK(attempt(s, status(503), kStart, rng).wait == 1000ms);
  CHECK(attempt(s, status(503), kStart, rng).wait == 2000ms);
  CHECK(attempt(s, status(503), kStart, rng).wait == 3000ms);  // 4000 clamped
}

// ---- deadline ------------------------------------------------------------------

TEST_CASE("TimeLeftAndAttemptTimeoutFollowTheDeadline") {
  RetryPolicy p = plain_policy();
  p.per_try_timeout = 500ms;
  RetryState s(p, 2s, kStart, get_request());
  CHECK(s.deadline() == kStart + 2s);
  CHECK(s.time_left(kStart) == 2000ms);
  CHECK(s.attempt_timeout(kStart) == 500ms);
  CHECK(s.attempt_timeout(kStart + 1800ms) == 200ms);
  CHECK(s.time_left(kStart + 1999ms + 500us) == 0ms);  // rounded down
  CHECK(s.time_left(kStart + 5s) == 0ms);
  CHECK(s.attempt_timeout(kStart + 5s) == 0ms);

  RetryPolicy no_per_try = plain_policy();
  RetryState s2(no_per_try, 2s, kStart, get_request());
  CHECK(s2.attempt_timeout(kStart) == 2000ms);
  CHECK(s2.attempt_timeout(kStart + 1500ms) == 500ms);
}

TEST_CASE("RetryWhoseWaitEndsAtDeadlineIsNotStarted") {
  const RetryPolicy p = plain_policy();  // first wait 100ms
  ScriptedRandom rng{};
  {
    RetryState s(p, 2s, kStart, get_request());
    auto d = attempt(s, status(503), kStart + 1900ms, rng);  // 100ms left == wait
    CHECK_FALSE(d.retry);
    CHECK(d.declined == Decline::deadline);
    CHECK(d.mark_exhausted);
  }
  {
    RetryState s(p, 2s, kStart, get_request());
    auto d = attempt(s, status(503), kStart + 1899ms, rng);  // 101ms left
    CHECK(d.retry);
    CHECK(d.wait == 100ms);
  }
  {
    RetryState s(p, 2s, kStart, get_request());
    auto d = attempt(s, outcome(AttemptOutcome::timeout), kStart + 2s, rng);  // deadline reached
    CHECK(d.declined == Decline::deadline);
  }
}

// ---- budget ----------------------------------------------------------------------

TEST_CASE("EmptyBudgetDeclinesAndMarks") {
  const RetryPolicy p = plain_policy();
  RetryBudget budget({0.0, 0.0}, kStart);  // no tokens at all
  RetryState s(p, 15s, kStart, get_request());
  ScriptedRandom rng{};
  auto d = attempt(s, status(503), kStart, rng, &budget);
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::budget_exhausted);
  CHECK(d.mark_exhausted);
}

TEST_CASE("EachRetrySpendsOneBudgetToken") {
  RetryPolicy p = plain_policy();
  p.max_attempts = 5;
  RetryBudget budget({0.0, 2.0}, kStart);  // 2 initial tokens, refill 2/s
  RetryState s(p, 15s, kStart, get_request());
  ScriptedRandom rng{};
  CHECK(attempt(s, status(503), kStart, rng, &budget).retry);
  CHECK(attempt(s, status(503), kStart, rng, &budget).retry);
  auto d = attempt(s, status(503), kStart, rng, &budget);
  CHECK(d.declined == Decline::budget_exhausted);
  CHECK(budget.tokens(kStart) == 0.0);
}

TEST_CASE("DeclinedRetryDoesNotSpendBudget") {
  const RetryPolicy p = plain_policy();
  RetryBudget budget({0.0, 3.0}, kStart);
  ScriptedRandom rng{};
  RetryState s(p, 2s, kStart, get_request());
  CHECK(attempt(s, status(503), kStart + 1950ms, rng, &budget).declined == Decline::deadline);
  RetryState post(p, 2s, kStart, {"POST", false, true, false});
  CHECK(attempt(post, status(503), kStart, rng, &budget).declined == Decline::not_idempotent);
  CHECK(budget.tokens(kStart) == 3.0);
}

// ---- the circuit breaker as an input of the decision ------------------------------

namespace {

CircuitBreakerConfig breaker_config(uint32_t failures, Millis open_for) { return {true, failures, open_for, 1}; }

}  // namespace

TEST_CASE("AdmittedAttemptIsCountedAndGetsPerTryTimeoutToTheMillisecond") {
  RetryPolicy p = plain_policy();
  p.per_try_timeout = 500ms;
  RetryState s(p, 2s, kStart, get_request());
  CircuitBreaker cb(breaker_config(1, 10s));
  auto a = s.admit_attempt(kStart + 1ms, &cb);
  CHECK(a.admitted);
  CHECK(a.timeout == 500ms);
  CHECK(a.declined == Decline::none);
  CHECK(s.attempts_started() == 1);
  // Near the deadline the attempt gets what is left, to the millisecond.
  auto b = s.admit_attempt(kStart + 1999ms, nullptr);
  CHECK(b.admitted);
  CHECK(b.timeout == 1ms);
  CHECK(s.attempts_started() == 2);
}

TEST_CASE("AttemptWithLessThanAMillisecondLeftIsDeclinedDeadlineAndMarked") {
  const RetryPolicy p = plain_policy();
  RetryState s(p, 2s, kStart, get_request());
  auto a = s.admit_attempt(kStart + 1999ms + 500us, nullptr);
  CHECK_FALSE(a.admitted);
  CHECK(a.declined == Decline::deadline);
  CHECK(a.mark_exhausted);
  CHECK(s.attempts_started() == 0);
  RetryState zero(p, 0ms, kStart, get_request());  // x-request-timeout-ms: 0
  CHECK(zero.admit_attempt(kStart, nullptr).declined == Decline::deadline);
  RetryState outer(p, 2s, kStart, {"GET", false, true, true});
  auto o = outer.admit_attempt(kStart + 2s, nullptr);
  CHECK(o.declined == Decline::deadline);
  CHECK_FALSE(o.mark_exhausted);  // the owner decides
}

TEST_CASE("AttemptDeclinedForTheDeadlineTakesNoHalfOpenProbeSlot") {
  const RetryPolicy p = plain_policy();
  CircuitBreaker cb(breaker_config(1, 10s));
  cb.on_failure(kStart);  // open at kStart, half-open from kStart + 10s with one probe slot
  const TimePoint half_open = kStart + 10s;
  RetryState late(p, 1s, half_open - 1s, get_request());  // its deadline is now
  CHECK(late.admit_attempt(half_open, &cb).declined == Decline::deadline);
  // The one probe slot is still free for a request that has time.
  RetryState fresh(p, 2s, half_open, get_request());
  CHECK(fresh.admit_attempt(half_open, &cb).admitted);
  RetryState second(p, 2s, half_open, get_request());
  CHECK(second.admit_attempt(half_open, &cb).declined == Decline::circuit_open);
}

TEST_CASE("OpenBreakerRefusesTheFirstAttemptUntilOpenForElapsed") {
  const RetryPolicy p = plain_policy();
  CircuitBreaker cb(breaker_config(1, 10s));
  cb.on_failure(kStart);  // open at kStart for 10s
  {
    RetryState s(p, 15s, kStart, get_request());
    auto a = s.admit_attempt(kStart + 9999ms, &cb);
    CHECK_FALSE(a.admitted);
    CHECK(a.declined == Decline::circuit_open);
    CHECK(a.mark_exhausted);
    CHECK(s.attempts_started() == 0);
  }
  {
    RetryState s(p, 15s, kStart + 10s, get_request());
    auto a = s.admit_attempt(kStart + 10s, &cb);  // half-open now: this is the probe
    CHECK(a.admitted);
    CHECK(a.timeout == 15s);
    RetryState other(p, 15s, kStart + 10s, get_request());
    CHECK(other.admit_attempt(kStart + 10s, &cb).declined == Decline::circuit_open);  // one probe at a time
  }
  RetryPolicy single = plain_policy();
  single.max_attempts = 1;
  CircuitBreaker open(breaker_config(1, 10s));
  open.on_failure(kStart);
  RetryState s1(single, 15s, kStart, get_request());
  auto a1 = s1.admit_attempt(kStart, &open);
  CHECK(a1.declined == Decline::circuit_open);
  CHECK_FALSE(a1.mark_exhausted);
}

TEST_CASE("OpenBreakerDeclinesTheRetryBeforeABudgetTokenIsSpent") {
  const RetryPolicy p = plain_policy();
  RetryBudget budget({0.0, 3.0}, kStart);
  CircuitBreaker cb(breaker_config(1, 10s));
  RetryState s(p, 15s, kStart, get_request());
  ScriptedRandom rng{};
  REQUIRE(s.admit_attempt(kStart, &cb).admitted);
  cb.on_failure(kStart + 40ms);  // the attempt's 503 opened it
  const double tokens_before = budget.tokens(kStart + 40ms);
  auto d = s.on_attempt_result(status(503), kStart + 40ms, false, rng, &budget, &cb);
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::circuit_open);
  CHECK(d.mark_exhausted);
  CHECK(trigger_name(d.trigger) == "503");
  CHECK(budget.tokens(kStart + 40ms) == tokens_before);
  CHECK(rng.used() == 0);  // no backoff drawn
}

TEST_CASE("HalfOpenOrClosedBreakerLetsTheRetryThroughWithExactWait") {
  const RetryPolicy p = plain_policy();  // first wait 100ms
  ScriptedRandom rng{};
  CircuitBreaker closed(breaker_config(5, 10s));
  RetryState s(p, 15s, kStart, get_request());
  auto d = attempt(s, status(503), kStart + 7ms, rng, nullptr);
  CHECK(d.retry);
  CircuitBreaker half(breaker_config(1, 10s));
  half.on_failure(kStart);
  RetryState h(p, 15s, kStart, get_request());
  h.on_attempt_started();
  auto dh = h.on_attempt_result(status(503), kStart + 10s, false, rng, nullptr, &half);  // half-open exactly now
  CHECK(dh.retry);
  CHECK(dh.wait == 100ms);
  s.on_attempt_started();
  auto dc = s.on_attempt_result(status(503), kStart + 7ms, false, rng, nullptr, &closed);
  CHECK(dc.retry);
  CHECK(dc.wait == 200ms);
  // One millisecond earlier it was still open.
  RetryState e(p, 15s, kStart, get_request());
  e.on_attempt_started();
  CircuitBreaker still(breaker_config(1, 10s));
  still.on_failure(kStart);
  CHECK(e.on_attempt_result(status(503), kStart + 9999ms, false, rng, nullptr, &still).declined ==
        Decline::circuit_open);
}

TEST_CASE("OpenBreakerIsNotTheReasonWhenNoRetryWouldBeWeighed") {
  const RetryPolicy p = plain_policy();
  ScriptedRandom rng{};
  CircuitBreaker cb(breaker_config(1, 10s));
  cb.on_failure(kStart);
  // Final outcome.
  RetryState s(p, 15s, kStart, get_request());
  s.on_attempt_started();
  CHECK(s.on_attempt_result(status(200), kStart, false, rng, nullptr, &cb).declined == Decline::not_retryable);
  // Attempts used up.
  RetryPolicy two = plain_policy();
  two.max_attempts = 2;
  RetryState t(two, 15s, kStart, get_request());
  t.on_attempt_started();
  t.on_attempt_started();
  CHECK(t.on_attempt_result(status(503), kStart, false, rng, nullptr, &cb).declined == Decline::attempts_exhausted);
  // An outer layer owns retries.
  RetryState o(p, 15s, kStart, {"GET", false, true, true});
  o.on_attempt_started();
  CHECK(o.on_attempt_result(status(503), kStart, false, rng, nullptr, &cb).declined == Decline::outer_owner);
  // The response started downstream.
  RetryState r(p, 15s, kStart, get_request());
  r.on_attempt_started();
  CHECK(r.on_attempt_result(outcome(AttemptOutcome::reset), kStart, true, rng, nullptr, &cb).declined ==
        Decline::not_retryable);
}

TEST_CASE("DeclineReasonsAreTheLabelsInOrderAndOnlyThose") {
  std::vector<std::string> names;
  for (size_t i = 0; i < kDeclineReasonCount; ++i) names.push_back(decline_name(static_cast<Decline>(i)));
  CHECK(names == std::vector<std::string>{"not_idempotent", "body_too_large", "attempts_exhausted",
                                          "budget_exhausted", "deadline", "retry_after_beyond_deadline",
                                          "outer_owner", "inner_exhausted", "circuit_open", "server_pushback",
                                          "deadline_too_short"});
  CHECK_FALSE(is_counted_decline(Decline::none));
  CHECK_FALSE(is_counted_decline(Decline::not_retryable));
  std::string log;
  append_trigger_name(log, {AttemptOutcome::response, 503});
  log += ',';
  append_trigger_name(log, {AttemptOutcome::connect_failure, 0});
  CHECK(log == "503,connect-failure");
}

// ---- decorrelated state across retries and invariants --------------------------

TEST_CASE("DecorrelatedJitterUsesThePreviousWaitOfThisRequest") {
  RetryPolicy p = plain_policy();
  p.max_attempts = 4;
  p.backoff = make_backoff(100, 1000, Jitter::decorrelated);
  RetryState s(p, 15s, kStart, get_request());
  ScriptedRandom rng{50, 400, 5000};
  CHECK(attempt(s, status(503), kStart, rng).wait == 150ms);  // [100, 300]
  CHECK(attempt(s, status(503), kStart, rng).wait == 149ms);  // [100, 450]: 100 + 400 % 351
  CHECK(attempt(s, status(503), kStart, rng).wait == 100ms + Millis{5000 % 348});  // [100, 447]
}

TEST_CASE("RandomDecisionsKeepWaitWithinCapMaxAndTimeLeft") {
  DefaultRandom gen(2024);
  DefaultRandom rng(99);
  const Jitter kinds[] = {Jitter::full, Jitter::equal, Jitter::decorrelated, Jitter::none};
  int retried = 0;
  for (int i = 0; i < 20000; ++i) {
    RetryPolicy p;
    p.max_attempts = static_cast<uint32_t>(gen.between(1, 6));
    const int64_t cap = gen.between(0, 3000);
    p.backoff = make_backoff(gen.between(0, cap), cap, kinds[i % 4]);
    p.retry_after.honor = gen.between(0, 1) == 1;
    p.retry_after.max = Millis{gen.between(0, 6000)};
    const Millis timeout{gen.between(0, 5000)};
    RetryState s(p, timeout, kStart, get_request());
    TimePoint now = kStart;
    for (uint32_t a = 0; a < p.max_attempts; ++a) {
      now += Millis{gen.between(0, 800)};
      AttemptResult r = status(503);
      const bool has_ra = gen.between(0, 2) == 0;
      if (has_ra) r.retry_after = Millis{gen.between(0, 8000)};
      const Millis left = s.time_left(now);
      auto d = attempt(s, r, now, rng);
      if (!d.retry) {
        CHECK(d.declined != Decline::none);
        break;
      }
      ++retried;
      CHECK(d.wait >= 0ms);
      CHECK(d.wait < left);
      CHECK(d.wait <= p.retry_after.max);
      if (!(has_ra && p.retry_after.honor)) CHECK(d.wait <= std::min(p.backoff.cap, left));
      if (has_ra && p.retry_after.honor) CHECK(d.wait >= *r.retry_after);
      now += d.wait;
    }
  }
  CHECK(retried > 1000);  // the loop exercised the retry path
}

TEST_CASE("attempt_failed: transport failures, 5xx but 501, and listed statuses") {
  RetryOn on;  // 429 502 503 504
  AttemptResult r;
  r.outcome = AttemptOutcome::reset;
  CHECK(attempt_failed(r, on));
  r.outcome = AttemptOutcome::response;
  for (int code : {500, 502, 503, 599, 429}) {
    r.status = code;
    CHECK(attempt_failed(r, on));
  }
  for (int code : {200, 301, 404, 501, 409}) {
    r.status = code;
    CHECK_FALSE(attempt_failed(r, on));
  }
}
