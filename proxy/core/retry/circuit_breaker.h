// Optional per-upstream circuit breaker, shared by every worker thread.
//
//   closed --(consecutive_failures failures in a row)--> open
//   open --(open_for elapsed)--> half_open
//   half_open: admits up to half_open_probes concurrent trial attempts;
//              a success closes, a failure re-opens for another open_for.
//
// The shell asks allow() before every attempt (an open breaker answers 503
// circuit_open at once) and reports each admitted attempt's end with exactly
// one of on_success / on_failure / on_cancel; what counts as a failure
// (connect failure, reset, timeout, 5xx) is the shell's choice.
// Results arriving while open (attempts admitted before it opened) change
// nothing, so they cannot extend the open period.
// With cfg.enabled false: allow() is always true and nothing is tracked.
// Thread-safe: one short mutex-protected update per call; a disabled
// breaker answers without the lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "core/base/clock.h"
#include "core/config/config.h"

namespace onelayer {

class CircuitBreaker {
 public:
  enum class State { closed, open, half_open };

  explicit CircuitBreaker(CircuitBreakerConfig cfg);

  bool allow(TimePoint now);         // false while open; in half-open admits up to half_open_probes concurrent trials
  void on_success(TimePoint now);    // closes from half-open; resets consecutive failures
  void on_failure(TimePoint now);    // consecutive_failures reached -> open for open_for; a failed probe re-opens
  // An admitted attempt ended without a verdict (the client went away): frees
  // its half-open probe slot so the breaker cannot stay half-open forever.
  void on_cancel(TimePoint now);
  State state(TimePoint now) const;  // open -> half_open once open_for elapsed
  // Thresholds apply from now on; the current state is kept (disabling closes).
  void reconfigure(CircuitBreakerConfig cfg);

 private:
  bool open_elapsed(TimePoint now) const;
  void open_at(TimePoint now);
  void promote(TimePoint now);  // open -> half_open once open_for elapsed

  // cfg_.enabled, readable without mu_: a disabled breaker (the default)
  // answers every call without taking the lock. Calls that find it enabled
  // check again under the lock.
  std::atomic<bool> enabled_;
  mutable std::mutex mu_;
  CircuitBreakerConfig cfg_;
  State state_ = State::closed;
  uint32_t failures_ = 0;         // consecutive, while closed
  TimePoint opened_at_{};
  uint32_t probes_in_flight_ = 0;  // while half-open
};

// "closed", "open", "half_open".
const char* state_name(CircuitBreaker::State);

}  // namespace onelayer
