#include "core/retry/retry_budget.h"

#include <algorithm>
#include <cmath>

namespace onelayer {
namespace {

constexpr int64_t kMicro = 1'000'000;
constexpr int64_t kNanosPerSecond = 1'000'000'000;
// Config values beyond this are nonsense; bounding them keeps every product
// below comfortably inside int64.
constexpr double kMaxTokens = 1e9;

int64_t to_micro(double tokens) {
  if (!(tokens > 0)) return 0;  // also NaN
  return std::llround(std::min(tokens, kMaxTokens) * kMicro);
}

}  // namespace

RetryBudget::RetryBudget(RetryBudgetConfig cfg, TimePoint now) : origin_(now) {
  set_config(cfg);
  balance_.last = now;
  held_ = scope_ == BudgetScope::fleet;  // empty until the first sync
  if (!held_) balance_.micro = mode_ == BudgetMode::successes ? full_micro_ : floor_micro_;
}

void RetryBudget::set_config(const RetryBudgetConfig& cfg) {
  mode_ = cfg.mode;
  scope_ = cfg.scope;
  floor_ = cfg.min_per_second;
  ratio_micro_ = to_micro(cfg.ratio);
  full_micro_ = to_micro(cfg.min_per_second) * kWindowSeconds;
  floor_micro_ = to_micro(cfg.min_per_second * (scope_ == BudgetScope::fleet ? floor_scale_ : 1.0));
}

fleet::FleetCounts RetryBudget::take_counts() {
  std::lock_guard lock(mu_);
  fleet::FleetCounts c = counts_;
  counts_ = {};
  return c;
}

void RetryBudget::load_fleet_share(int64_t grant_micro, int64_t cap_micro) {
  std::lock_guard lock(mu_);
  if (scope_ != BudgetScope::fleet) return;
  if (!held_) balance_.micro = 0;  // back from safe mode: the fleet's share only
  held_ = true;
  floor_scale_ = 1.0;
  floor_micro_ = to_micro(floor_);
  cap_micro = std::max<int64_t>(0, cap_micro);
  if (mode_ == BudgetMode::successes) {
    balance_.micro = std::min(cap_micro, full_micro_);
  } else {
    balance_.micro = std::min(balance_.micro + std::max<int64_t>(0, grant_micro), cap_micro);
  }
  balance_.carry = 0;
}

void RetryBudget::enter_fleet_safe_mode(double floor_scale, TimePoint now) {
  std::lock_guard lock(mu_);
  if (scope_ != BudgetScope::fleet || !held_) return;
  held_ = false;
  floor_scale_ = std::clamp(floor_scale, 0.0, 1.0);
  floor_micro_ = to_micro(floor_ * floor_scale_);
  // The local bucket starts from what the last share left, within its cap,
  // and refills from now on: no refill for the time it was held (quiet or
  // busy), which would hand every instance of a fleet a full local bucket
  // at once.
  if (now > balance_.last) balance_.last = now;
  balance_.carry = 0;
  if (mode_ == BudgetMode::requests) balance_.micro = std::min(balance_.micro, cap_micro(second_of(balance_.last)));
}

bool RetryBudget::fleet_held() const {
  std::lock_guard lock(mu_);
  return held_;
}

BudgetMode RetryBudget::mode() const {
  std::lock_guard lock(mu_);
  return mode_;
}

void RetryBudget::on_attempt_result(bool failed, TimePoint now) {
  std::lock_guard lock(mu_);
  ++(failed ? counts_.failed_attempts : counts_.ok_attempts);
  if (mode_ != BudgetMode::successes) return;
  if (now > balance_.last) balance_.last = now;
  if (failed) {
    balance_.micro = std::max<int64_t>(0, balance_.micro - kMicro);
  } else {
    balance_.micro = std::min(full_micro_, balance_.micro + ratio_micro_);
  }
}

int64_t RetryBudget::second_of(TimePoint t) const {
  if (t <= origin_) return 0;
  return std::chrono::duration_cast<std::chrono::seconds>(t - origin_).count();
}

int64_t RetryBudget::cap_micro(int64_t second) const {
  // The count is bounded by calls made, far below 2^63 / 1e15.
  return floor_micro_ * kWindowSeconds + ratio_micro_ * window_.count(second);
}

RetryBudget::Balance RetryBudget::refilled(TimePoint now) const {
  if (now <= balance_.last) return balance_;  // out-of-order time: nothing to add
  return refilled(now, cap_micro(second_of(now)));
}

RetryBudget::Balance RetryBudget::refilled(TimePoint now, int64_t cap) const {
  Balance b = balance_;
  if (now <= b.last) return b;
  if (b.micro >= cap) {
    // Full already (a busy, healthy upstream keeps it there): any refill is
    // lost to the cap, so the division below would change nothing.
    b.last = now;
    b.micro = cap;
    b.carry = 0;
    return b;
  }
  const int64_t elapsed_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - b.last).count();
  b.last = now;
  // floor_micro_ <= 1e15 and elapsed can be long: 128-bit product, exact.
  const __int128 scaled = static_cast<__int128>(floor_micro_) * elapsed_ns + b.carry;
  const __int128 add = scaled / kNanosPerSecond;
  if (add >= cap - b.micro) {
    b.micro = std::max(b.micro, cap);  // full (a shrunken cap is applied below)
    b.carry = 0;
  } else {
    b.micro += static_cast<int64_t>(add);
    b.carry = static_cast<int64_t>(scaled % kNanosPerSecond);
  }
  b.micro = std::min(b.micro, cap);
  return b;
}

void RetryBudget::on_request(TimePoint now) {
  std::lock_guard lock(mu_);
  ++counts_.first_attempts;
  if (mode_ == BudgetMode::successes) return;  // paid by attempt outcomes instead
  if (held_) {                                 // fed by the fleet's loads instead
    if (now > balance_.last) balance_.last = now;
    return;
  }
  // The cap is read once: the refill to `now` needs it at the second of
  // the latest time seen, and this request's deposit raises it by exactly
  // one ratio (the window's count at `sec` grows by one).
  const int64_t sec = second_of(std::max(now, balance_.last));
  int64_t cap = cap_micro(sec);
  balance_ = refilled(now, cap);
  window_.add(sec);
  cap += ratio_micro_;
  balance_.micro = std::min(balance_.micro + ratio_micro_, cap);
}

bool RetryBudget::try_spend(TimePoint now) {
  std::lock_guard lock(mu_);
  // Strictly above half: a bucket of 10 allows retries at 5.000001, not at 5.
  if (mode_ == BudgetMode::successes) {
    if (balance_.micro * 2 <= full_micro_) return false;
    ++counts_.retries;
    return true;
  }
  if (!held_) balance_ = refilled(now);
  else if (now > balance_.last) balance_.last = now;
  if (balance_.micro < kMicro) return false;
  balance_.micro -= kMicro;
  ++counts_.retries;
  return true;
}

double RetryBudget::tokens(TimePoint now) const {
  std::lock_guard lock(mu_);
  if (mode_ == BudgetMode::successes || held_) return static_cast<double>(balance_.micro) / kMicro;
  return static_cast<double>(refilled(now).micro) / kMicro;
}

void RetryBudget::reconfigure(RetryBudgetConfig cfg) {
  std::lock_guard lock(mu_);
  const BudgetMode before = mode_;
  const BudgetScope scope_before = scope_;
  set_config(cfg);
  if (scope_ != scope_before) {
    // Into fleet: empty until the first sync. Back to local: the local
    // bucket's initial balance.
    held_ = scope_ == BudgetScope::fleet;
    floor_scale_ = 1.0;
    set_config(cfg);
    balance_.carry = 0;
    balance_.micro = held_ ? 0 : (mode_ == BudgetMode::successes ? full_micro_ : floor_micro_);
    return;
  }
  if (held_) {
    if (mode_ == BudgetMode::successes) balance_.micro = std::min(balance_.micro, full_micro_);
    return;  // the next sync loads the new config's share
  }
  if (mode_ == BudgetMode::successes) {
    // A new successes bucket starts full; an existing one keeps its level.
    balance_.micro = before == BudgetMode::successes ? std::min(balance_.micro, full_micro_) : full_micro_;
    return;
  }
  if (before == BudgetMode::successes) {
    balance_.micro = floor_micro_;  // the requests-mode initial balance
    balance_.carry = 0;
  }
  balance_.micro = std::min(balance_.micro, cap_micro(second_of(balance_.last)));
}

}  // namespace onelayer
