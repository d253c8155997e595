#include "core/fleet/fleet_share.h"

#include <algorithm>
#include <cmath>

namespace onelayer::fleet {
namespace {

constexpr double kMicro = 1e6;
// Beyond this a count is nonsense from a hostile or broken server; clamping
// keeps every product finite and exact enough in a double.
constexpr int64_t kMaxCount = int64_t{1} << 50;

int64_t clamp_count(int64_t v) { return std::clamp<int64_t>(v, 0, kMaxCount); }

int64_t to_micro(double tokens) {
  if (!(tokens > 0)) return 0;  // also NaN
  return static_cast<int64_t>(std::floor(std::min(tokens, 1e12) * kMicro));
}

}  // namespace

FleetCounts& FleetCounts::operator+=(const FleetCounts& o) {
  first_attempts += o.first_attempts;
  retries += o.retries;
  failed_attempts += o.failed_attempts;
  ok_attempts += o.ok_attempts;
  other_layer += o.other_layer;
  return *this;
}

bool FleetCounts::empty() const { return *this == FleetCounts{}; }

FleetShare compute_share(const RetryBudgetConfig& cfg, const FleetSnapshot& snap, int64_t mine, Millis interval) {
  FleetShare s;
  const FleetCounts& w = snap.window;
  mine = clamp_count(mine);
  // The fleet's sum includes this instance; seconds counted by Redis's clock
  // and by this one's may differ at the edges, so never below `mine`.
  const int64_t first = std::max(clamp_count(w.first_attempts), mine);
  const int64_t members = std::max<int64_t>(1, clamp_count(snap.members));
  s.fraction = first > 0 ? static_cast<double>(mine) / static_cast<double>(first) : 1.0 / static_cast<double>(members);
  const double floor_tokens = std::max(0.0, cfg.min_per_second) * kWindowSeconds;
  if (cfg.mode == BudgetMode::successes) {
    const double level = floor_tokens - static_cast<double>(clamp_count(w.failed_attempts)) -
                         static_cast<double>(clamp_count(w.other_layer)) +
                         cfg.ratio * static_cast<double>(clamp_count(w.ok_attempts));
    s.allowance = floor_tokens;
    s.left = std::clamp(level, 0.0, floor_tokens);
    s.grant_micro = s.cap_micro = to_micro(s.left);
    return s;
  }
  s.allowance = cfg.ratio * static_cast<double>(first) + floor_tokens;
  const double spent = static_cast<double>(clamp_count(w.retries)) + static_cast<double>(clamp_count(w.other_layer));
  s.left = std::max(0.0, s.allowance - spent);
  const double grant =
      s.fraction * s.allowance * static_cast<double>(std::max<int64_t>(0, interval.count())) / (kWindowSeconds * 1000.0);
  s.grant_micro = to_micro(grant);
  s.cap_micro = to_micro(std::min(s.fraction * s.left, std::max(2 * grant, 1.0)));
  return s;
}

FleetService::FleetService(Millis stale_after, TimePoint now) : stale_after_(stale_after), origin_(now), last_ok_(now) {}

int64_t FleetService::second_of(TimePoint t) const {
  if (t <= origin_) return 0;
  return std::chrono::duration_cast<std::chrono::seconds>(t - origin_).count();
}

void FleetService::add_own(const FleetCounts& c, TimePoint now) {
  const int64_t sec = second_of(now);
  Bucket& b = own_[static_cast<size_t>(sec % kWindowSeconds)];
  if (b.second != sec) b = Bucket{sec, 0};
  b.first += clamp_count(c.first_attempts);
}

int64_t FleetService::own_first_attempts(TimePoint now) const {
  const int64_t sec = second_of(now);
  int64_t n = 0;
  for (const Bucket& b : own_)
    if (b.second > sec - kWindowSeconds && b.second <= sec) n += b.first;
  return n;
}

FleetShare FleetService::on_synced(const RetryBudgetConfig& cfg, const FleetSnapshot& snap, Millis interval,
                                   TimePoint now) {
  // Right after Redis comes back (or restarts empty), its window holds only
  // what the instances that synced first have added: each of them would
  // see itself as most of the fleet and take most of the allowance. The
  // fleet did not shrink meanwhile, so its size and first attempts are taken
  // as at least half the previous answer's; a real drop is followed within
  // a sync or two, spending less meanwhile.
  FleetSnapshot seen = snap;
  if (ever_synced_) {
    seen.window.first_attempts = std::max(seen.window.first_attempts, last_.window.first_attempts / 2);
    seen.members = std::max(seen.members, last_.members / 2);
  }
  last_ = snap;
  share_ = compute_share(cfg, seen, own_first_attempts(now), interval);
  last_ok_ = now;
  ever_synced_ = true;
  state_ = State::synced;
  return share_;
}

bool FleetService::check_stale(TimePoint now) {
  if (state_ == State::local) return false;
  if (now - last_ok_ < stale_after_) return false;
  state_ = State::local;
  return true;
}

double FleetService::safe_floor_scale() const {
  if (!ever_synced_) return 1.0;
  const double one_of = 1.0 / static_cast<double>(std::max<int64_t>(1, last_.members));
  return std::min(one_of, share_.fraction);
}

std::string members_key(const std::string& prefix, const std::string& service) {
  return prefix + ":{" + service + "}:m";
}

std::string counts_key_base(const std::string& prefix, const std::string& service) {
  return prefix + ":{" + service + "}:c:";
}

}  // namespace onelayer::fleet
