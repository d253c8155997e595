// Per-upstream retry budget, shared by every worker thread.
//
// The promise (Linkerd / Finagle style): over any stretch of time,
//   retries <= ratio * requests + min_per_second * seconds + initial
// so a total outage costs about (1 + ratio) attempts per request plus a small
// per-second floor, instead of max_attempts per request.
//
// Implemented as a token bucket, in exact fixed point (micro-tokens, so
// ratio 0.2 deposited five times is exactly one token):
// - every downstream request routed to the upstream deposits `ratio` tokens
//   (on_request);
// - the bucket refills continuously at `min_per_second` tokens per second;
// - a retry needs and withdraws one whole token (try_spend);
// - initial balance: min_per_second tokens (one second of the floor), so a
//   freshly started or reloaded proxy can retry its first failures at once;
// - cap: min_per_second * 10 + ratio * (requests in the last 10 s, counted in
//   1 s buckets). Deposits beyond the cap are lost. The cap never lets the
//   bucket exceed what Finagle's 10 s window would allow, and it stops a long
//   quiet or busy-but-healthy period from banking an unbounded retry storm.
// Spends never exceed initial + deposits + refill, which is the bound above.
//
// mode: successes (gRPC A6 retry throttling, the AWS SDK's retry quota): a
// bucket of min_per_second * 10 tokens that starts full. Each failed attempt
// withdraws 1 token (never below 0), each other attempt deposits `ratio`
// (never above full); time adds nothing. A retry is allowed only while the
// bucket is above half full, and spends nothing itself (its own failure
// will). In a total outage the bucket falls to half after about
// min_per_second * 5 failed attempts, and from then on no request is
// retried until successes fill it again.
//
// scope: fleet (docs/fleet.md): the bucket is fed by the fleet's shell
// instead. Until the first sync it is empty; each sync loads this instance's
// share (load_fleet_share: requests mode, `grant` tokens added and the
// balance held at most at `cap`, with no deposits or refill in between;
// successes mode, the fleet bucket's level `cap`, which this instance's own
// outcomes then move until the next load). In safe mode (enter_fleet_safe_mode)
// it is the local bucket again, with min_per_second scaled down and refilling
// from the moment it went local, not from the last request it saw while held.
// Every scope counts first attempts, retries and attempt outcomes for
// take_counts().
//
// Time points may arrive slightly out of order from different threads: a
// `now` earlier than one already seen refills nothing.
// Thread-safe: one short mutex-protected update per call.
#pragma once

#include <cstdint>
#include <mutex>

#include "core/base/clock.h"
#include "core/config/config.h"
#include "core/fleet/fleet_share.h"
#include "core/retry/request_window.h"

namespace onelayer {

class RetryBudget {
 public:
  static constexpr int kWindowSeconds = RequestWindow::kSeconds;

  RetryBudget(RetryBudgetConfig cfg, TimePoint now);

  void on_request(TimePoint now);      // each downstream request deposits `ratio` tokens
  bool try_spend(TimePoint now);       // a retry withdraws 1 token if available (successes: above half?)
  // successes mode: an attempt's outcome (failed: withdraw 1, else deposit
  // ratio). Does nothing in requests mode.
  void on_attempt_result(bool failed, TimePoint now);
  BudgetMode mode() const;
  double tokens(TimePoint now) const;  // gauge; reading it changes nothing
  // Takes effect for later calls; the balance is kept (clamped to the new cap).
  void reconfigure(RetryBudgetConfig cfg);

  // Fleet scope. Counts since the previous call (every scope counts).
  fleet::FleetCounts take_counts();
  void load_fleet_share(int64_t grant_micro, int64_t cap_micro);
  void enter_fleet_safe_mode(double floor_scale, TimePoint now);
  bool fleet_held() const;  // fed by fleet loads (pending or synced), not local refill

 private:
  struct Balance {
    int64_t micro = 0;      // tokens * 1e6
    int64_t carry = 0;      // refill below one micro-token, in micro-token*ns (< 1e9)
    TimePoint last;         // latest time seen
  };

  void set_config(const RetryBudgetConfig& cfg);
  int64_t second_of(TimePoint t) const;
  int64_t cap_micro(int64_t second) const;
  Balance refilled(TimePoint now) const;  // balance_ brought forward to `now`
  Balance refilled(TimePoint now, int64_t cap) const;  // the same, `cap` being cap_micro(second_of(now))

  mutable std::mutex mu_;
  BudgetMode mode_ = BudgetMode::requests;
  int64_t full_micro_ = 0;       // successes mode: the bucket's size
  int64_t ratio_micro_ = 0;      // deposit per request
  int64_t floor_micro_ = 0;      // refill per second
  TimePoint origin_;
  Balance balance_;
  RequestWindow window_;  // requests by seconds since origin_
  BudgetScope scope_ = BudgetScope::local;
  bool held_ = false;         // scope fleet, not in safe mode: fed by load_fleet_share only
  double floor_scale_ = 1.0;  // scope fleet, safe mode: min_per_second's multiplier
  double floor_ = 0;          // min_per_second as configured
  fleet::FleetCounts counts_;
};

}  // namespace onelayer
