#include "core/upstream/peak_ewma.h"

#include <chrono>
#include <cmath>

namespace onelayer {

static double ns_of(Clock::duration d) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

double PeakEwma::decayed(TimePoint now) const {
  double elapsed = now > stamp_ ? ns_of(now - stamp_) : 0.0;
  return estimate_ns_ * std::exp(-elapsed / decay_ns_);
}

void PeakEwma::observe(TimePoint now, Clock::duration latency) {
  double rtt = latency.count() > 0 ? ns_of(latency) : 0.0;
  if (!seeded_) {
    reseed(now, latency);
    return;
  }
  if (rtt > estimate_ns_) {
    estimate_ns_ = rtt;
  } else {
    double elapsed = now > stamp_ ? ns_of(now - stamp_) : 0.0;
    double w = std::exp(-elapsed / decay_ns_);
    estimate_ns_ = estimate_ns_ * w + rtt * (1.0 - w);
  }
  if (now > stamp_) stamp_ = now;
}

void PeakEwma::reseed(TimePoint now, Clock::duration latency) {
  estimate_ns_ = latency.count() > 0 ? ns_of(latency) : 0.0;
  stamp_ = now;
  seeded_ = true;
}

double PeakEwma::estimate_ns(TimePoint now) const { return seeded_ ? decayed(now) : 0.0; }

double PeakEwma::cost(TimePoint now, uint32_t outstanding) const {
  if (!seeded_) return outstanding == 0 ? 0.0 : kPenalty + outstanding;
  return decayed(now) * (static_cast<double>(outstanding) + 1.0);
}

}  // namespace onelayer
