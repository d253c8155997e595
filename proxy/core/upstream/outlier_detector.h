// Passive outlier detection (and the bookkeeping of active health checks)
// for the endpoints of one upstream. Time is an input; nothing here reads a
// clock. Not thread-safe: its owner (UpstreamEndpoints) holds the lock.
//
// Per endpoint:
//   in --(consecutive_failures failures in a row, or one connect timeout)-->
//     ejected for base_ejection x n, n = its ejections in a row, capped at
//     max_ejection;
//   ejected --(that time elapsed)--> ready for one probe: the next pick may
//     send it one attempt, and only one, at a time;
//   probe succeeds --> in (the endpoint "returns"); probe fails --> ejected
//     again with n + 1.
// n goes back to 0 once a returned endpoint has answered successfully for
// as long as its last ejection lasted.
// An ejection happens only while at most max_ejected_percent of the
// endpoints (rounded down) would be out, and never takes out the last
// endpoint that is in; a refused ejection leaves the count of failures, so
// the next failure tries again.
// Active checks (health_check): `unhealthy` failed checks in a row eject the
// endpoint until `healthy` passed checks in a row return it (no timed
// probe); the same limits apply.
// Results that arrive for an endpoint while it is ejected (attempts started
// before it was ejected) change nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/clock.h"
#include "core/config/config.h"

namespace onelayer {

class OutlierDetector {
 public:
  enum class Failure { failure, connect_timeout };
  enum class Reason { none, consecutive_failures, connect_timeout, probe_failed, health_check };
  // What a report changed, for the log line and the counters.
  struct Event {
    enum class Kind { none, ejected, returned } kind = Kind::none;
    Reason reason = Reason::none;
    Millis duration{0};      // ejected: for how long (0: until health checks pass)
    uint32_t in_a_row = 0;   // ejected: the n in base_ejection x n
  };

  OutlierDetector(OutlierDetectionConfig od, HealthCheckConfig hc);

  // Endpoints are indexes 0..size()-1; new ones start in. An endpoint that
  // is not present (its address left DNS) is never picked nor counted.
  void resize(size_t n);
  size_t size() const { return eps_.size(); }
  void set_present(size_t i, bool present);
  bool present(size_t i) const { return eps_[i].present; }

  // May the balancer pick it now? In, or ejected with a probe due and none
  // in flight.
  bool available(size_t i, TimePoint now) const;
  bool probe_due(size_t i, TimePoint now) const;
  // The balancer picked it: a due probe is now in flight.
  void on_picked(size_t i, TimePoint now);
  // The attempt ended without a verdict (client gone): frees a probe slot.
  void on_cancel(size_t i);
  Event on_success(size_t i, TimePoint now);
  Event on_failure(size_t i, TimePoint now, Failure kind);
  // A 5xx that is not a failure in the retry_on sense (500, say): it breaks
  // a streak of failures like any answer, but marks the endpoint as not
  // answering well for all_in_failing (the circuit breaker counts it).
  void on_server_error(size_t i);
  Event on_check(size_t i, bool passed, TimePoint now);

  bool ejected(size_t i) const { return eps_[i].state != State::in; }
  uint64_t ejections_total(size_t i) const { return eps_[i].ejections_total; }
  // Every present endpoint that is in has failed its latest attempt (the
  // upstream as a whole is failing: what the circuit breaker counts).
  bool all_in_failing() const;
  void reconfigure(OutlierDetectionConfig od, HealthCheckConfig hc);

 private:
  enum class State { in, ejected, probing };
  struct Endpoint {
    State state = State::in;
    bool present = true;
    bool by_check = false;       // ejected by health checks: only checks return it
    bool last_failed = false;    // latest attempt failed (or answered a 5xx)
    uint32_t failures = 0;       // consecutive failed attempts while in
    uint32_t in_a_row = 0;       // ejections in a row
    uint32_t check_failures = 0;
    uint32_t check_passes = 0;
    TimePoint until{};           // ejected: when the probe is due
    TimePoint returned_at{};
    Millis last_duration{0};
    uint64_t ejections_total = 0;
  };

  bool may_eject() const;
  Event eject(Endpoint& e, TimePoint now, Reason reason);
  Event bring_back(Endpoint& e, TimePoint now);
  Millis duration_for(uint32_t in_a_row) const;

  OutlierDetectionConfig od_;
  HealthCheckConfig hc_;
  std::vector<Endpoint> eps_;
};

// "consecutive_failures", "connect_timeout", "probe_failed", "health_check".
const char* reason_name(OutlierDetector::Reason r);

}  // namespace onelayer
