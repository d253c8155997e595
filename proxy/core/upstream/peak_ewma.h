// Peak-EWMA latency estimate of one endpoint, as Finagle's PeakEwma and
// Linkerd's (tower) balancers keep it:
// - an observed latency above the estimate replaces it at once (the peak);
// - one below it is blended in with weight 1 - exp(-elapsed / decay), where
//   elapsed is the time since the previous observation, so the estimate
//   follows a change within about `decay` whatever the request rate;
// - while nothing is observed the estimate decays towards 0 (read as if a
//   0 latency were observed now), so an endpoint that was slow once is
//   tried again later rather than shunned for ever;
// - cost = estimate x (outstanding + 1): requests already in flight make an
//   endpoint look proportionally slower (the "load" of p2c).
// Seeding (Finagle): an endpoint with no observation yet costs 0 while idle,
// so new endpoints are tried at once, but a huge penalty (plus its
// outstanding count) once it has a request in flight, so a new endpoint gets
// one request and then waits for its first answer before it gets more.
// Not thread-safe: its owner (UpstreamEndpoints) holds the lock.
#pragma once

#include <cstdint>

#include "core/base/clock.h"
#include "core/config/config.h"

namespace onelayer {

class PeakEwma {
 public:
  static constexpr double kPenalty = 1e15;  // ns: far above any real latency (11.6 days)

  explicit PeakEwma(Millis decay = Millis{10'000}) : decay_ns_(static_cast<double>(decay.count()) * 1e6) {}

  void observe(TimePoint now, Clock::duration latency);
  // Forgets all history (an ejected endpoint returns as if new, but with the
  // probe's latency when one is given).
  void reset() { seeded_ = false; }
  void reseed(TimePoint now, Clock::duration latency);

  bool seeded() const { return seeded_; }
  double estimate_ns(TimePoint now) const;  // decayed to `now`; 0 when unseeded
  double cost(TimePoint now, uint32_t outstanding) const;

 private:
  double decayed(TimePoint now) const;

  double decay_ns_;
  double estimate_ns_ = 0;
  TimePoint stamp_{};
  bool seeded_ = false;
};

}  // namespace onelayer
