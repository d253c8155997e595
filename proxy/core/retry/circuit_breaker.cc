#include "core/retry/circuit_breaker.h"

#include <algorithm>

namespace onelayer {

CircuitBreaker::CircuitBreaker(CircuitBreakerConfig cfg) : enabled_(cfg.enabled), cfg_(cfg) {}

bool CircuitBreaker::open_elapsed(TimePoint now) const {
  return now >= opened_at_ + cfg_.open_for;
}

void CircuitBreaker::open_at(TimePoint now) {
  state_ = State::open;
  opened_at_ = now;
  failures_ = 0;
  probes_in_flight_ = 0;
}

void CircuitBreaker::promote(TimePoint now) {
  if (state_ == State::open && open_elapsed(now)) {
    state_ = State::half_open;
    probes_in_flight_ = 0;
  }
}

bool CircuitBreaker::allow(TimePoint now) {
  if (!enabled_.load(std::memory_order_acquire)) return true;
  std::lock_guard lock(mu_);
  if (!cfg_.enabled) return true;
  promote(now);
  switch (state_) {
    case State::closed: return true;
    case State::open: return false;
    case State::half_open:
      if (probes_in_flight_ >= std::max<uint32_t>(1, cfg_.half_open_probes)) return false;
      ++probes_in_flight_;
      return true;
  }
  return false;
}

void CircuitBreaker::on_success(TimePoint now) {
  if (!enabled_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(mu_);
  if (!cfg_.enabled) return;
  promote(now);
  if (state_ == State::open) return;  // admitted before it opened: no evidence of recovery
  state_ = State::closed;
  failures_ = 0;
  probes_in_flight_ = 0;
}

void CircuitBreaker::on_failure(TimePoint now) {
  if (!enabled_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(mu_);
  if (!cfg_.enabled) return;
  promote(now);
  switch (state_) {
    case State::closed:
      if (++failures_ >= std::max<uint32_t>(1, cfg_.consecutive_failures)) open_at(now);
      break;
    case State::half_open: open_at(now); break;
    case State::open: break;  // stale result: must not extend the open period
  }
}

void CircuitBreaker::on_cancel(TimePoint now) {
  if (!enabled_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(mu_);
  if (!cfg_.enabled) return;
  promote(now);
  if (state_ == State::half_open && probes_in_flight_ > 0) --probes_in_flight_;
}

CircuitBreaker::State CircuitBreaker::state(TimePoint now) const {
  if (!enabled_.load(std::memory_order_acquire)) return State::closed;
  std::lock_guard lock(mu_);
  if (!cfg_.enabled) return State::closed;
  if (state_ == State::open && open_elapsed(now)) return State::half_open;
  return state_;
}

void CircuitBreaker::reconfigure(CircuitBreakerConfig cfg) {
  std::lock_guard lock(mu_);
  cfg_ = cfg;
  enabled_.store(cfg.enabled, std::memory_order_release);
  if (!cfg_.enabled) {
    state_ = State::closed;
    failures_ = 0;
    probes_in_flight_ = 0;
  }
}

const char* state_name(CircuitBreaker::State s) {
  switch (s) {
    case CircuitBreaker::State::closed: return "closed";
    case CircuitBreaker::State::open: return "open";
    case CircuitBreaker::State::half_open: return "half_open";
  }
  return "unknown";
}

}  // namespace onelayer
