// gRPC in the retry decision: status triggers, pushback, refused streams and
// routes declared idempotent.
#include <doctest/doctest.h>

#include <string>

#include "core/base/random.h"
#include "core/retry/retry.h"
#include "core/retry/retry_budget.h"
#include "scripted_random.h"

using namespace onelayer;
using namespace std::chrono_literals;
using onelayer::test::ScriptedRandom;

namespace {

const TimePoint kStart = TimePoint{} + 100s;

// max_attempts 3, full jitter (so an unexpected random draw fails the
// ScriptedRandom), Retry-After / pushback honored up to 5s.
RetryPolicy grpc_policy() {
  RetryPolicy p;
  p.max_attempts = 3;
  p.backoff = Backoff{Millis{100}, Millis{1000}, Jitter::full};
  return p;
}

RetryState::Request grpc_call(bool route_idempotent = false) {
  return RetryState::Request{"POST", false, true, false, route_idempotent};
}

AttemptResult grpc_answer(GrpcStatus s) {
  AttemptResult r;
  r.status = 200;
  r.grpc = s;
  return r;
}

AttemptResult with_pushback(AttemptResult r, bool stop, Millis wait) {
  r.pushback = GrpcPushback{stop, wait};
  return r;
}

AttemptResult refused_stream() {
  AttemptResult r;
  r.outcome = AttemptOutcome::refused;
  r.request_may_have_reached = true;  // ignored: a refused stream never reached the application
  return r;
}

RetryState::Decision attempt(RetryState& s, const AttemptResult& r, TimePoint now, Random& rng) {
  s.on_attempt_started();
  return s.on_attempt_result(r, now, false, rng, nullptr);
}

}  // namespace

TEST_CASE("GrpcStatusListedInRetryOnIsATriggerNamedByTheStatus") {
  const RetryOn on;  // default: unavailable among the gRPC names
  CHECK(is_retryable_outcome(grpc_answer(GrpcStatus::unavailable), on));
  for (auto s : {GrpcStatus::ok, GrpcStatus::internal, GrpcStatus::not_found, GrpcStatus::cancelled})
    CHECK_FALSE(is_retryable_outcome(grpc_answer(s), on));
  RetryOn internal_only;
  internal_only.grpc_statuses = {GrpcStatus::internal};
  CHECK(is_retryable_outcome(grpc_answer(GrpcStatus::internal), internal_only));
  CHECK_FALSE(is_retryable_outcome(grpc_answer(GrpcStatus::unavailable), internal_only));
  // The HTTP 200 of a gRPC answer is not looked at, even when listed.
  RetryOn with_200;
  with_200.statuses = {200};
  with_200.grpc_statuses = {};
  CHECK_FALSE(is_retryable_outcome(grpc_answer(GrpcStatus::ok), with_200));

  CHECK(trigger_name(grpc_answer(GrpcStatus::unavailable)) == "unavailable");
  CHECK(trigger_name(grpc_answer(GrpcStatus::deadline_exceeded)) == "deadline-exceeded");
  CHECK(trigger_name(RetryTrigger{AttemptOutcome::response, 503, {}}) == "503");
  CHECK(trigger_name(RetryTrigger{AttemptOutcome::refused, 0, {}}) == "refused-stream");
}

TEST_CASE("GrpcServerFailuresCountAsFailedAttemptsCallerErrorsDoNot") {
  const RetryOn on;
  for (auto s : {GrpcStatus::unknown, GrpcStatus::deadline_exceeded, GrpcStatus::internal, GrpcStatus::unavailable,
                 GrpcStatus::data_loss})
    CHECK(attempt_failed(grpc_answer(s), on));
  for (auto s : {GrpcStatus::ok, GrpcStatus::invalid_argument, GrpcStatus::not_found, GrpcStatus::permission_denied,
                 GrpcStatus::unauthenticated, GrpcStatus::cancelled})
    CHECK_FALSE(attempt_failed(grpc_answer(s), on));
  RetryOn cancelled;
  cancelled.grpc_statuses = {GrpcStatus::cancelled};
  CHECK(attempt_failed(grpc_answer(GrpcStatus::cancelled), cancelled));
  // A refused stream is no verdict on the upstream (it was not processed).
  CHECK_FALSE(attempt_failed(AttemptResult{{AttemptOutcome::refused, 0, {}}}, on));
}

TEST_CASE("GrpcPostIsNotRetriedWithoutKeyOrIdempotentRoute") {
  const RetryPolicy p = grpc_policy();
  RetryState s(p, 10s, kStart, grpc_call());
  ScriptedRandom rng{};
  auto d = attempt(s, grpc_answer(GrpcStatus::unavailable), kStart, rng);
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::not_idempotent);
  CHECK_FALSE(d.mark_exhausted);
  CHECK(d.trigger.is_grpc());
}

TEST_CASE("IdempotentRouteRetriesAGrpcPostWithJitteredBackoff") {
  const RetryPolicy p = grpc_policy();
  RetryState s(p, 10s, kStart, grpc_call(true));
  ScriptedRandom rng{50};  // full jitter over [0, 100]: 50 % 101 = 50
  auto d = attempt(s, grpc_answer(GrpcStatus::unavailable), kStart, rng);
  CHECK(d.retry);
  CHECK(d.wait == 50ms);
  CHECK(trigger_name(d.trigger) == "unavailable");
}

TEST_CASE("IdempotentRouteAlsoCoversPlainHttpPost") {
  const RetryPolicy p = grpc_policy();
  RetryState safe(p, 10s, kStart, RetryState::Request{"PATCH", false, true, false, true});
  RetryState unsafe(p, 10s, kStart, RetryState::Request{"PATCH", false, true, false, false});
  ScriptedRandom rng{0};
  AttemptResult r503;
  r503.status = 503;
  CHECK(attempt(safe, r503, kStart, rng).retry);
  CHECK(attempt(unsafe, r503, kStart, rng).declined == Decline::not_idempotent);
}

TEST_CASE("PushbackSetsTheWaitExactlyWithoutJitter") {
  const RetryPolicy p = grpc_policy();
  RetryState s(p, 10s, kStart, grpc_call(true));
  ScriptedRandom rng{};  // no random number may be drawn
  auto d = attempt(s, with_pushback(grpc_answer(GrpcStatus::unavailable), false, 300ms), kStart, rng);
  CHECK(d.retry);
  CHECK(d.wait == 300ms);
  // Below the backoff too: the server's word is the wait.
  auto d2 = attempt(s, with_pushback(grpc_answer(GrpcStatus::unavailable), false, 0ms), kStart + 1s, rng);
  CHECK(d2.retry);
  CHECK(d2.wait == 0ms);
  CHECK(rng.used() == 0);
}

TEST_CASE("PushbackWinsOverRetryAfter") {
  const RetryPolicy p = grpc_policy();
  RetryState s(p, 10s, kStart, grpc_call(true));
  ScriptedRandom rng{};
  AttemptResult r = with_pushback(grpc_answer(GrpcStatus::unavailable), false, 200ms);
  r.retry_after = 2s;
  auto d = attempt(s, r, kStart, rng);
  CHECK(d.retry);
  CHECK(d.wait == 200ms);
}

TEST_CASE("PushbackBeyondMaxGivesUpAndMarksExhausted") {
  const RetryPolicy p = grpc_policy();  // max 5s
  RetryState s(p, 60s, kStart, grpc_call(true));
  ScriptedRandom rng{};
  auto d = attempt(s, with_pushback(grpc_answer(GrpcStatus::unavailable), false, 5001ms), kStart, rng);
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::retry_after_beyond_deadline);
  CHECK(d.mark_exhausted);
  RetryState at_max(p, 60s, kStart, grpc_call(true));
  auto ok = attempt(at_max, with_pushback(grpc_answer(GrpcStatus::unavailable), false, 5000ms), kStart, rng);
  CHECK(ok.retry);
  CHECK(ok.wait == 5000ms);
}

TEST_CASE("PushbackBeyondTimeLeftGivesUp") {
  const RetryPolicy p = grpc_policy();
  RetryState s(p, 1s, kStart, grpc_call(true));
  ScriptedRandom rng{};
  // 400ms used, 600ms left: 601ms does not fit, 599ms does.
  auto d = attempt(s, with_pushback(grpc_answer(GrpcStatus::unavailable), false, 601ms), kStart + 400ms, rng);
  CHECK(d.declined == Decline::retry_after_beyond_deadline);
  CHECK(d.mark_exhausted);
  RetryState s2(p, 1s, kStart, grpc_call(true));
  auto d2 = attempt(s2, with_pushback(grpc_answer(GrpcStatus::unavailable), false, 599ms), kStart + 400ms, rng);
  CHECK(d2.retry);
  CHECK(d2.wait == 599ms);
  // Exactly the time left: the retry would start at the deadline.
  RetryState s3(p, 1s, kStart, grpc_call(true));
  auto d3 = attempt(s3, with_pushback(grpc_answer(GrpcStatus::unavailable), false, 600ms), kStart + 400ms, rng);
  CHECK(d3.declined == Decline::deadline);
}

TEST_CASE("NegativeOrGarbagePushbackStopsRetriesAsServerPushback") {
  const RetryPolicy p = grpc_policy();
  RetryState s(p, 10s, kStart, grpc_call(true));
  ScriptedRandom rng{};
  auto d = attempt(s, with_pushback(grpc_answer(GrpcStatus::unavailable), true, 0ms), kStart, rng);
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::server_pushback);
  CHECK(is_counted_decline(Decline::server_pushback));
  CHECK(std::string(decline_name(Decline::server_pushback)) == "server_pushback");
  CHECK(d.mark_exhausted);
  // A route that never retries never marks.
  RetryPolicy single = grpc_policy();
  single.max_attempts = 1;
  RetryState once(single, 10s, kStart, grpc_call(true));
  auto d1 = attempt(once, with_pushback(grpc_answer(GrpcStatus::unavailable), true, 0ms), kStart, rng);
  CHECK(d1.declined == Decline::attempts_exhausted);
  CHECK_FALSE(d1.mark_exhausted);
}

TEST_CASE("PushbackIgnoredWhenRetryAfterIsNotHonored") {
  RetryPolicy p = grpc_policy();
  p.retry_after.honor = false;
  RetryState s(p, 10s, kStart, grpc_call(true));
  ScriptedRandom rng{30, 40};
  auto stop = attempt(s, with_pushback(grpc_answer(GrpcStatus::unavailable), true, 0ms), kStart, rng);
  CHECK(stop.retry);
  CHECK(stop.wait == 30ms);  // the jittered backoff
  auto long_wait = attempt(s, with_pushback(grpc_answer(GrpcStatus::unavailable), false, 9s), kStart + 1s, rng);
  CHECK(long_wait.retry);
  CHECK(long_wait.wait == 40ms);  // backoff for retry 2 is [0, 200]: 40 % 201
}

TEST_CASE("PushbackOnANonRetryableAnswerChangesNothing") {
  const RetryPolicy p = grpc_policy();
  RetryState s(p, 10s, kStart, grpc_call(true));
  ScriptedRandom rng{};
  auto d = attempt(s, with_pushback(grpc_answer(GrpcStatus::ok), true, 0ms), kStart, rng);
  CHECK(d.declined == Decline::not_retryable);
  CHECK_FALSE(d.mark_exhausted);
}

TEST_CASE("FirstRefusedStreamIsResentAtOnceWithoutBudgetOrBackoff") {
  const RetryPolicy p = grpc_policy();
  RetryState s(p, 10s, kStart, grpc_call());  // POST, no key, route not idempotent
  ScriptedRandom rng{};                         // no draw: a re-send has no backoff
  RetryBudget empty(RetryBudgetConfig{0.0, 0.0, BudgetMode::requests}, kStart);
  REQUIRE_FALSE(empty.try_spend(kStart));
  s.on_attempt_started();
  auto d = s.on_attempt_result(refused_stream(), kStart, false, rng, &empty);
  CHECK(d.retry);
  CHECK(d.resend);
  CHECK(d.wait == 0ms);
  CHECK(d.trigger.outcome == AttemptOutcome::refused);
  // The second refusal is a retry like any other: the budget decides.
  s.on_attempt_started();
  ScriptedRandom rng2{0};
  auto second = s.on_attempt_result(refused_stream(), kStart, false, rng2, &empty);
  CHECK_FALSE(second.retry);
  CHECK(second.declined == Decline::budget_exhausted);
  // Whereas a reset of the same POST is not retried.
  RetryState s2(p, 10s, kStart, grpc_call());
  AttemptResult reset;
  reset.outcome = AttemptOutcome::reset;
  CHECK(attempt(s2, reset, kStart, rng).declined == Decline::not_idempotent);
}

TEST_CASE("SecondRefusedStreamIsRetriedWhateverTheMethodWithTheFirstRetrysBackoff") {
  const RetryPolicy p = grpc_policy();  // base 100ms, cap 1s, full jitter
  RetryState s(p, 10s, kStart, grpc_call());
  ScriptedRandom rng{150};
  CHECK(attempt(s, refused_stream(), kStart, rng).resend);
  auto d = attempt(s, refused_stream(), kStart, rng);
  CHECK(d.retry);
  CHECK_FALSE(d.resend);
  // Retry 1 (the re-send is not counted): uniform[0, 100] -> 150 % 101.
  CHECK(d.wait == 49ms);
}

TEST_CASE("RefusedStreamIsResentWhateverRetryOnThenFollowsRetryOnReset") {
  RetryPolicy p = grpc_policy();
  p.retry_on.reset = false;
  RetryState s(p, 10s, kStart, grpc_call());
  ScriptedRandom rng{};
  CHECK_FALSE(is_retryable_outcome(refused_stream(), p.retry_on));
  CHECK(attempt(s, refused_stream(), kStart, rng).resend);
  CHECK(attempt(s, refused_stream(), kStart, rng).declined == Decline::not_retryable);
}

TEST_CASE("RefusedStreamResendIsNotCountedAgainstMaxAttempts") {
  const RetryPolicy p = grpc_policy();  // max_attempts 3
  ScriptedRandom rng{0, 0};
  RetryState s(p, 10s, kStart, grpc_call());
  CHECK(attempt(s, refused_stream(), kStart, rng).resend);  // attempt 1, re-sent as attempt 2
  CHECK(attempt(s, refused_stream(), kStart, rng).retry);   // counted 1 -> retry
  CHECK(attempt(s, refused_stream(), kStart, rng).retry);   // counted 2 -> retry
  auto fourth = attempt(s, refused_stream(), kStart, rng);  // counted 3: the policy's all
  CHECK(fourth.declined == Decline::attempts_exhausted);
  CHECK(fourth.mark_exhausted);
  CHECK(s.attempts_started() == 4);
}

TEST_CASE("AReSentAttemptKeepsItsNumberSoTheNumberNeverPassesMaxAttempts") {
  const RetryPolicy p = grpc_policy();  // max_attempts 3
  ScriptedRandom rng{0, 0};
  RetryState s(p, 10s, kStart, grpc_call());
  s.on_attempt_started();
  CHECK(s.attempt_number() == 1);
  CHECK(s.on_attempt_result(refused_stream(), kStart, false, rng, nullptr).resend);
  s.on_attempt_started();  // the re-send: attempt 1 again on the wire
  CHECK(s.attempt_number() == 1);
  CHECK(s.attempts_started() == 2);
  CHECK(s.on_attempt_result(refused_stream(), kStart, false, rng, nullptr).retry);
  s.on_attempt_started();
  CHECK(s.attempt_number() == 2);
  CHECK(s.on_attempt_result(refused_stream(), kStart, false, rng, nullptr).retry);
  s.on_attempt_started();
  CHECK(s.attempt_number() == 3);  // max_attempts, not 4
  CHECK(s.attempts_started() == 4);
}

TEST_CASE("RefusedStreamIsResentOnceEvenWhenAnOuterLayerOwnsRetriesOrTheRouteDoesNotRetry") {
  const RetryPolicy p = grpc_policy();
  ScriptedRandom rng{};
  RetryState inner(p, 10s, kStart, RetryState::Request{"POST", false, true, true, false});
  CHECK(attempt(inner, refused_stream(), kStart, rng).resend);
  CHECK(attempt(inner, refused_stream(), kStart, rng).declined == Decline::outer_owner);
  RetryPolicy once = grpc_policy();
  once.max_attempts = 1;
  RetryState single(once, 10s, kStart, grpc_call());
  CHECK(attempt(single, refused_stream(), kStart, rng).resend);
  auto d = attempt(single, refused_stream(), kStart, rng);
  CHECK(d.declined == Decline::attempts_exhausted);
  CHECK_FALSE(d.mark_exhausted);  // a route that does not retry never marks
}

TEST_CASE("RefusedStreamIsNotResentAfterTheResponseStartedWithoutABodyOrTime") {
  const RetryPolicy p = grpc_policy();
  ScriptedRandom rng{0};
  RetryState started(p, 10s, kStart, grpc_call());
  started.on_attempt_started();
  auto d = started.on_attempt_result(refused_stream(), kStart, true, rng, nullptr);
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::not_retryable);
  RetryState big(p, 10s, kStart, RetryState::Request{"POST", false, false, false, false});
  CHECK(attempt(big, refused_stream(), kStart, rng).declined == Decline::body_too_large);
  RetryState late(p, 10s, kStart, grpc_call());
  auto at_deadline = attempt(late, refused_stream(), kStart + 10s, rng);
  CHECK_FALSE(at_deadline.retry);
  // One millisecond left is enough for the re-send.
  RetryState just(p, 10s, kStart, grpc_call());
  CHECK(attempt(just, refused_stream(), kStart + 9999ms, rng).resend);
}

TEST_CASE("GrpcCallCommittedOnceAMessageWentDownstream") {
  const RetryPolicy p = grpc_policy();
  RetryState s(p, 10s, kStart, grpc_call(true));
  ScriptedRandom rng{};
  s.on_attempt_started();
  auto d = s.on_attempt_result(grpc_answer(GrpcStatus::unavailable), kStart, true, rng, nullptr);
  CHECK_FALSE(d.retry);
  CHECK(d.declined == Decline::not_retryable);
}
