#include "core/retry/retry.h"

#include <algorithm>
#include <array>
#include <limits>

#include "core/base/random.h"
#include "core/retry/circuit_breaker.h"
#include "core/retry/retry_budget.h"

namespace onelayer {
namespace {

constexpr int64_t kMaxMs = std::numeric_limits<int64_t>::max();

int64_t non_negative(Millis m) { return std::max<int64_t>(0, m.count()); }

// min(cap, base * 2^(n-1)) without overflowing.
int64_t exponential(int64_t base, int64_t cap, uint32_t n) {
  const uint32_t shift = n - 1;
  if (base == 0) return 0;
  if (shift >= 62 || base > (cap >> shift)) return cap;
  return std::min(cap, base << shift);
}

int64_t times_three_saturating(int64_t v) { return v > kMaxMs / 3 ? kMaxMs : v * 3; }

}  // namespace

bool is_idempotent_method(std::string_view method) {
  static constexpr std::array<std::string_view, 6> kIdempotent{"GET",   "HEAD",   "OPTIONS",
                                                               "TRACE", "PUT",    "DELETE"};
  return std::find(kIdempotent.begin(), kIdempotent.end(), method) != kIdempotent.end();
}

bool is_retryable_outcome(const AttemptResult& r, const RetryOn& on) {
  switch (r.outcome) {
    case AttemptOutcome::connect_failure: return on.connect_failure;
    case AttemptOutcome::reset: return on.reset;
    case AttemptOutcome::timeout: return on.timeout;
    case AttemptOutcome::refused: return on.reset;
    case AttemptOutcome::response:
      if (r.grpc) return on.has_grpc_status(*r.grpc);
      return on.has_status(r.status);
  }
  return false;
}

bool attempt_failed(const AttemptResult& r, const RetryOn& on) {
  if (r.outcome == AttemptOutcome::refused) return false;
  if (r.outcome != AttemptOutcome::response) return true;
  if (r.grpc) {
    switch (*r.grpc) {
      case GrpcStatus::unknown:
      case GrpcStatus::deadline_exceeded:
      case GrpcStatus::internal:
      case GrpcStatus::unavailable:
      case GrpcStatus::data_loss: return true;
      default: return on.has_grpc_status(*r.grpc);
    }
  }
  if (r.status >= 500 && r.status <= 599 && r.status != 501) return true;
  return on.has_status(r.status);
}

Millis backoff_delay(const Backoff& b, uint32_t retry_number, Millis previous_wait, Random& rng) {
  const int64_t cap = non_negative(b.cap);
  const int64_t base = std::min(non_negative(b.base), cap);
  const uint32_t n = std::max<uint32_t>(1, retry_number);
  const int64_t d = exponential(base, cap, n);
  switch (b.jitter) {
    case Jitter::full: return Millis{rng.between(0, d)};
    case Jitter::equal: {
      const int64_t half = d / 2;
      return Millis{half + rng.between(0, d - half)};
    }
    case Jitter::decorrelated: {
      const int64_t prev = n == 1 ? base : non_negative(previous_wait);
      const int64_t hi = std::max(base, times_three_saturating(prev));
      return Millis{std::min(cap, rng.between(base, hi))};
    }
    case Jitter::none: return Millis{d};
  }
  return Millis{d};
}

RetryState::RetryState(const RetryPolicy& policy, Millis route_timeout, TimePoint start,
                       const Request& req)
    : policy_(policy),
      route_timeout_(std::max(Millis{0}, route_timeout)),
      deadline_(start + route_timeout_),
      max_attempts_(std::max<uint32_t>(1, policy.max_attempts)),
      safe_(is_idempotent_method(req.method) || req.has_idempotency_key || req.route_idempotent),
      body_replayable_(req.body_replayable),
      outer_owned_(req.outer_owned) {}

TimePoint RetryState::deadline() const { return deadline_; }

Millis RetryState::time_left(TimePoint now) const {
  if (now >= deadline_) return Millis{0};
  return std::chrono::floor<Millis>(deadline_ - now);
}

Millis RetryState::attempt_timeout(TimePoint now) const {
  Millis per_try = policy_.per_try_timeout.value_or(route_timeout_);
  return std::clamp(per_try, Millis{0}, time_left(now));
}

uint32_t RetryState::attempts_started() const { return attempts_; }

void RetryState::on_attempt_started() { ++attempts_; }

bool RetryState::owns_retries() const { return max_attempts_ > 1 && !outer_owned_; }

RetryState::Decision RetryState::decline(Decline why, RetryTrigger trigger) const {
  Decision d;
  d.declined = why;
  d.trigger = trigger;
  switch (why) {
    case Decline::attempts_exhausted:
    case Decline::budget_exhausted:
    case Decline::deadline:
    case Decline::deadline_too_short:
    case Decline::retry_after_beyond_deadline:
    case Decline::server_pushback:
    case Decline::circuit_open:
      // Only the owner of retries tells outer layers it gave up.
      d.mark_exhausted = owns_retries();
      break;
    default: d.mark_exhausted = false;
  }
  return d;
}

RetryState::ServerWait RetryState::server_wait(const AttemptResult& r, Millis backoff, Millis left) const {
  const RetryAfterPolicy& ra = policy_.retry_after;
  const Millis max = std::max(Millis{0}, ra.max);
  ServerWait sw;
  if (ra.honor && r.pushback) {
    if (r.pushback->stop) {
      sw.declined = Decline::server_pushback;
      return sw;
    }
    const Millis asked = std::max(Millis{0}, r.pushback->wait);
    if (asked > max || asked > left) sw.declined = Decline::retry_after_beyond_deadline;
    sw.wait = asked;
    return sw;
  }
  sw.wait = backoff;
  if (ra.honor && r.retry_after) {
    const Millis asked = std::max(Millis{0}, *r.retry_after);
    if (asked > ra.max || asked > left) {
      sw.declined = Decline::retry_after_beyond_deadline;
      return sw;
    }
    sw.wait = std::max(sw.wait, asked);
  }
  sw.wait = std::min(sw.wait, max);
  return sw;
}

RetryState::Decision RetryState::on_circuit_open() const { return decline(Decline::circuit_open, {}); }

RetryState::Admission RetryState::admit_attempt(TimePoint now, CircuitBreaker* breaker) {
  Admission a;
  // The deadline first: allow() takes a half-open probe slot, which only an
  // attempt that really starts gives back (with its verdict).
  a.timeout = attempt_timeout(now);
  if (a.timeout.count() <= 0) {
    a.declined = Decline::deadline;
    a.mark_exhausted = decline(Decline::deadline, {}).mark_exhausted;
    return a;
  }
  if (breaker != nullptr && !breaker->allow(now)) {
    a.declined = Decline::circuit_open;
    a.mark_exhausted = on_circuit_open().mark_exhausted;
    return a;
  }
  on_attempt_started();
  a.admitted = true;
  return a;
}

RetryState::Decision RetryState::on_attempt_result(const AttemptResult& r, TimePoint now,
                                                   bool response_started, Random& rng,
                                                   RetryBudget* budget, const CircuitBreaker* breaker) {
  const RetryTrigger trigger = r;
  if (r.outcome == AttemptOutcome::refused && resends_ == 0 && !response_started && body_replayable_ &&
      time_left(now).count() > 0) {
    ++resends_;
    Decision d;
    d.retry = true;
    d.resend = true;
    d.trigger = trigger;
    return d;
  }
  if (!is_retryable_outcome(r, policy_.retry_on)) return decline(Decline::not_retryable, trigger);
  // An open breaker refuses a retry that would otherwise be weighed, before a
  // budget token is spent on it.
  if (breaker != nullptr && !response_started && owns_retries() && counted_attempts() < max_attempts_ &&
      breaker->state(now) == CircuitBreaker::State::open)
    return decline(Decline::circuit_open, trigger);
  if (r.inner_exhausted) return decline(Decline::inner_exhausted, trigger);
  if (outer_owned_) return decline(Decline::outer_owner, trigger);
  if (response_started) return decline(Decline::not_retryable, trigger);
  // RFC 9110 9.2.2: only idempotent requests, or ones that never reached
  // the application (a refused stream was not processed, RFC 9113 8.7).
  const bool reached = r.request_may_have_reached && r.outcome != AttemptOutcome::refused;
  if (!safe_ && reached) return decline(Decline::not_idempotent, trigger);
  if (!body_replayable_) return decline(Decline::body_too_large, trigger);
  if (counted_attempts() >= max_attempts_) return decline(Decline::attempts_exhausted, trigger);

  // Comparisons stay in milliseconds: a Retry-After can be near-saturated and
  // must never be added to a time point.
  const Millis left = time_left(now);
  // A pushback replaces the backoff: no random number is drawn for it.
  const bool pushback = policy_.retry_after.honor && r.pushback;
  const Millis backoff =
      pushback ? Millis{0} : backoff_delay(policy_.backoff, std::max<uint32_t>(1, counted_attempts()), previous_wait_, rng);
  const ServerWait sw = server_wait(r, backoff, left);
  if (sw.declined != Decline::none) return decline(sw.declined, trigger);
  const Millis wait = sw.wait;
  // The retry would start at (or after) the deadline: no time for it.
  if (wait >= left) return decline(Decline::deadline, trigger);
  if (min_time_left_.count() > 0 && left - wait < min_time_left_)
    return decline(Decline::deadline_too_short, trigger);

  if (budget != nullptr && !budget->try_spend(now))
    return decline(Decline::budget_exhausted, trigger);

  previous_wait_ = wait;
  Decision d;
  d.retry = true;
  d.wait = wait;
  d.trigger = trigger;
  return d;
}

}  // namespace onelayer
