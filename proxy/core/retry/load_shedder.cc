#include "core/retry/load_shedder.h"
#include "core/base/random.h"

#include <algorithm>
#include <cmath>

namespace onelayer {

LoadShedder::LoadShedder(uint32_t max_concurrent, TimePoint now) : limit_(max_concurrent), origin_(now) {}

void LoadShedder::Permit::reset() {
  if (!s_) return;
  s_->in_flight_.fetch_sub(1, std::memory_order_relaxed);
  s_->completions_.fetch_add(1, std::memory_order_relaxed);
  s_.reset();
}

int64_t LoadShedder::second_of(TimePoint t) const {
  if (t <= origin_) return 0;
  return std::chrono::duration_cast<std::chrono::seconds>(t - origin_).count();
}

// Records the completion count at the start of each second (at most one
// locked update per second; the first caller in a second does it).
void LoadShedder::sample(TimePoint now) {
  const int64_t sec = second_of(now);
  int64_t last = last_sampled_.load(std::memory_order_relaxed);
  if (sec <= last || !last_sampled_.compare_exchange_strong(last, sec, std::memory_order_relaxed)) return;
  std::lock_guard lock(mu_);
  Sample& s = samples_[static_cast<size_t>(sec % static_cast<int64_t>(samples_.size()))];
  s.second = sec;
  s.completions = completions_.load(std::memory_order_relaxed);
}

LoadShedder::Permit LoadShedder::try_acquire(const std::shared_ptr<LoadShedder>& s, TimePoint now) {
  s->sample(now);
  const uint64_t limit = s->limit_.load(std::memory_order_relaxed);
  const uint64_t n = s->in_flight_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (limit != 0 && n > limit) {
    s->in_flight_.fetch_sub(1, std::memory_order_relaxed);
    s->shed_.fetch_add(1, std::memory_order_relaxed);
    return Permit();
  }
  return Permit(s);
}

double LoadShedder::completion_rate(TimePoint now) { return window(now).per_second; }

LoadShedder::Window LoadShedder::window(TimePoint now) {
  sample(now);
  const int64_t sec = second_of(now);
  const uint64_t total = completions_.load(std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  // The oldest sample inside the window, at least one second old.
  const Sample* oldest = nullptr;
  for (const Sample& s : samples_) {
    if (s.second < 0 || s.second >= sec || s.second < sec - kWindowSeconds) continue;
    if (!oldest || s.second < oldest->second) oldest = &s;
  }
  if (!oldest) return {};
  const int64_t covered = sec - oldest->second;
  return {static_cast<double>(total - oldest->completions) / static_cast<double>(covered), covered};
}

int64_t LoadShedder::retry_after_seconds(TimePoint now, Random& rng) {
  const Window w = window(now);
  const double queued = static_cast<double>(std::max<uint64_t>(1, in_flight()));
  double base = 1;  // no rate known yet
  if (w.per_second > 0) {
    base = queued / w.per_second;
  } else if (w.per_second == 0) {
    // Nothing finished for the `covered` seconds seen: at least as long again.
    base = static_cast<double>(w.covered);
  }
  base = std::clamp(base, 1.0, static_cast<double>(kMaxRetryAfterSeconds));
  const double jittered = std::ceil(base * (1.0 + rng.uniform()));
  return std::clamp<int64_t>(static_cast<int64_t>(jittered), 1, kMaxRetryAfterSeconds);
}

}  // namespace onelayer
