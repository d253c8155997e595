#include "core/hedging/hedge_policy.h"

#include <algorithm>

#include "core/retry/retry_budget.h"

namespace onelayer {

std::optional<Millis> resolve(const LatencyThreshold& t, const LatencyWindow& w, TimePoint now) {
  if (t.percentile == 0) return t.fixed;
  std::optional<Micros> q = w.quantile(t.percentile / 100.0, now);
  if (!q) return std::nullopt;
  const int64_t ms = (q->count() + 999) / 1000;
  return Millis(ms < 1 ? 1 : ms);
}

bool HedgePlan::applies(const RetryPolicy& policy, const RetryState& rs) {
  return policy.hedge.enabled && policy.hedge.max > 0 && rs.may_repeat();
}

std::optional<Millis> HedgePlan::next_delay(const UpstreamLatency& latency, TimePoint last_start,
                                            TimePoint now) const {
  if (stopped_ || sent_ >= policy_.hedge.max) return std::nullopt;
  std::optional<Millis> after = resolve(policy_.hedge.after, latency.first_attempt, now);
  if (!after) return std::nullopt;
  const Millis since = std::chrono::floor<Millis>(now - last_start);
  Millis wait = std::max(Millis{0}, *after - since);
  if (not_before_ && *not_before_ > now) wait = std::max(wait, std::chrono::ceil<Millis>(*not_before_ - now));
  return wait;
}

std::optional<Millis> HedgePlan::next_delay_at_once(TimePoint now) const {
  if (stopped_ || sent_ >= policy_.hedge.max) return std::nullopt;
  if (not_before_ && *not_before_ > now) return std::chrono::ceil<Millis>(*not_before_ - now);
  return Millis{0};
}

HedgePlan::Decision HedgePlan::on_due(const RetryState& rs, TimePoint now, const Due& due, RetryBudget* budget,
                                      const UpstreamLatency& latency) {
  Decision d;
  if (stopped_ || due.head_received || sent_ >= policy_.hedge.max) return d;
  if (!due.untried_endpoint || rs.attempt_number() >= rs.max_attempts()) {
    d.declined = Decline::attempts_exhausted;
    return d;
  }
  const Millis left = rs.time_left(now);
  const Millis after = resolve(policy_.hedge.after, latency.first_attempt, now).value_or(Millis{0});
  if (left.count() <= 0 || left < after) {
    d.declined = Decline::deadline;
    return d;
  }
  const Millis need = min_time_left(policy_, latency, now);
  if (need.count() > 0 && left < need) {
    d.declined = Decline::deadline_too_short;
    return d;
  }
  if (budget != nullptr && !budget->try_spend(now)) {
    d.declined = Decline::budget_exhausted;
    return d;
  }
  ++sent_;
  d.hedge = true;
  return d;
}

void HedgePlan::on_pushback(const GrpcPushback& p, TimePoint now) {
  if (!policy_.retry_after.honor) return;
  if (p.stop) {
    stopped_ = true;
    return;
  }
  not_before_ = now + p.wait;
}

Millis min_time_left(const RetryPolicy& policy, const UpstreamLatency& latency, TimePoint now) {
  if (!policy.min_time_left) return Millis{0};
  return resolve(*policy.min_time_left, latency.success, now).value_or(Millis{0});
}

}  // namespace onelayer
