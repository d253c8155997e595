#include <doctest/doctest.h>

#include <cmath>

#include "core/upstream/peak_ewma.h"

using namespace onelayer;
using namespace std::chrono_literals;

namespace {
const TimePoint kT0 = TimePoint{} + 1000s;
}  // namespace

TEST_CASE("EwmaUnseededCostsNothingIdleAndThePenaltyOnceBusy") {
  PeakEwma e(10s);
  CHECK_FALSE(e.seeded());
  CHECK(e.cost(kT0, 0) == 0.0);
  CHECK(e.cost(kT0, 1) == PeakEwma::kPenalty + 1);
  CHECK(e.cost(kT0, 3) == PeakEwma::kPenalty + 3);
}

TEST_CASE("EwmaFirstObservationSeedsTheEstimate") {
  PeakEwma e(10s);
  e.observe(kT0, 20ms);
  CHECK(e.seeded());
  CHECK(e.estimate_ns(kT0) == doctest::Approx(20e6));
  CHECK(e.cost(kT0, 0) == doctest::Approx(20e6));
  CHECK(e.cost(kT0, 2) == doctest::Approx(60e6));  // x (outstanding + 1)
}

TEST_CASE("EwmaAHigherLatencyReplacesTheEstimateAtOnce") {
  PeakEwma e(10s);
  e.observe(kT0, 1ms);
  e.observe(kT0 + 1ms, 250ms);
  CHECK(e.estimate_ns(kT0 + 1ms) == doctest::Approx(250e6));
}

TEST_CASE("EwmaALowerLatencyBlendsByTheTimeSinceTheLastObservation") {
  PeakEwma e(10s);
  e.observe(kT0, 100ms);
  // 10 s later (one decay time): weight e^-1 on the old value.
  e.observe(kT0 + 10s, 10ms);
  double w = std::exp(-1.0);
  CHECK(e.estimate_ns(kT0 + 10s) == doctest::Approx(100e6 * w + 10e6 * (1 - w)));
  // Observations close together barely move it: 1 ms after, weight e^-0.0001.
  PeakEwma f(10s);
  f.observe(kT0, 100ms);
  f.observe(kT0 + 1ms, 0ms);
  CHECK(f.estimate_ns(kT0 + 1ms) == doctest::Approx(100e6 * std::exp(-1e-4)));
}

TEST_CASE("EwmaDecaysTowardsZeroWhileNothingIsObserved") {
  PeakEwma e(10s);
  e.observe(kT0, 100ms);
  CHECK(e.estimate_ns(kT0 + 20s) == doctest::Approx(100e6 * std::exp(-2.0)));
  CHECK(e.cost(kT0 + 20s, 1) == doctest::Approx(2 * 100e6 * std::exp(-2.0)));
  // Reading changes nothing.
  CHECK(e.estimate_ns(kT0) == doctest::Approx(100e6));
}

TEST_CASE("EwmaResetForgetsAndReseedStartsFromTheGivenLatency") {
  PeakEwma e(10s);
  e.observe(kT0, 900ms);
  e.reset();
  CHECK_FALSE(e.seeded());
  CHECK(e.cost(kT0, 1) == PeakEwma::kPenalty + 1);
  e.reseed(kT0 + 5s, 2ms);
  CHECK(e.estimate_ns(kT0 + 5s) == doctest::Approx(2e6));
}
