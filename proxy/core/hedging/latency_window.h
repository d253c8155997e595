// A bounded, allocation-free estimate of an upstream's recent latency
// quantiles (p50/p90/p95/p99), shared by every worker. Pure: time is an
// input.
//
// What it is: a sliding window of kSlices one-second slices, each a
// histogram of kBuckets log-spaced buckets of microseconds: below 16 us one
// bucket per microsecond, then 8 buckets per power of two (HdrHistogram's
// layout with 3 sub-bucket bits), up to 2^27 us (~134 s; longer samples
// land in the last bucket). A quantile is the upper bound of the bucket
// holding it, so it is never below the true sample quantile of the window
// and at most 1/8 (12.5%) above it (plus 1 us). The window holds the
// samples of the current second and the kSlices - 1 before it.
//
// Sharing: the counters are relaxed atomics written by every worker, no
// per-worker copies to merge. A slice is reused for a new second by the
// first writer that sees it stale: a compare-and-swap marks it as being
// emptied, it is zeroed, then it takes the new second. A sample another
// worker brings for that slice meanwhile is dropped (never counted and then
// zeroed): an estimate's error of a few samples a second at most.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

#include "core/base/clock.h"

namespace onelayer {

using Micros = std::chrono::microseconds;

class LatencyWindow {
 public:
  static constexpr int kSlices = 10;       // seconds in the window
  static constexpr int kBuckets = 200;     // log-spaced, see above
  static constexpr uint32_t kMinSamples = 20;  // fewer: no estimate

  LatencyWindow() = default;
  LatencyWindow(const LatencyWindow&) = delete;
  LatencyWindow& operator=(const LatencyWindow&) = delete;

  void record(Clock::duration latency, TimePoint now);
  // The q-quantile (0 < q <= 1) of the samples of the window ending at
  // `now`; nullopt with fewer than kMinSamples samples.
  std::optional<Micros> quantile(double q, TimePoint now) const;
  uint64_t samples(TimePoint now) const;

  // The bucket layout (exposed for tests): a sample's bucket, and the
  // first microsecond above a bucket.
  static int bucket_of(uint64_t us);
  static uint64_t bucket_upper(int bucket);

 private:
  struct Slice {
    std::atomic<int64_t> second{INT64_MIN};
    std::array<std::atomic<uint32_t>, kBuckets> counts{};
  };
  static constexpr int64_t kEmptying = INT64_MIN + 1;  // a slice's `second` while it is zeroed
  static int64_t second_of(TimePoint t);
  std::array<Slice, kSlices> slices_;
};

// The two windows each upstream keeps: the latency of first attempts (what
// `retry.hedge.after: pN` reads) and of successful attempts (what
// `retry.min_time_left: pN` reads), each from the attempt's start to its
// response head. A first attempt cancelled because a hedge answered first
// is not counted: its time of cancel (about `after` plus the hedge's
// latency) would become the next `after` when the slow share is near
// 100 - N percent, and `after` would creep upwards. Leaving those out makes
// `after` read the attempts that answered, a little lower than the true
// quantile, so slightly more requests are hedged; the budget bounds them.
struct UpstreamLatency {
  LatencyWindow first_attempt;
  LatencyWindow success;
};

}  // namespace onelayer
