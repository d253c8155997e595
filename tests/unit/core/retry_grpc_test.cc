// gRPC in the retry decision: status triggers, pushback, refused streams and
// routes declared idempotent.
#include <doctest/doctest.h>

#include <string>

#include "core/retry.h"
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
  CHECK(attempt_failed(AttemptResult{{AttemptOutcome::refused, 0, {}}}, on));
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

TEST_CASE("RefusedStreamIsRetriedWhateverTheMethod") {
  const RetryPolicy p = grpc_policy();
  RetryState s(p, 10s, kStart, grpc_call());  // POST, no key, route not idempotent
  ScriptedRandom rng{0};
  AttemptResult refused;
  refused.outcome = AttemptOutcome::refused;
  refused.request_may_have_reached = true;  // ignored: a refused stream never reached the application
  auto d = attempt(s, refused, kStart, rng);
  CHECK(d.retry);
  CHECK(d.trigger.outcome == AttemptOutcome::refused);
  // Whereas a reset of the same POST is not retried.
  RetryState s2(p, 10s, kStart, grpc_call());
  AttemptResult reset;
  reset.outcome = AttemptOutcome::reset;
  CHECK(attempt(s2, reset, kStart, rng).declined == Decline::not_idempotent);
}

TEST_CASE("RefusedStreamFollowsRetryOnReset") {
  RetryPolicy p = grpc_policy();
  p.retry_on.reset = false;
  RetryState s(p, 10s, kStart, grpc_call());
  ScriptedRandom rng{};
  AttemptResult refused;
  refused.outcome = AttemptOutcome::refused;
  CHECK_FALSE(is_retryable_outcome(refused, p.retry_on));
  CHECK(attempt(s, refused, kStart, rng).declined == Decline::not_retryable);
}

TEST_CASE("RefusedStreamStillRespectsAttemptsAndOuterOwner") {
  const RetryPolicy p = grpc_policy();
  ScriptedRandom rng{0, 0};
  AttemptResult refused;
  refused.outcome = AttemptOutcome::refused;
  RetryState s(p, 10s, kStart, grpc_call());
  CHECK(attempt(s, refused, kStart, rng).retry);
  CHECK(attempt(s, refused, kStart, rng).retry);
  auto third = attempt(s, refused, kStart, rng);
  CHECK(third.declined == Decline::attempts_exhausted);
  CHECK(third.mark_exhausted);
  RetryState inner(p, 10s, kStart, RetryState::Request{"POST", false, true, true, false});
  CHECK(attempt(inner, refused, kStart, rng).declined == Decline::outer_owner);
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
