// Fleet-wide retry budget: what one instance may spend, from what the whole
// fleet reported to Redis (docs/fleet.md).
//
// Every sync_interval the shell sends this instance's counts for each
// service and reads back the fleet's sums over the last 10 s (a
// FleetSnapshot). This file turns a snapshot into the tokens this instance
// loads into its local bucket until the next sync, and decides when the
// instance stops trusting old snapshots (safe mode). Pure: time is an input.
//
// The promise, within one sync interval of staleness: over any 10 s,
//   retries (this fleet) + retries (other layers)
//     <= ratio * fleet first attempts + min_per_second * 10.
// requests mode: the fleet's allowance left over the window is
//   left = ratio * first + min_per_second * 10 - retries - other
// and fraction is this instance's share of the fleet's first attempts over
// the window. Each sync adds this instance's share of one interval's
// allowance to its local bucket (grant), which holds at most its share of
// what is left in the window, and at most twice one grant (at least one
// token), so tokens below one carry over from sync to sync while no
// instance banks a burst.
// successes mode: the fleet bucket's level is
//   min_per_second * 10 - failed - other + ratio * ok    (within [0, full])
// and a retry is allowed while it is above half full.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/base/clock.h"
#include "core/config/config.h"
#include "core/config/service_name.h"

namespace onelayer::fleet {

inline constexpr int kWindowSeconds = 10;

// One instance's counts for one service since its last sync, or the fleet's
// sums over the window.
struct FleetCounts {
  int64_t first_attempts = 0;
  int64_t retries = 0;          // retries and hedges this fleet sent
  int64_t failed_attempts = 0;  // attempts whose answer was a failure
  int64_t ok_attempts = 0;      // the other attempts
  int64_t other_layer = 0;      // arrivals some other layer had already retried
  FleetCounts& operator+=(const FleetCounts& o);
  bool empty() const;
  bool operator==(const FleetCounts&) const = default;
};

struct FleetSnapshot {
  int64_t members = 0;  // instances that synced this service recently
  FleetCounts window;   // the fleet's sums over the last kWindowSeconds
};

struct FleetShare {
  double fraction = 0;        // this instance's share of the fleet's first attempts, [0, 1]
  double allowance = 0;       // requests: ratio * first + floor * 10; successes: the bucket's size
  double left = 0;            // requests: allowance - retries - other (>= 0); successes: the bucket's level
  int64_t grant_micro = 0;    // tokens (x 1e6) added to the local bucket at this sync
  int64_t cap_micro = 0;      // the most the local bucket may then hold (successes: its level)
};

// `mine` is this instance's first attempts to the service over the window;
// `interval` the sync interval.
FleetShare compute_share(const RetryBudgetConfig& cfg, const FleetSnapshot& snap, int64_t mine, Millis interval);

// One service's fleet state in one instance: the last share, whether it is
// fresh, and this instance's own first attempts per second (for its share).
class FleetService {
 public:
  enum class State { pending, synced, local };

  FleetService(Millis stale_after, TimePoint now);

  // This instance's counts of one sync (added to its own window at `now`).
  void add_own(const FleetCounts& c, TimePoint now);
  int64_t own_first_attempts(TimePoint now) const;

  // A sync answered: the share to load. The state becomes synced.
  FleetShare on_synced(const RetryBudgetConfig& cfg, const FleetSnapshot& snap, Millis interval, TimePoint now);
  // True exactly once when no sync answered for stale_after (from the last
  // answer, or from the start): the instance goes local (safe mode).
  bool check_stale(TimePoint now);
  // Safe mode's floor is min_per_second times this: one over the last known
  // fleet size, never more than the last share (1 when nothing is known).
  double safe_floor_scale() const;

  State state() const { return state_; }
  const FleetSnapshot& last_snapshot() const { return last_; }
  const FleetShare& last_share() const { return share_; }
  TimePoint last_sync() const { return last_ok_; }
  bool ever_synced() const { return ever_synced_; }
  void set_stale_after(Millis m) { stale_after_ = m; }

 private:
  int64_t second_of(TimePoint t) const;

  Millis stale_after_;
  TimePoint origin_;
  TimePoint last_ok_;
  bool ever_synced_ = false;
  State state_ = State::pending;
  FleetSnapshot last_;
  FleetShare share_;
  struct Bucket {
    int64_t second = -1;
    int64_t first = 0;
  };
  std::array<Bucket, kWindowSeconds> own_{};
};

// Redis keys: every key of a service carries `{service}` so one service
// lives in one Redis Cluster slot. `prefix:{service}:m` is the membership
// sorted set, `prefix:{service}:c:` + unix second the per-second counts.
std::string members_key(const std::string& prefix, const std::string& service);
std::string counts_key_base(const std::string& prefix, const std::string& service);

}  // namespace onelayer::fleet
