// The retry decision core (docs/retries.md). Pure: no I/O, no
// clock reads; `now` and a Random come in as arguments. The shell asks a
// RetryState what to do after each attempt and carries the answer out
// (timer, replay, counters, x-retry-exhausted) without re-deriving any part
// of it: the upstream's circuit breaker and retry budget come in as inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/base/clock.h"
#include "core/base/random.h"
#include "core/config/config.h"
#include "core/grpc/grpc_pushback.h"
#include "core/retry/retry_reasons.h"

namespace onelayer {

class CircuitBreaker;
class RetryBudget;

// One attempt's result as the shell saw it. Its RetryTrigger part (outcome,
// status, gRPC status) is what a retry is counted and logged under.
struct AttemptResult : RetryTrigger {
  // false: connect failure on a fresh connection (never sent a byte). A
  // refused outcome never reached the application whatever this says.
  bool request_may_have_reached = true;
  std::optional<Millis> retry_after;     // parsed Retry-After of the response, if any
  std::optional<GrpcPushback> pushback;  // grpc-retry-pushback-ms of the response, if any
  bool inner_exhausted = false;          // response carried x-retry-exhausted (head or trailers)
};

// GET HEAD OPTIONS TRACE PUT DELETE (RFC 9110 9.2.2); case-sensitive, as
// method names are.
bool is_idempotent_method(std::string_view method);

// Classification only (retry_on), no safety or budget checks. A refused
// stream is a kind of reset: retryable when retry_on has `reset`. A gRPC
// trigger (is_grpc()) is retryable when its status is listed; its HTTP
// status is not looked at.
bool is_retryable_outcome(const AttemptResult&, const RetryOn&);

// Whether an attempt failed, for onelayer_attempt_failures_total and the
// successes retry budget: a connect failure, reset or timeout (not a
// refused stream: the upstream turned it away unprocessed, as every HTTP/2
// server does with the streams above its GOAWAY when it closes a connection
// after N requests; that is no verdict on the upstream), a 5xx response
// other than 501, or a status listed in retry_on (429, ...). A gRPC trigger failed when its status is listed in retry_on or
// is a server-side failure: unknown, deadline-exceeded, internal,
// unavailable, data-loss. Everything else (2xx, 3xx, other 4xx, 501, gRPC
// ok and the caller's errors such as not-found) is an answer, not a failure.
bool attempt_failed(const AttemptResult&, const RetryOn&);

// Wait before retry n (n = 1 for the first retry; 0 is read as 1):
// d = min(cap, base*2^(n-1)) without overflow, then jitter:
//   full:         uniform[0, d]
//   equal:        d/2 + uniform[0, d - d/2]   (d/2 rounded down; at most d)
//   decorrelated: min(cap, uniform[base, max(base, prev*3)]), prev = previous_wait,
//                 or base for n = 1 (previous_wait ignored)
//   none:         d
// Always within [0, cap] (decorrelated: [min(base, cap), cap]). Negative
// inputs are read as 0.
Millis backoff_delay(const Backoff&, uint32_t retry_number, Millis previous_wait, Random&);

class RetryState {  // one per downstream request
 public:
  struct Request {
    std::string_view method;   // read in the constructor only
    bool has_idempotency_key;  // the route's idempotency_key header is present and non-empty
    bool body_replayable;      // the body fit buffer_limit (or there is none)
    bool outer_owned;          // x-retry-owner / baggage retry-owner arrived
    bool route_idempotent = false;  // the route says retry.idempotent: true
  };

  // `policy` is kept by reference: it must outlive this object (it lives in
  // the ConfigPtr the request holds). The deadline is start + route_timeout
  // (the shell passes the route timeout already shortened by an incoming
  // x-request-timeout-ms).
  RetryState(const RetryPolicy& policy, Millis route_timeout, TimePoint start, const Request& req);

  TimePoint deadline() const;
  Millis time_left(TimePoint now) const;        // >= 0, rounded down to ms
  Millis attempt_timeout(TimePoint now) const;  // min(per_try_timeout or route timeout, time left)
  uint32_t attempts_started() const;
  void on_attempt_started();  // counts an attempt
  // The number of the attempt in flight as the single-layer headers carry
  // it (x-retry-attempt, the baggage retry-attempt member,
  // grpc-previous-rpc-attempts): the attempts counted against max_attempts,
  // so a re-send keeps the number of the attempt it sends again (that one
  // never reached the application) and the number never passes max_attempts.
  // attempts_started() counts the re-send too.
  uint32_t attempt_number() const { return counted_attempts(); }

  // True when this layer owns retries for the request: max_attempts > 1 and
  // no outer owner. The shell writes x-retry-owner & co only then.
  bool owns_retries() const;

  // The request may be sent again by this layer: it owns retries, and the
  // request is safe to repeat with a replayable body (what a hedge needs).
  bool may_repeat() const { return owns_retries() && safe_ && body_replayable_; }
  uint32_t max_attempts() const { return max_attempts_; }
  // retry.min_time_left as resolved now (0: off): a retry that would start
  // with less time left is declined deadline_too_short.
  void set_min_time_left(Millis m) { min_time_left_ = m; }

  // The shell found the body larger than buffer_limit after the start (a
  // chunked body grew past it): no retry from now on.
  void set_body_replayable(bool replayable) { body_replayable_ = replayable; }

  struct Decision {
    bool retry = false;
    Millis wait{0};
    Decline declined = Decline::none;
    RetryTrigger trigger;  // the result's outcome and status (also set when not retrying)
    bool mark_exhausted = false;
    // A re-send, not a retry: the first refused stream of the request goes
    // out again at once (wait 0), spending no budget token and not counted
    // against max_attempts.
    bool resend = false;
  };

  // Before every attempt, the first one included. admitted: the attempt is
  // counted (attempts_started() grows) and gets `timeout`, min(per-try
  // timeout, time left). Otherwise `declined` says why and nothing is counted:
  // circuit_open when the breaker (nullptr: none) does not allow it, checked
  // first; deadline when no whole millisecond is left. mark_exhausted as for
  // Decision (true only when this layer owns retries).
  struct Admission {
    bool admitted = false;
    Millis timeout{0};
    Decline declined = Decline::none;
    bool mark_exhausted = false;
  };
  // breaker->allow() is called once: in half-open it takes a probe slot the
  // shell gives back with the attempt's verdict.
  Admission admit_attempt(TimePoint now, CircuitBreaker* breaker);

  // After a failed or final attempt. retry=true: the shell waits `wait` then
  // makes another attempt (a budget token has been spent already).
  // retry=false & declined!=none/not_retryable: mark_exhausted says whether
  // the response gets x-retry-exhausted (true for attempts_exhausted,
  // budget_exhausted, deadline, retry_after_beyond_deadline when this layer
  // owns retries; false for not_idempotent, body_too_large, outer_owner,
  // inner_exhausted, and on max_attempts==1 routes, which never mark).
  // server_pushback is marked like retry_after_beyond_deadline: the server
  // said not to retry, so no outer layer should either.
  // response_started: a byte of the response already went downstream -> never retry.
  // Order of checks: retryable outcome? inner_exhausted; outer_owned;
  // response_started (not_retryable); safety (idempotent method, key or
  // route_idempotent, or !request_may_have_reached, or a refused stream) ->
  // not_idempotent; body_replayable -> body_too_large; attempts ->
  // attempts_exhausted; then, when retry_after.honor, a pushback: stop ->
  // server_pushback, a wait > retry_after.max or > time left ->
  // retry_after_beyond_deadline, else the wait is exactly the pushback
  // (no backoff, no jitter; it wins over a Retry-After); without a pushback,
  // wait = backoff, raised to Retry-After when honored (Retry-After >
  // retry_after.max or > time left -> retry_after_beyond_deadline), clamped
  // to retry_after.max; wait >= time left -> deadline; time left after the
  // wait below min_time_left (set_min_time_left) -> deadline_too_short
  // (marked like deadline); last the budget
  // (nullptr: none), so a token is spent only on a retry that happens ->
  // budget_exhausted. With honor false, Retry-After and pushback are both
  // ignored.
  // First of all, a refused stream (the upstream did not process it: RFC
  // 9113 8.7) is re-sent once per request, at once, when the response has
  // not started, the body is replayable and time is left: on any route
  // (max_attempts 1 and an outer owner included, since the application
  // still sees the request once), whatever retry_on says, with no budget
  // token and no backoff; the re-sent attempt does not count against
  // max_attempts. A second refusal goes through the rules below.
  // The breaker (nullptr: none) is asked right after the outcome is found
  // retryable, for a retry this layer would own with attempts left and the
  // response not started: open (not half-open) -> circuit_open, before any
  // other check and before a budget token is spent. Any outcome may be
  // passed; a final one is declined not_retryable.
  Decision on_attempt_result(const AttemptResult&, TimePoint now, bool response_started, Random&,
                             RetryBudget* budget, const CircuitBreaker* breaker = nullptr);

  // The upstream's circuit breaker refused an attempt. Declined
  // circuit_open; marked when this layer owns retries.
  Decision on_circuit_open() const;

 private:
  Decision decline(Decline why, RetryTrigger trigger) const;
  // The wait the server asked for (pushback, else Retry-After) applied to
  // `backoff`: the wait, or the decline it forces.
  struct ServerWait {
    Millis wait{0};
    Decline declined = Decline::none;
  };
  ServerWait server_wait(const AttemptResult&, Millis backoff, Millis left) const;

  const RetryPolicy& policy_;
  Millis route_timeout_;
  TimePoint deadline_;
  uint32_t max_attempts_;  // the policy's, at least 1 (an outer owner is outer_owned_)
  bool safe_;              // idempotent method, idempotency key or idempotent route
  bool body_replayable_;
  bool outer_owned_;
  uint32_t attempts_ = 0;
  uint32_t resends_ = 0;  // attempts that were re-sends (at most 1): not counted against max_attempts
  Millis previous_wait_{0};
  Millis min_time_left_{0};
  // Attempts counted against max_attempts.
  uint32_t counted_attempts() const { return attempts_ - resends_; }
};

}  // namespace onelayer
