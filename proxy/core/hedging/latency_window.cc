#include "core/hedging/latency_window.h"

#include <bit>

namespace onelayer {

namespace {
constexpr uint64_t kMaxMicros = (uint64_t{1} << 27) - 1;
}

int LatencyWindow::bucket_of(uint64_t us) {
  if (us < 16) return static_cast<int>(us);
  if (us > kMaxMicros) us = kMaxMicros;
  const int e = std::bit_width(us) - 1;  // 4..26
  const int sub = static_cast<int>((us >> (e - 3)) & 7);
  return 8 * (e - 2) + sub;
}

uint64_t LatencyWindow::bucket_upper(int bucket) {
  if (bucket < 16) return static_cast<uint64_t>(bucket) + 1;
  const int e = bucket / 8 + 2;
  const uint64_t sub = static_cast<uint64_t>(bucket % 8);
  return (8 + sub + 1) << (e - 3);
}

int64_t LatencyWindow::second_of(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

void LatencyWindow::record(Clock::duration latency, TimePoint now) {
  const int64_t us = std::chrono::duration_cast<Micros>(latency).count();
  const int b = bucket_of(us < 0 ? 0 : static_cast<uint64_t>(us));
  const int64_t s = second_of(now);
  Slice& slice = slices_[static_cast<size_t>(((s % kSlices) + kSlices) % kSlices)];
  int64_t seen = slice.second.load(std::memory_order_acquire);
  if (seen != s) {
    // Older than the slice's second (too old to count), or another writer
    // is emptying it: the sample is dropped.
    if (seen > s || seen == kEmptying) return;
    if (!slice.second.compare_exchange_strong(seen, kEmptying, std::memory_order_acq_rel)) {
      if (seen != s) return;
    } else {
      for (auto& c : slice.counts) c.store(0, std::memory_order_relaxed);
      slice.second.store(s, std::memory_order_release);
    }
  }
  slice.counts[static_cast<size_t>(b)].fetch_add(1, std::memory_order_relaxed);
}

uint64_t LatencyWindow::samples(TimePoint now) const {
  const int64_t s = second_of(now);
  uint64_t n = 0;
  for (const Slice& slice : slices_) {
    const int64_t sec = slice.second.load(std::memory_order_acquire);
    if (sec > s || sec <= s - kSlices) continue;
    for (const auto& c : slice.counts) n += c.load(std::memory_order_relaxed);
  }
  return n;
}

std::optional<Micros> LatencyWindow::quantile(double q, TimePoint now) const {
  const int64_t s = second_of(now);
  std::array<uint64_t, kBuckets> sum{};
  uint64_t n = 0;
  for (const Slice& slice : slices_) {
    const int64_t sec = slice.second.load(std::memory_order_acquire);
    if (sec > s || sec <= s - kSlices) continue;
    for (size_t i = 0; i < sum.size(); ++i) {
      const uint32_t c = slice.counts[i].load(std::memory_order_relaxed);
      sum[i] += c;
      n += c;
    }
  }
  if (n < kMinSamples) return std::nullopt;
  if (q <= 0) q = 0;
  if (q > 1) q = 1;
  // The smallest sample at or above rank ceil(q * n).
  uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(n));
  if (static_cast<double>(rank) < q * static_cast<double>(n)) ++rank;
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += sum[static_cast<size_t>(i)];
    if (seen >= rank) return Micros(static_cast<int64_t>(bucket_upper(i)));
  }
  return Micros(static_cast<int64_t>(bucket_upper(kBuckets - 1)));
}

}  // namespace onelayer
