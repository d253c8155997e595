// The fleet budget past one machine: the real core code (RetryBudget,
// FleetService, compute_share) for many simulated instances on a virtual
// clock, against a simulated Redis that sums per second, with sync delays
// and an outage. Every instance sends `rate` requests per second to a
// service that fails them all, and retries each once if its budget allows.
// Each instance sees the others' counts as of their last sync (staleness
// grows with the interval). Prints, per sync interval, the worst 10 s window's retries against the
// promise (ratio x first attempts + min_per_second x 10), outside and
// during the outage (docs/fleet.md).
//
//   build/tests/bench/fleet_sim [instances=10000] [rate=1] [seconds=120]
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include "core/fleet/fleet_share.h"
#include "core/retry/retry_budget.h"

using namespace onelayer;
using namespace onelayer::fleet;
using namespace std::chrono_literals;

namespace {

struct Result {
  double worst_ratio = 0;         // worst window's retries / promise, Redis up
  double worst_outage_ratio = 0;  // the same for windows touching the outage
};

Result simulate(int n, int rate, int seconds, Millis interval, int outage_from, int outage_to) {
  RetryBudgetConfig cfg;
  cfg.ratio = 0.1;
  cfg.min_per_second = 10;
  cfg.scope = BudgetScope::fleet;
  cfg.service = "svc";
  const TimePoint t0 = TimePoint{} + 1000s;
  const Millis stale_after = interval * 3;
  std::vector<std::unique_ptr<RetryBudget>> budgets;
  std::vector<FleetService> services;
  for (int i = 0; i < n; ++i) {
    budgets.push_back(std::make_unique<RetryBudget>(cfg, t0));
    services.emplace_back(stale_after, t0);
  }
  std::map<int64_t, FleetCounts> redis;
  std::vector<int64_t> first(static_cast<size_t>(seconds), 0), retries(static_cast<size_t>(seconds), 0);
  const int64_t step = 10;  // ms
  const int64_t per_second_slots = 1000 / step;
  const int64_t interval_slots = interval.count() / step;
  for (int64_t ms = 0; ms < int64_t{seconds} * 1000; ms += step) {
    const TimePoint now = t0 + Millis(ms);
    const int64_t sec = ms / 1000, slot = ms / step;
    const bool redis_up = sec < outage_from || sec >= outage_to;
    for (int i = 0; i < n; ++i) {
      // `rate` requests per second, spread over the second by instance.
      for (int k = 0; k < rate; ++k) {
        if ((slot + i + k * per_second_slots / rate) % per_second_slots != 0) continue;
        budgets[i]->on_request(now);
        ++first[static_cast<size_t>(sec)];
        if (budgets[i]->try_spend(now)) ++retries[static_cast<size_t>(sec)];
      }
      if ((slot + i) % interval_slots == 0) {
        services[i].check_stale(now);
        if (redis_up) {
          FleetCounts c = budgets[i]->take_counts();
          redis[sec] += c;
          services[i].add_own(c, now);
          FleetSnapshot s;
          s.members = n;
          for (int64_t q = sec - 9; q <= sec; ++q) {
            auto it = redis.find(q);
            if (it != redis.end()) s.window += it->second;
          }
          const FleetShare share = services[i].on_synced(cfg, s, interval, now);
          budgets[i]->load_fleet_share(share.grant_micro, share.cap_micro);
        } else if (services[i].state() == FleetService::State::local && budgets[i]->fleet_held()) {
          budgets[i]->enter_fleet_safe_mode(services[i].safe_floor_scale(), now);
        }
      }
    }
  }
  Result r;
  for (int s = 10; s + 10 <= seconds; ++s) {  // after a warm-up window
    int64_t f = 0, x = 0;
    for (int k = s; k < s + 10; ++k) {
      f += first[static_cast<size_t>(k)];
      x += retries[static_cast<size_t>(k)];
    }
    const double promise = cfg.ratio * static_cast<double>(f) + cfg.min_per_second * 10;
    const double ratio = static_cast<double>(x) / promise;
    const bool touches_outage = s + 10 > outage_from && s < outage_to + 10;
    double& worst = touches_outage ? r.worst_outage_ratio : r.worst_ratio;
    if (ratio > worst) worst = ratio;
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 10000;
  const int rate = argc > 2 ? std::atoi(argv[2]) : 1;
  const int seconds = argc > 3 ? std::atoi(argv[3]) : 120;
  const int outage_from = seconds / 2, outage_to = seconds / 2 + 20;
  std::printf("%d instances, %d request/s each (all failing), ratio 0.1, min_per_second 10; Redis down from %d s to %d s\n",
              n, rate, outage_from, outage_to);
  std::printf("| sync_interval | worst 10 s window / promise, Redis up | during the outage (safe mode) |\n");
  std::printf("|---|---|---|\n");
  for (Millis interval : {500ms, 1000ms, 2000ms, 5000ms}) {
    Result r = simulate(n, rate, seconds, interval, outage_from, outage_to);
    std::printf("| %lld ms | %.3f | %.3f |\n", static_cast<long long>(interval.count()), r.worst_ratio,
                r.worst_outage_ratio);
    std::fflush(stdout);
  }
  return 0;
}
