// Latency histogram with fixed bucket bounds in seconds, as rendered by
// /metrics (onelayer_request_duration_seconds). Pure core: relaxed atomics
// only, so every worker thread can observe into the same one without a lock.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace onelayer {

// Latency histogram with fixed bucket bounds in seconds. Counts are stored per
// bucket (not cumulative) so observe() is one fetch_add; the sum is kept in
// whole nanoseconds so it adds exactly and without a CAS loop on a double.
class Histogram {
 public:
  static constexpr std::array<double, 13> kBounds = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  // Bucket label values, as printed in `le` (the last one is +Inf).
  static constexpr std::array<const char*, 14> kLeLabels = {
      "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
      "0.25",  "0.5",    "1",     "2.5",  "5",     "10",   "+Inf"};
  static constexpr size_t kBuckets = kBounds.size() + 1;  // the last is +Inf

  struct Snapshot {
    std::array<uint64_t, kBuckets> counts{};  // per bucket, not cumulative
    uint64_t sum_ns = 0;
    uint64_t count() const;
    double sum_seconds() const { return static_cast<double>(sum_ns) / 1e9; }
    Snapshot& operator+=(const Snapshot& other);
  };

  // Negative values count as 0; NaN is ignored.
  void observe(double seconds);
  Snapshot snapshot() const;

 private:
  std::array<std::atomic<uint64_t>, kBuckets> counts_{};
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace onelayer
