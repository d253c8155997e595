// Chooses one endpoint of an upstream per attempt (docs/endpoint-health.md).
//
// p2c (the default), as Linkerd and Finagle balance: draw two different
// candidates at random and take the one with the lower peak-EWMA cost
// (latency estimate x (outstanding + 1), see PeakEwma); with two
// candidates that is always the cheaper one.
// round_robin: a cursor that advances once per request (not per attempt),
// over the candidates in index order, so with two endpoints first attempts
// alternate even when every request retries.
// A retry prefers candidates the request has not tried yet; only when every
// candidate was tried does it go back to one (p2c: by cost; round_robin: the
// one after the previous pick).
// Endpoints are indexes below kMaxEndpoints and sets of them are bit masks,
// so a pick allocates nothing. Not thread-safe: its owner
// (UpstreamEndpoints) holds the lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/base/clock.h"
#include "core/base/random.h"
#include "core/config/config.h"
#include "core/upstream/peak_ewma.h"

namespace onelayer {

class EndpointBalancer {
 public:
  static constexpr size_t kMaxEndpoints = 64;
  static constexpr size_t kNone = SIZE_MAX;

  explicit EndpointBalancer(Balance mode, Millis decay = Millis{10'000});

  void resize(size_t n);  // at most kMaxEndpoints
  size_t size() const { return eps_.size(); }
  Balance mode() const { return mode_; }

  // `candidates`: bit i set when endpoint i may be picked. `tried`: the
  // endpoints this request already used; `previous` the last of them
  // (kNone on a first attempt). kNone when candidates is empty.
  size_t pick(uint64_t candidates, uint64_t tried, size_t previous, TimePoint now, Random& rng);

  // An attempt to endpoint i started / ended. `latency` is the time to the
  // response head (or to the failure); a failure never lowers the estimate.
  void on_start(size_t i);
  void on_end(size_t i, TimePoint now, Clock::duration latency, bool failed);
  void on_cancel(size_t i);  // ended without a verdict: no observation
  // Forgets endpoint i's history (ejected) / starts it from the probe's latency (returned).
  void reset(size_t i) { eps_[i].ewma.reset(); }
  void reseed(size_t i, TimePoint now, Clock::duration latency) { eps_[i].ewma.reseed(now, latency); }

  double cost(size_t i, TimePoint now) const { return eps_[i].ewma.cost(now, eps_[i].outstanding); }
  uint32_t outstanding(size_t i) const { return eps_[i].outstanding; }

 private:
  struct Endpoint {
    PeakEwma ewma;
    uint32_t outstanding = 0;
  };
  size_t pick_p2c(uint64_t set, TimePoint now, Random& rng) const;
  size_t pick_round_robin(uint64_t set, size_t previous);

  Balance mode_;
  Millis decay_;
  std::vector<Endpoint> eps_;
  uint64_t cursor_ = 0;
};

}  // namespace onelayer
