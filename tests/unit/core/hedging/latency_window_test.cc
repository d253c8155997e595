#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "core/hedging/latency_window.h"

using namespace onelayer;
using namespace std::chrono_literals;

namespace {
const TimePoint kT0 = TimePoint{} + 1000s;
}

TEST_CASE("LatencyBucketsAreExactBelowSixteenMicrosAndContiguousAbove") {
  for (uint64_t us = 0; us < 16; ++us) CHECK(LatencyWindow::bucket_of(us) == static_cast<int>(us));
  // Every value lies below its bucket's upper bound and at or above the
  // previous bucket's, and a bucket is at most 1/8 of its lower bound wide.
  for (uint64_t us = 1; us < (uint64_t{1} << 27); us = us * 17 / 16 + 1) {
    const int b = LatencyWindow::bucket_of(us);
    REQUIRE(b < LatencyWindow::kBuckets);
    CHECK(us < LatencyWindow::bucket_upper(b));
    const uint64_t lower = b == 0 ? 0 : LatencyWindow::bucket_upper(b - 1);
    CHECK(us >= lower);
    if (lower >= 16) CHECK((LatencyWindow::bucket_upper(b) - lower) * 8 <= lower);
  }
  CHECK(LatencyWindow::bucket_of(uint64_t{1} << 40) == LatencyWindow::kBuckets - 1);
}

TEST_CASE("LatencyQuantileNeedsTwentySamples") {
  LatencyWindow w;
  for (int i = 0; i < 19; ++i) w.record(1ms, kT0);
  CHECK_FALSE(w.quantile(0.5, kT0).has_value());
  w.record(1ms, kT0);
  REQUIRE(w.quantile(0.5, kT0).has_value());
}

TEST_CASE("LatencyQuantilesOfAKnownMixAreWithinAnEighthAbove") {
  LatencyWindow w;
  // 90 samples of 2ms, 5 of 50ms, 5 of 500ms.
  for (int i = 0; i < 90; ++i) w.record(2ms, kT0);
  for (int i = 0; i < 5; ++i) w.record(50ms, kT0);
  for (int i = 0; i < 5; ++i) w.record(500ms, kT0);
  auto within = [](Micros got, Micros truth) {
    return got >= truth && got.count() * 8 <= truth.count() * 9 + 8;
  };
  CHECK(within(*w.quantile(0.50, kT0), 2000us));
  CHECK(within(*w.quantile(0.90, kT0), 2000us));
  CHECK(within(*w.quantile(0.95, kT0), 50000us));
  CHECK(within(*w.quantile(0.99, kT0), 500000us));
  CHECK(w.samples(kT0) == 100);
}

TEST_CASE("LatencyWindowForgetsSamplesOlderThanTenSeconds") {
  LatencyWindow w;
  for (int i = 0; i < 50; ++i) w.record(500ms, kT0);
  for (int i = 0; i < 50; ++i) w.record(1ms, kT0 + 5s);
  CHECK(w.samples(kT0 + 9s) == 100);
  CHECK(*w.quantile(0.99, kT0 + 9s) >= 500000us);
  // At kT0 + 10s the first second has left the window.
  CHECK(w.samples(kT0 + 10s) == 50);
  CHECK(*w.quantile(0.99, kT0 + 10s) < 2000us);
  // A slice reused for a new second starts empty.
  w.record(3ms, kT0 + 10s);
  CHECK(w.samples(kT0 + 10s) == 51);
  CHECK(w.samples(kT0 + 20s) == 0);
}

TEST_CASE("LatencyWindowIgnoresASampleOlderThanItsSlice") {
  LatencyWindow w;
  w.record(1ms, kT0 + 10s);
  w.record(1ms, kT0);  // same slice, ten seconds earlier: dropped
  CHECK(w.samples(kT0 + 10s) == 1);
}

TEST_CASE("LatencyWindowSharedByThreadsCountsEverySampleWithinOneSecond") {
  LatencyWindow w;
  w.record(1ms, kT0);  // the slice holds this second: no writer empties it below
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&w] {
      for (int i = 0; i < 10000; ++i) w.record(std::chrono::microseconds(100 + i % 900), kT0);
    });
  for (auto& t : ts) t.join();
  CHECK(w.samples(kT0) == 40001);
}
