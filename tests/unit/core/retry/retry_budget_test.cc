#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/retry/retry_budget.h"

using namespace onelayer;
using namespace std::chrono_literals;

namespace {

const TimePoint kT0 = TimePoint{} + 1000s;

int spend_all(RetryBudget& b, TimePoint now) {
  int n = 0;
  while (b.try_spend(now)) ++n;
  return n;
}

}  // namespace

TEST_CASE("BudgetStartsWithOneSecondOfFloor") {
  RetryBudget b({0.2, 10}, kT0);
  CHECK(b.tokens(kT0) == 10.0);
  CHECK(spend_all(b, kT0) == 10);
  CHECK(b.tokens(kT0) == 0.0);
}

TEST_CASE("BudgetFiveRequestsAtRatioPointTwoMakeExactlyOneRetry") {
  RetryBudget b({0.2, 0}, kT0);
  CHECK_FALSE(b.try_spend(kT0));
  for (int i = 0; i < 4; ++i) b.on_request(kT0);
  CHECK_FALSE(b.try_spend(kT0));
  b.on_request(kT0);
  CHECK(b.tokens(kT0) == 1.0);
  CHECK(b.try_spend(kT0));
  CHECK_FALSE(b.try_spend(kT0));
}

TEST_CASE("BudgetRefillsContinuouslyAtMinPerSecond") {
  RetryBudget b({0, 2}, kT0);
  CHECK(spend_all(b, kT0) == 2);
  CHECK(b.tokens(kT0 + 250ms) == 0.5);
  CHECK_FALSE(b.try_spend(kT0 + 250ms));
  CHECK(b.try_spend(kT0 + 500ms));  // 1 token after half a second
  CHECK_FALSE(b.try_spend(kT0 + 500ms));
  CHECK(b.try_spend(kT0 + 1000ms));
  CHECK(spend_all(b, kT0 + 5s) == 8);  // 4 s more at 2/s
}

TEST_CASE("BudgetRefillKeepsSubMicroTokenRemainders") {
  RetryBudget stepped({0, 1}, kT0);
  RetryBudget once({0, 1}, kT0);
  CHECK(stepped.try_spend(kT0));
  CHECK(once.try_spend(kT0));
  // 333'333 ns per step earns 333.333 micro-tokens: the fractions must add up.
  for (int k = 1; k < 3000; ++k) CHECK_FALSE(stepped.try_spend(kT0 + std::chrono::nanoseconds{333'333LL * k}));
  CHECK(stepped.tokens(kT0 + 1s) == once.tokens(kT0 + 1s));
  CHECK(stepped.try_spend(kT0 + 1s));
}

TEST_CASE("BudgetFloorAloneIsCappedAtTenSeconds") {
  RetryBudget b({0.2, 10}, kT0);
  CHECK(b.tokens(kT0 + 5s) == 60.0);  // 10 initial + 5 s * 10
  CHECK(b.tokens(kT0 + 3600s) == 100.0);
  CHECK(spend_all(b, kT0 + 3600s) == 100);
}

TEST_CASE("BudgetDepositsCountTowardTheCapOnlyWithinTheWindow") {
  RetryBudget b({0.5, 0}, kT0);
  for (int i = 0; i < 100; ++i) b.on_request(kT0);
  CHECK(b.tokens(kT0) == 50.0);
  CHECK(b.tokens(kT0 + 9s) == 50.0);
  CHECK(b.tokens(kT0 + 10s) == 0.0);  // the requests left the 10 s window
  CHECK_FALSE(b.try_spend(kT0 + 10s));
}

// With ratio 1 and no floor the balance sits at its cap: one token per
// request of the last 10 s. Requests at a changing rate over many windows
// check the cap's request count (a running total) against a plain count.
TEST_CASE("BudgetCapFollowsTheWindowAcrossManyExpiries") {
  RetryBudget b({1, 0}, kT0);
  std::vector<int64_t> at_ms;  // every request, in ms since kT0
  int64_t ms = 0;
  for (int i = 0; i < 3000; ++i) {
    ms += (i / 300) % 2 == 0 ? 37 : 450 + (i % 7) * 100;  // busy and quiet stretches
    b.on_request(kT0 + std::chrono::milliseconds{ms});
    at_ms.push_back(ms);
    const int64_t second = ms / 1000;
    int64_t in_window = 0;
    for (int64_t t : at_ms)
      if (t / 1000 > second - 10) ++in_window;
    REQUIRE(b.tokens(kT0 + std::chrono::milliseconds{ms}) == static_cast<double>(in_window));
  }
}

TEST_CASE("BudgetOutOfOrderTimeRefillsNothing") {
  RetryBudget b({0, 10}, kT0);
  CHECK(spend_all(b, kT0 + 1s) == 20);
  CHECK(b.tokens(kT0 + 500ms) == 0.0);
  CHECK_FALSE(b.try_spend(kT0 + 500ms));
  CHECK(b.tokens(kT0 + 1100ms) == 1.0);
}

TEST_CASE("BudgetRefillOfAFullBucketCountsTheNextRefillFromThatMoment") {
  RetryBudget b({0, 1}, kT0);  // cap 10 tokens, 1 per second
  b.on_request(kT0 + 20s);     // full: 10 tokens, kept
  const TimePoint t = kT0 + 20s + 333'333ns;
  b.on_request(t);  // still full: the third of a millisecond is lost to the cap
  CHECK(b.try_spend(t));
  // 666'667 ns at 1 token/s from t, not from kT0 + 20s: 666 micro-tokens.
  CHECK(b.tokens(t + 666'667ns) == 9.000666);
  CHECK(b.tokens(t + 1s) == 10.0);
}

TEST_CASE("BudgetReadingTheGaugeChangesNothing") {
  RetryBudget a({0.5, 1}, kT0);
  RetryBudget b({0.5, 1}, kT0);
  for (int i = 0; i < 40; ++i) {
    a.on_request(kT0);
    b.on_request(kT0);
  }
  (void)a.tokens(kT0 + 3s);
  (void)a.tokens(kT0 + 9s);
  CHECK(a.tokens(kT0 + 12s) == b.tokens(kT0 + 12s));
}

TEST_CASE("BudgetReconfigureClampsToTheNewCap") {
  RetryBudget b({0.2, 10}, kT0);
  CHECK(b.tokens(kT0 + 20s) == 100.0);
  CHECK(b.try_spend(kT0 + 20s));  // brings the balance to time kT0+20s
  b.reconfigure({0.2, 1});
  CHECK(b.tokens(kT0 + 20s) == 10.0);
  b.reconfigure({0, 0});
  CHECK(b.tokens(kT0 + 20s) == 0.0);
  CHECK_FALSE(b.try_spend(kT0 + 21s));
}

TEST_CASE("BudgetTotalOutageStaysWithinRatioPlusFloor") {
  // 1000 requests/s for 20 s, every attempt fails, each request wants 2 retries.
  const RetryBudgetConfig cfg{0.2, 10};
  RetryBudget b(cfg, kT0);
  int64_t requests = 0, retries = 0;
  for (int ms = 0; ms < 20'000; ++ms) {
    const TimePoint now = kT0 + std::chrono::milliseconds{ms};
    b.on_request(now);
    ++requests;
    for (int r = 0; r < 2 && b.try_spend(now); ++r) ++retries;
  }
  const double bound = requests * cfg.ratio + cfg.min_per_second * 20 + cfg.min_per_second;
  CHECK(retries <= bound);
  CHECK(retries >= requests * cfg.ratio);  // and the budget is actually usable
}

TEST_CASE("BudgetSharedByThreadsNeverSpendsMoreThanDeposited") {
  RetryBudget b({0.2, 10}, kT0);  // 10 initial tokens, no refill at a fixed time
  constexpr int kThreads = 4, kRequests = 20'000;
  std::atomic<int64_t> spent{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRequests; ++i) {
        b.on_request(kT0);
        if (b.try_spend(kT0)) spent.fetch_add(1, std::memory_order_relaxed);
        if (b.try_spend(kT0)) spent.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& th : threads) th.join();
  const double deposited = 10 + 0.2 * kThreads * kRequests;  // 16010
  CHECK(spent.load() <= deposited);
  // Every token is either spent or still there: nothing lost, nothing minted.
  CHECK(static_cast<double>(spent.load()) + b.tokens(kT0) == doctest::Approx(deposited));
}

// ---- mode: successes ----

namespace {
RetryBudgetConfig successes(double ratio, double min_per_second) {
  RetryBudgetConfig c{ratio, min_per_second};
  c.mode = BudgetMode::successes;
  return c;
}
}  // namespace

TEST_CASE("SuccessesBudgetStartsFullAtTenSecondsOfFloor") {
  RetryBudget b(successes(0.1, 10), kT0);
  CHECK(b.mode() == BudgetMode::successes);
  CHECK(b.tokens(kT0) == 100.0);
  // A retry spends nothing itself: the bucket stays full however many are allowed.
  CHECK(b.try_spend(kT0));
  CHECK(b.try_spend(kT0));
  CHECK(b.tokens(kT0) == 100.0);
}

TEST_CASE("SuccessesBudgetStopsRetriesAtHalfFullAndTimeAddsNothing") {
  RetryBudget b(successes(0.1, 10), kT0);
  for (int i = 0; i < 49; ++i) b.on_attempt_result(true, kT0);
  CHECK(b.tokens(kT0) == 51.0);
  CHECK(b.try_spend(kT0));  // 51 > 50
  b.on_attempt_result(true, kT0);
  CHECK(b.tokens(kT0) == 50.0);
  CHECK_FALSE(b.try_spend(kT0));  // at half: no retry
  CHECK_FALSE(b.try_spend(kT0 + 3600s));  // an hour later: still none (no time refill)
  CHECK(b.tokens(kT0 + 3600s) == 50.0);
  // Requests deposit nothing in this mode.
  for (int i = 0; i < 1000; ++i) b.on_request(kT0 + 3600s);
  CHECK(b.tokens(kT0 + 3600s) == 50.0);
}

TEST_CASE("SuccessesBudgetRefillsByRatioPerSuccessUpToFull") {
  RetryBudget b(successes(0.1, 10), kT0);
  for (int i = 0; i < 60; ++i) b.on_attempt_result(true, kT0);
  CHECK(b.tokens(kT0) == 40.0);
  CHECK_FALSE(b.try_spend(kT0));
  // 101 successes at 0.1 each: +10.1 tokens, exact in fixed point.
  for (int i = 0; i < 101; ++i) b.on_attempt_result(false, kT0);
  CHECK(b.tokens(kT0) == doctest::Approx(50.1).epsilon(1e-12));
  CHECK(b.try_spend(kT0));
  for (int i = 0; i < 10000; ++i) b.on_attempt_result(false, kT0);
  CHECK(b.tokens(kT0) == 100.0);  // never above full
  for (int i = 0; i < 500; ++i) b.on_attempt_result(true, kT0);
  CHECK(b.tokens(kT0) == 0.0);  // never below empty
}

TEST_CASE("SuccessesBudgetInATotalOutageAllowsAboutHalfTheBucketOfRetries") {
  // Each request: a first attempt and, while allowed, retries up to 3 attempts.
  RetryBudget b(successes(0.1, 10), kT0);
  int attempts = 0, requests = 2000;
  for (int r = 0; r < requests; ++r) {
    for (int a = 0; a < 3; ++a) {
      ++attempts;
      b.on_attempt_result(true, kT0);
      if (!b.try_spend(kT0)) break;
    }
  }
  // 50 failures bring the bucket from 100 to 50; only those can have retried.
  CHECK(attempts - requests <= 50);
  CHECK(static_cast<double>(attempts) / requests <= 1.03);
}

TEST_CASE("RequestsModeIgnoresAttemptResults") {
  RetryBudget b({0.2, 10}, kT0);
  for (int i = 0; i < 100; ++i) b.on_attempt_result(true, kT0);
  CHECK(b.tokens(kT0) == 10.0);
}

TEST_CASE("SwitchingModesOnReloadStartsTheNewModeFresh") {
  RetryBudget b({0.2, 10}, kT0);
  CHECK(spend_all(b, kT0) == 10);
  b.reconfigure(successes(0.1, 10));
  CHECK(b.tokens(kT0) == 100.0);
  for (int i = 0; i < 30; ++i) b.on_attempt_result(true, kT0);
  b.reconfigure(successes(0.5, 10));  // same mode: the level is kept
  CHECK(b.tokens(kT0) == 70.0);
  b.reconfigure(successes(0.5, 5));   // smaller bucket: clamped to full
  CHECK(b.tokens(kT0) == 50.0);
  CHECK(b.try_spend(kT0));  // 50 of a bucket of 50: above half
  b.reconfigure({0.2, 10});  // back to requests: its initial balance
  CHECK(b.tokens(kT0) == 10.0);
}
