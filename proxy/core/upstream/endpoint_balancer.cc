#include "core/upstream/endpoint_balancer.h"
#include "core/base/random.h"

#include <algorithm>
#include <bit>

namespace onelayer {

namespace {

// Index of the k-th (from 0) set bit of `set`; k < popcount(set).
size_t nth_bit(uint64_t set, size_t k) {
  for (size_t i = 0; i < k; ++i) set &= set - 1;  // drop the lowest set bit
  return static_cast<size_t>(std::countr_zero(set));
}

}  // namespace

EndpointBalancer::EndpointBalancer(Balance mode, Millis decay) : mode_(mode), decay_(decay) {
  eps_.reserve(kMaxEndpoints);
}

void EndpointBalancer::resize(size_t n) {
  n = std::min(n, kMaxEndpoints);
  while (eps_.size() < n) eps_.push_back(Endpoint{PeakEwma(decay_), 0});
  eps_.resize(n, Endpoint{PeakEwma(decay_), 0});
}

size_t EndpointBalancer::pick(uint64_t candidates, uint64_t tried, size_t previous, TimePoint now, Random& rng) {
  if (eps_.size() < kMaxEndpoints) candidates &= (uint64_t{1} << eps_.size()) - 1;
  if (candidates == 0) return kNone;
  uint64_t fresh = candidates & ~tried;
  uint64_t set = fresh ? fresh : candidates;
  if (std::popcount(set) == 1) {
    if (mode_ == Balance::round_robin && previous == kNone) ++cursor_;  // the request still takes its turn
    return static_cast<size_t>(std::countr_zero(set));
  }
  return mode_ == Balance::p2c ? pick_p2c(set, now, rng) : pick_round_robin(set, previous);
}

size_t EndpointBalancer::pick_p2c(uint64_t set, TimePoint now, Random& rng) const {
  auto n = static_cast<int64_t>(std::popcount(set));
  int64_t a = rng.between(0, n - 1);
  int64_t b = rng.between(0, n - 2);
  if (b >= a) ++b;
  size_t ia = nth_bit(set, static_cast<size_t>(a));
  size_t ib = nth_bit(set, static_cast<size_t>(b));
  return cost(ib, now) < cost(ia, now) ? ib : ia;
}

size_t EndpointBalancer::pick_round_robin(uint64_t set, size_t previous) {
  if (previous == kNone) {
    auto n = static_cast<uint64_t>(std::popcount(set));
    return nth_bit(set, static_cast<size_t>(cursor_++ % n));
  }
  // A retry: the next candidate after the previous pick, wrapping around.
  uint64_t after = previous + 1 >= 64 ? 0 : set & (~uint64_t{0} << (previous + 1));
  return static_cast<size_t>(std::countr_zero(after ? after : set));
}

void EndpointBalancer::on_start(size_t i) { ++eps_[i].outstanding; }

void EndpointBalancer::on_cancel(size_t i) {
  if (eps_[i].outstanding > 0) --eps_[i].outstanding;
}

void EndpointBalancer::on_end(size_t i, TimePoint now, Clock::duration latency, bool failed) {
  Endpoint& e = eps_[i];
  if (e.outstanding > 0) --e.outstanding;
  if (failed && e.ewma.seeded()) {
    auto floor = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double, std::nano>(e.ewma.estimate_ns(now)));
    latency = std::max(latency, floor);
  }
  e.ewma.observe(now, latency);
}

}  // namespace onelayer
