// Fault injection (docs/storm.md "Fault drills"). Pure: time and randomness
// come in as arguments. Two sources of faults for an attempt:
// - the route's `fault:` block (abort with a status and/or a delay, each
//   with a percentage of attempts);
// - timed drills started at run time through the admin listener
//   (POST /fault?upstream=NAME&status=503&for=30s[&percent=P]): while one
//   runs, that share of every attempt to the upstream gets the status.
// The shell asks decide() before each attempt and carries the answer out as
// if the upstream had answered, so the retry rules apply to it unchanged.
// Thread-safe: drills are shared by every worker; decide() takes no lock
// while no drill was ever started or all have been ended.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/clock.h"
#include "core/base/random.h"
#include "core/config/config.h"

namespace onelayer {

class FaultInjector {
 public:
  static constexpr Millis kMaxDrill{24 * 3600 * 1000};  // `for` longer than a day is a mistake

  struct Decision {
    int abort_status = 0;  // 0: no abort
    Millis delay{0};       // 0: no delay (only from the route's block)
    bool from_drill = false;
  };

  struct Drill {
    std::string upstream;
    int status = 503;
    double percent = 100;
    Millis duration{0};
    TimePoint until{};  // set by start_drill
  };

  // upstream=NAME&status=NNN&for=DURATION[&percent=P]: the admin request's
  // query. Values may be percent-encoded; unknown parameters are refused.
  // nullopt with *error set when the query is not a valid drill.
  static std::optional<Drill> parse_drill_query(std::string_view query, std::string* error);

  // Starts (or replaces) the drill on drill.upstream, ending at now + duration.
  void start_drill(Drill drill, TimePoint now);
  size_t stop_all();                        // DELETE /fault: ends every drill; how many were running
  std::vector<Drill> drills(TimePoint now);  // the ones still running

  // A drill may be running (cheap: one relaxed load). With no drill and no
  // route fault block the shell skips decide() entirely.
  bool any_drill() const { return active_.load(std::memory_order_relaxed) > 0; }

  // The fault for one attempt on `upstream` through a route with `route`:
  // a running drill for the upstream first (its percent drawn from rng),
  // else the route's abort, else the route's delay. Draws from rng only for
  // a percentage strictly between 0 and 100.
  Decision decide(const FaultConfig& route, std::string_view upstream, TimePoint now, Random& rng);

 private:
  static bool chance(double percent, Random& rng);
  void drop_expired(TimePoint now);  // mu_ held

  std::mutex mu_;
  std::vector<Drill> drills_;
  std::atomic<size_t> active_{0};  // drills_.size(), readable without the lock
};

}  // namespace onelayer
