#include "core/metrics/histogram.h"

#include <algorithm>
#include <cmath>

namespace onelayer {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;
}  // namespace

uint64_t Histogram::Snapshot::count() const {
  uint64_t n = 0;
  for (uint64_t c : counts) n += c;
  return n;
}

Histogram::Snapshot& Histogram::Snapshot::operator+=(const Snapshot& other) {
  for (size_t i = 0; i < kBuckets; ++i) counts[i] += other.counts[i];
  sum_ns += other.sum_ns;
  return *this;
}

void Histogram::observe(double seconds) {
  if (std::isnan(seconds)) return;
  if (seconds < 0) seconds = 0;
  size_t bucket = kBounds.size();
  for (size_t i = 0; i < kBounds.size(); ++i) {
    if (seconds <= kBounds[i]) {  // `le` is inclusive
      bucket = i;
      break;
    }
  }
  counts_[bucket].fetch_add(1, kRelaxed);
  // Clamp so a absurd duration cannot overflow the conversion.
  constexpr double kMaxSeconds = 1e9;
  double ns = std::round(std::min(seconds, kMaxSeconds) * 1e9);
  sum_ns_.fetch_add(static_cast<uint64_t>(ns), kRelaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  for (size_t i = 0; i < kBuckets; ++i) s.counts[i] = counts_[i].load(kRelaxed);
  s.sum_ns = sum_ns_.load(kRelaxed);
  return s;
}

}  // namespace onelayer
