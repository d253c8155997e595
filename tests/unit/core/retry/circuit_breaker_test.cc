#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "core/retry/circuit_breaker.h"

using namespace onelayer;
using namespace std::chrono_literals;
using State = CircuitBreaker::State;

namespace {

const TimePoint kT0 = TimePoint{} + 1000s;

CircuitBreakerConfig enabled(uint32_t failures = 3, Millis open_for = 10s, uint32_t probes = 1) {
  return {true, failures, open_for, probes};
}

void fail_n(CircuitBreaker& cb, int n, TimePoint now) {
  for (int i = 0; i < n; ++i) cb.on_failure(now);
}

}  // namespace

TEST_CASE("BreakerDisabledAlwaysAllows") {
  CircuitBreaker cb(CircuitBreakerConfig{});
  fail_n(cb, 100, kT0);
  CHECK(cb.allow(kT0));
  CHECK(cb.state(kT0) == State::closed);
}

TEST_CASE("BreakerOpensAfterConsecutiveFailures") {
  CircuitBreaker cb(enabled(3));
  fail_n(cb, 2, kT0);
  CHECK(cb.state(kT0) == State::closed);
  CHECK(cb.allow(kT0));
  cb.on_failure(kT0);
  CHECK(cb.state(kT0) == State::open);
  CHECK_FALSE(cb.allow(kT0 + 1s));
}

TEST_CASE("BreakerSuccessResetsTheFailureStreak") {
  CircuitBreaker cb(enabled(3));
  fail_n(cb, 2, kT0);
  cb.on_success(kT0);
  fail_n(cb, 2, kT0);
  CHECK(cb.state(kT0) == State::closed);
  cb.on_failure(kT0);
  CHECK(cb.state(kT0) == State::open);
}

TEST_CASE("BreakerTurnsHalfOpenAfterOpenFor") {
  CircuitBreaker cb(enabled(1, 10s));
  cb.on_failure(kT0);
  CHECK(cb.state(kT0 + 9999ms) == State::open);
  CHECK_FALSE(cb.allow(kT0 + 9999ms));
  CHECK(cb.state(kT0 + 10s) == State::half_open);
}

TEST_CASE("BreakerHalfOpenAdmitsOnlyTheConfiguredProbes") {
  CircuitBreaker cb(enabled(1, 10s, 2));
  cb.on_failure(kT0);
  const TimePoint t = kT0 + 10s;
  CHECK(cb.allow(t));
  CHECK(cb.allow(t));
  CHECK_FALSE(cb.allow(t));
  CHECK(cb.state(t) == State::half_open);
}

TEST_CASE("BreakerSuccessfulProbeCloses") {
  CircuitBreaker cb(enabled(1, 10s));
  cb.on_failure(kT0);
  CHECK(cb.allow(kT0 + 10s));
  cb.on_success(kT0 + 10s + 5ms);
  CHECK(cb.state(kT0 + 10s + 5ms) == State::closed);
  CHECK(cb.allow(kT0 + 10s + 5ms));
  CHECK(cb.allow(kT0 + 10s + 5ms));
}

TEST_CASE("BreakerFailedProbeReopensForAnotherOpenFor") {
  CircuitBreaker cb(enabled(1, 10s));
  cb.on_failure(kT0);
  CHECK(cb.allow(kT0 + 10s));
  cb.on_failure(kT0 + 12s);
  CHECK(cb.state(kT0 + 12s) == State::open);
  CHECK_FALSE(cb.allow(kT0 + 21s));  // 10 s from the failed probe, not from the first opening
  CHECK(cb.state(kT0 + 22s) == State::half_open);
  CHECK(cb.allow(kT0 + 22s));
}

TEST_CASE("BreakerStaleFailureWhileOpenDoesNotExtendIt") {
  CircuitBreaker cb(enabled(1, 10s));
  cb.on_failure(kT0);
  cb.on_failure(kT0 + 5s);  // an attempt admitted before it opened
  CHECK(cb.state(kT0 + 10s) == State::half_open);
}

TEST_CASE("BreakerStaleSuccessWhileOpenDoesNotClose") {
  CircuitBreaker cb(enabled(1, 10s));
  cb.on_failure(kT0);
  cb.on_success(kT0 + 1s);
  CHECK(cb.state(kT0 + 1s) == State::open);
}

TEST_CASE("BreakerCancelledProbeFreesItsSlot") {
  CircuitBreaker cb(enabled(1, 10s, 1));
  cb.on_failure(kT0);
  CHECK(cb.allow(kT0 + 10s));
  CHECK_FALSE(cb.allow(kT0 + 10s));
  cb.on_cancel(kT0 + 11s);
  CHECK(cb.state(kT0 + 11s) == State::half_open);
  CHECK(cb.allow(kT0 + 11s));
}

TEST_CASE("BreakerDisablingByReconfigureCloses") {
  CircuitBreaker cb(enabled(1, 10s));
  cb.on_failure(kT0);
  CHECK_FALSE(cb.allow(kT0));
  cb.reconfigure(CircuitBreakerConfig{});
  CHECK(cb.allow(kT0));
  CHECK(cb.state(kT0) == State::closed);
  cb.reconfigure(enabled(2, 10s));
  cb.on_failure(kT0);
  CHECK(cb.state(kT0) == State::closed);  // the streak restarted at 0 with the new threshold 2
  cb.on_failure(kT0);
  CHECK(cb.state(kT0) == State::open);
}

TEST_CASE("BreakerHalfOpenAdmitsOneProbeAcrossThreads") {
  CircuitBreaker cb(enabled(1, 10s, 1));
  cb.on_failure(kT0);
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i)
        if (cb.allow(kT0 + 10s)) admitted.fetch_add(1);
    });
  for (auto& th : threads) th.join();
  CHECK(admitted.load() == 1);
}

TEST_CASE("BreakerStateNames") {
  CHECK(std::string(state_name(State::closed)) == "closed");
  CHECK(std::string(state_name(State::open)) == "open");
  CHECK(std::string(state_name(State::half_open)) == "half_open");
}
