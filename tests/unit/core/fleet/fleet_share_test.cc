#include <doctest/doctest.h>

#include <map>
#include <vector>

#include "core/fleet/fleet_share.h"
#include "core/retry/retry_budget.h"

using namespace onelayer;
using namespace onelayer::fleet;
using namespace std::chrono_literals;

namespace {

const TimePoint kT0 = TimePoint{} + 1000s;

RetryBudgetConfig fleet_cfg(double ratio, double floor, BudgetMode mode = BudgetMode::requests) {
  RetryBudgetConfig c;
  c.ratio = ratio;
  c.min_per_second = floor;
  c.mode = mode;
  c.scope = BudgetScope::fleet;
  c.service = "inventory";
  return c;
}

FleetSnapshot snap(int64_t members, int64_t first, int64_t retries = 0, int64_t other = 0) {
  FleetSnapshot s;
  s.members = members;
  s.window.first_attempts = first;
  s.window.retries = retries;
  s.window.other_layer = other;
  return s;
}

int spend_all(RetryBudget& b, TimePoint now) {
  int n = 0;
  while (b.try_spend(now) && n < 1'000'000) ++n;
  return n;
}

}  // namespace

TEST_CASE("FleetShareIsProportionalToFirstAttemptsAndAtMostTwoIntervals") {
  // allowance 0.1 * 300 + 10 * 10 = 130; this instance sent a third.
  FleetShare s = compute_share(fleet_cfg(0.1, 10), snap(3, 300), 100, 1000ms);
  CHECK(s.fraction == doctest::Approx(1.0 / 3));
  CHECK(s.allowance == doctest::Approx(130));
  CHECK(s.left == doctest::Approx(130));
  // each sync adds a third of one second's 13; the bucket holds at most
  // twice that (a third of the 130 left would be 43.3).
  CHECK(s.grant_micro == 4'333'333);
  CHECK(s.cap_micro == 8'666'666);
}

TEST_CASE("FleetShareSubtractsRetriesOfThisFleetAndOfOtherLayers") {
  FleetShare s = compute_share(fleet_cfg(0.1, 10), snap(3, 300, 100, 25), 100, 1000ms);
  CHECK(s.left == doctest::Approx(5));
  CHECK(s.cap_micro == 1'666'666);  // a third of the 5 left
  CHECK(s.grant_micro == 4'333'333);
  CHECK(compute_share(fleet_cfg(0.1, 10), snap(3, 300, 125, 5), 100, 1000ms).cap_micro == 0);
  CHECK(compute_share(fleet_cfg(0.1, 10), snap(3, 300, 500, 500), 100, 1000ms).left == 0);
}

TEST_CASE("FleetShareWithoutFirstAttemptsSplitsTheFloorByMembers") {
  FleetShare s = compute_share(fleet_cfg(0.1, 10), snap(4, 0), 0, 1000ms);
  CHECK(s.fraction == 0.25);
  CHECK(s.grant_micro == 2'500'000);  // a quarter of one second's 10
  CHECK(s.cap_micro == 5'000'000);    // twice that
  // An instance that sent nothing while others did gets nothing.
  CHECK(compute_share(fleet_cfg(0.1, 10), snap(4, 100), 0, 1000ms).cap_micro == 0);
  // A share below one token per sync may still add up to one.
  s = compute_share(fleet_cfg(0.1, 2), snap(30, 1500), 50, 500ms);
  CHECK(s.grant_micro == 283'333);  // a thirtieth of 170 tokens over 10 s, for 0.5 s
  CHECK(s.cap_micro == 1'000'000);
}

TEST_CASE("FleetShareNeverBelowOwnCountsAndSurvivesHostileNumbers") {
  // Redis says fewer first attempts than this instance made: it is all of them.
  CHECK(compute_share(fleet_cfg(0.1, 10), snap(1, 10), 50, 1000ms).fraction == 1.0);
  FleetShare s = compute_share(fleet_cfg(0.1, 10), snap(-5, -100, -7, INT64_MAX), 10, 1000ms);
  CHECK(s.fraction == 1.0);
  CHECK(s.cap_micro == 0);
  s = compute_share(fleet_cfg(0.1, 10), snap(INT64_MAX, INT64_MAX), 10, 1000ms);
  CHECK(s.cap_micro >= 0);
  CHECK(s.grant_micro >= 0);
}

TEST_CASE("FleetSuccessesModeLevelIsFleetWide") {
  FleetSnapshot sn = snap(5, 0);
  sn.window.failed_attempts = 60;
  sn.window.other_layer = 10;
  sn.window.ok_attempts = 100;
  FleetShare s = compute_share(fleet_cfg(0.1, 10, BudgetMode::successes), sn, 0, 1000ms);
  CHECK(s.allowance == 100);
  CHECK(s.left == doctest::Approx(40));  // 100 - 60 - 10 + 0.1 * 100
  CHECK(s.cap_micro == 40'000'000);
  sn.window.failed_attempts = 1000;
  CHECK(compute_share(fleet_cfg(0.1, 10, BudgetMode::successes), sn, 0, 1000ms).cap_micro == 0);
  sn.window.failed_attempts = 0;
  sn.window.ok_attempts = 100000;
  CHECK(compute_share(fleet_cfg(0.1, 10, BudgetMode::successes), sn, 0, 1000ms).cap_micro == 100'000'000);
}

TEST_CASE("FleetServiceGoesLocalExactlyStaleAfterTheLastAnswer") {
  FleetService f(3000ms, kT0);
  CHECK(f.state() == FleetService::State::pending);
  f.add_own({100, 0, 0, 0, 0}, kT0 + 500ms);
  f.on_synced(fleet_cfg(0.1, 10), snap(4, 400), 1000ms, kT0 + 1000ms);
  CHECK(f.state() == FleetService::State::synced);
  CHECK(f.last_share().fraction == 0.25);
  CHECK_FALSE(f.check_stale(kT0 + 3999ms));
  CHECK(f.check_stale(kT0 + 4000ms));
  CHECK(f.state() == FleetService::State::local);
  CHECK_FALSE(f.check_stale(kT0 + 4001ms));  // one warning, not one per tick
  CHECK(f.safe_floor_scale() == 0.25);
  f.on_synced(fleet_cfg(0.1, 10), snap(4, 400), 1000ms, kT0 + 5000ms);  // rejoin
  CHECK(f.state() == FleetService::State::synced);
  CHECK_FALSE(f.check_stale(kT0 + 7999ms));
  CHECK(f.check_stale(kT0 + 8000ms));
}

TEST_CASE("FleetServiceAfterAnEmptiedWindowKeepsHalfTheFleetItKnew") {
  FleetService f(3000ms, kT0);
  f.add_own({10, 0, 0, 0, 0}, kT0);
  f.on_synced(fleet_cfg(0.1, 10), snap(100, 1000), 1000ms, kT0 + 10ms);
  CHECK(f.last_share().fraction == doctest::Approx(0.01));
  // Redis restarted empty: only this instance's 10 are there.
  f.on_synced(fleet_cfg(0.1, 10), snap(1, 10), 1000ms, kT0 + 1010ms);
  CHECK(f.last_share().fraction == doctest::Approx(0.02));  // 10 of at least 500, not all
  CHECK(f.last_snapshot().members == 1);                    // shown as answered
  f.on_synced(fleet_cfg(0.1, 10), snap(1, 10), 1000ms, kT0 + 2010ms);
  CHECK(f.last_share().fraction == 1.0);  // still alone a sync later: it is
}

TEST_CASE("FleetServiceSafeFloorIsNeverMoreThanTheLastShare") {
  FleetService f(3000ms, kT0);
  f.add_own({10, 0, 0, 0, 0}, kT0);
  f.on_synced(fleet_cfg(0.1, 10), snap(2, 100), 1000ms, kT0 + 10ms);
  CHECK(f.safe_floor_scale() == doctest::Approx(0.1));  // share 10% below one of two
}

TEST_CASE("FleetServiceNeverSyncedGoesLocalWithTheWholeFloor") {
  FleetService f(3000ms, kT0);
  CHECK_FALSE(f.check_stale(kT0 + 2999ms));
  CHECK(f.check_stale(kT0 + 3000ms));
  CHECK(f.safe_floor_scale() == 1.0);
}

TEST_CASE("FleetServiceOwnWindowForgetsAfterTenSeconds") {
  FleetService f(3000ms, kT0);
  f.add_own({100, 0, 0, 0, 0}, kT0 + 500ms);
  f.add_own({7, 0, 0, 0, 0}, kT0 + 9999ms);
  CHECK(f.own_first_attempts(kT0 + 9999ms) == 107);
  CHECK(f.own_first_attempts(kT0 + 10000ms) == 7);
  CHECK(f.own_first_attempts(kT0 + 19999ms) == 0);
}

TEST_CASE("FleetKeysShareOneHashTagPerService") {
  CHECK(members_key("onelayer", "inventory") == "onelayer:{inventory}:m");
  CHECK(counts_key_base("onelayer", "inventory") == "onelayer:{inventory}:c:");
  CHECK(valid_service_name("inventory-v2.eu_1"));
  CHECK_FALSE(valid_service_name("a}b"));
  CHECK_FALSE(valid_service_name(""));
  CHECK_FALSE(valid_service_name(std::string(65, 'a')));
}

TEST_CASE("BudgetFleetScopeIsEmptyUntilLoadedAndNeverRefills") {
  RetryBudget b(fleet_cfg(0.5, 10), kT0);
  CHECK(b.fleet_held());
  for (int i = 0; i < 10; ++i) b.on_request(kT0);
  CHECK(spend_all(b, kT0 + 5s) == 0);
  b.load_fleet_share(1'500'000, 2'500'000);
  CHECK(b.tokens(kT0 + 5s) == 1.5);
  b.load_fleet_share(1'500'000, 2'500'000);  // 3 tokens, held at 2.5
  CHECK(b.tokens(kT0 + 5s) == 2.5);
  CHECK(spend_all(b, kT0 + 9s) == 2);
  b.on_attempt_result(true, kT0 + 9s);
  b.on_attempt_result(false, kT0 + 9s);
  FleetCounts c = b.take_counts();
  CHECK(c == FleetCounts{10, 2, 1, 1, 0});
  CHECK(b.take_counts().empty());
}

TEST_CASE("BudgetFleetSafeModeRefillsAtTheScaledFloor") {
  RetryBudget b(fleet_cfg(0, 10), kT0);
  b.load_fleet_share(2'500'000, 2'500'000);
  CHECK(spend_all(b, kT0) == 2);
  b.enter_fleet_safe_mode(0.25, kT0);  // 2.5 tokens per second from the last 0.5
  CHECK_FALSE(b.fleet_held());
  CHECK_FALSE(b.try_spend(kT0 + 199ms));
  CHECK(b.try_spend(kT0 + 200ms));
  CHECK_FALSE(b.try_spend(kT0 + 599ms));
  CHECK(b.try_spend(kT0 + 600ms));
  b.load_fleet_share(0, 10'000'000);  // rejoined: the fleet's grants only
  CHECK(spend_all(b, kT0 + 10s) == 0);
}

TEST_CASE("BudgetFleetSafeModeRefillsNothingForTheTimeItWasHeld") {
  RetryBudget b(fleet_cfg(0, 10), kT0);
  b.load_fleet_share(0, 0);
  CHECK_FALSE(b.try_spend(kT0 + 60s));  // a minute held, requests failing...
  b.enter_fleet_safe_mode(1.0, kT0 + 60s);  // ...then safe mode: no minute of refill
  CHECK(b.tokens(kT0 + 60s) == 0.0);
  CHECK(b.tokens(kT0 + 60s + 100ms) == 1.0);
  b.enter_fleet_safe_mode(0.5, kT0 + 60s + 100ms);  // already local: unchanged
  CHECK(b.tokens(kT0 + 60s + 200ms) == 2.0);
}

TEST_CASE("BudgetFleetSafeModeRefillsNothingForAQuietTimeHeld") {
  RetryBudget b(fleet_cfg(0, 10), kT0);
  b.load_fleet_share(0, 0);
  // A minute held without a single request, then safe mode: the bucket
  // starts empty, not full from a minute of refill.
  b.enter_fleet_safe_mode(0.5, kT0 + 60s);
  CHECK(b.tokens(kT0 + 60s) == 0.0);
  CHECK_FALSE(b.try_spend(kT0 + 60s + 199ms));
  CHECK(b.try_spend(kT0 + 60s + 200ms));
  CHECK_FALSE(b.try_spend(kT0 + 60s + 200ms));
}

TEST_CASE("BudgetLocalScopeIgnoresFleetCalls") {
  RetryBudget b({0.2, 10}, kT0);
  CHECK_FALSE(b.fleet_held());
  b.load_fleet_share(0, 0);
  b.enter_fleet_safe_mode(0, kT0);
  CHECK(spend_all(b, kT0) == 10);
}

TEST_CASE("BudgetReloadBetweenScopes") {
  RetryBudget b({0.2, 10}, kT0);
  b.reconfigure(fleet_cfg(0.2, 10));
  CHECK(b.fleet_held());
  CHECK(spend_all(b, kT0) == 0);
  b.load_fleet_share(3'000'000, 3'000'000);
  b.reconfigure(fleet_cfg(0.3, 10));  // same scope: the share stays until the next sync
  CHECK(b.tokens(kT0) == 3.0);
  RetryBudgetConfig local = fleet_cfg(0.2, 10);
  local.scope = BudgetScope::local;
  b.reconfigure(local);
  CHECK(spend_all(b, kT0) == 10);
}

// The promise with the real core on a simulated fleet: 30 instances, each
// sending 10 requests/s to a service that fails them all and retrying each
// once if its budget allows; a perfect Redis sums per second; syncs every
// second at staggered phases. Over every 10 s the fleet's retries stay within
// ratio * first + floor * 10 plus one interval of loads, where 30 local
// budgets would allow 30 floors.
TEST_CASE("FleetSimulationKeepsThePromiseAcrossThirtyInstances") {
  const int n = 30;
  const RetryBudgetConfig cfg = fleet_cfg(0.1, 10);
  std::vector<std::unique_ptr<RetryBudget>> budgets;
  std::vector<FleetService> services;
  for (int i = 0; i < n; ++i) {
    budgets.push_back(std::make_unique<RetryBudget>(cfg, kT0));
    services.emplace_back(3000ms, kT0);
  }
  std::map<int64_t, FleetCounts> redis;  // by second
  std::map<int64_t, int64_t> retries_by_second, first_by_second;
  for (int64_t ms = 0; ms < 60'000; ++ms) {
    const TimePoint now = kT0 + Millis(ms);
    const int64_t sec = ms / 1000;
    for (int i = 0; i < n; ++i) {
      if (ms % 100 == (i * 3) % 100) {  // 10 requests/s each
        budgets[i]->on_request(now);
        ++first_by_second[sec];
        if (budgets[i]->try_spend(now)) ++retries_by_second[sec];
      }
      if (ms % 1000 == (i * 33) % 1000) {  // sync
        FleetCounts c = budgets[i]->take_counts();
        redis[sec] += c;
        services[i].add_own(c, now);
        FleetSnapshot s;
        s.members = n;
        for (int64_t k = sec - 9; k <= sec; ++k)
          if (redis.count(k)) s.window += redis[k];
        const FleetShare share = services[i].on_synced(cfg, s, 1000ms, now);
        budgets[i]->load_fleet_share(share.grant_micro, share.cap_micro);
      }
    }
  }
  int64_t worst = 0, spent_total = 0;
  for (int64_t start = 0; start + 10 <= 60; ++start) {
    int64_t r = 0, f = 0;
    for (int64_t k = start; k < start + 10; ++k) {
      r += retries_by_second[k];
      f += first_by_second[k];
    }
    const double promise = cfg.ratio * static_cast<double>(f) + cfg.min_per_second * 10;
    const double slack = 2 * promise / 10;  // one interval's loads, at most twice a share each
    CHECK(static_cast<double>(r) <= promise + slack);
    worst = std::max(worst, r);
  }
  for (auto& [s, r] : retries_by_second) spent_total += r;
  CHECK(worst >= 300);         // the fleet does retry: about the 400 allowed
  CHECK(spent_total < 60 * 60);  // 30 local floors alone would allow 30 * 10 * 60
}
