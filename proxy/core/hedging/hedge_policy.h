// Hedged requests (docs/retries.md, "Hedged requests"): when a request that
// may be repeated has no response head `after` its first attempt started,
// another attempt goes to an endpoint not yet tried, and the first final
// answer that is not retryable wins. Pure: the shell asks a HedgePlan when
// its hedge timer fires and when an attempt answers, and carries the answer
// out (the attempt, the cancel of the losers, the counters).
#pragma once

#include <cstdint>
#include <optional>

#include "core/base/clock.h"
#include "core/config/config.h"
#include "core/config/hedge_config.h"
#include "core/hedging/latency_window.h"
#include "core/retry/retry.h"

namespace onelayer {

class RetryBudget;

// The threshold now: the fixed duration, or the percentile of `w` rounded
// up to the millisecond (at least 1 ms). nullopt: a percentile with too few
// samples to estimate.
std::optional<Millis> resolve(const LatencyThreshold&, const LatencyWindow& w, TimePoint now);

class HedgePlan {  // one per downstream request that may be hedged
 public:
  // `policy` outlives the plan (it lives in the request's ConfigPtr).
  explicit HedgePlan(const RetryPolicy& policy) : policy_(policy) {}

  // Whether a request is hedged at all: the route has `retry.hedge` and this
  // layer owns the request's retries (max_attempts > 1, no outer owner) and
  // may repeat it (idempotent method, Idempotency-Key or an idempotent
  // route; a body within buffer_limit). Decided once, before the first
  // attempt: a hedge is never sent for a request an outer layer owns.
  static bool applies(const RetryPolicy& policy, const RetryState& rs);

  // The wait from `now` until the next hedge is due: `after` from
  // `last_start` (the start of the latest attempt in flight), and no sooner
  // than a server's pushback allows. nullopt: none is planned (all `max`
  // sent, hedging stopped by a server, or `after` is a percentile the
  // upstream has too few recent samples for).
  std::optional<Millis> next_delay(const UpstreamLatency& latency, TimePoint last_start, TimePoint now) const;

  // gRPC A6: a status in retry_on on one attempt asks for the next hedge
  // at once: the wait from `now` (0, or what is left of a pushback's wait).
  // nullopt: none left, or hedging stopped.
  std::optional<Millis> next_delay_at_once(TimePoint now) const;

  struct Due {
    bool head_received = false;      // some attempt of the request has its response head
    bool untried_endpoint = true;    // the upstream has an endpoint this request has not used
  };
  struct Decision {
    bool hedge = false;
    // Why not (Decline::none: nothing was due, not counted). A counted
    // reason is a hedge that was due and not sent:
    // onelayer_hedges_total{result="declined"}.
    Decline declined = Decline::none;
  };
  // A hedge is due (its timer fired, or a gRPC attempt's listed status asks
  // for the next one at once). Checks, in order: hedging stopped, a head
  // already received, all `max` sent -> none (not counted); no endpoint
  // left untried -> attempts_exhausted; max_attempts reached ->
  // attempts_exhausted; time left below `after` (no whole `after` fits) ->
  // deadline; time left below `min_time_left` -> deadline_too_short; last
  // the budget (nullptr: none) -> budget_exhausted, so a token is spent
  // only on a hedge that is sent. A hedge sent is counted here; the shell
  // then admits it (RetryState::admit_attempt) like any attempt.
  Decision on_due(const RetryState& rs, TimePoint now, const Due& due, RetryBudget* budget,
                  const UpstreamLatency& latency);

  // gRPC A6: a server's pushback on a hedged attempt. A wait delays the
  // next hedge (next_delay is at least the wait from `now`); stop ends
  // hedging for the request.
  void on_pushback(const GrpcPushback& p, TimePoint now);

  // Which answer wins: the first final answer that is not retryable (under
  // retry_on). A retryable one lets the other attempts run on.
  static bool wins(const AttemptResult& r, const RetryOn& on) { return !is_retryable_outcome(r, on); }

  uint32_t sent() const { return sent_; }
  bool stopped() const { return stopped_; }

 private:
  const RetryPolicy& policy_;
  uint32_t sent_ = 0;
  bool stopped_ = false;
  std::optional<TimePoint> not_before_;  // a pushback's wait
};

// retry.min_time_left, resolved: the least time a retry or hedge needs
// left (0: off, or a percentile with too few samples).
Millis min_time_left(const RetryPolicy& policy, const UpstreamLatency& latency, TimePoint now);

}  // namespace onelayer
