#include "core/upstream/outlier_detector.h"

#include <algorithm>

namespace onelayer {

OutlierDetector::OutlierDetector(OutlierDetectionConfig od, HealthCheckConfig hc) : od_(od), hc_(hc) {}

void OutlierDetector::resize(size_t n) { eps_.resize(n); }

void OutlierDetector::set_present(size_t i, bool present) {
  Endpoint& e = eps_[i];
  if (e.present == present) return;
  e = Endpoint{};  // an address that comes back starts afresh
  e.present = present;
}

bool OutlierDetector::probe_due(size_t i, TimePoint now) const {
  const Endpoint& e = eps_[i];
  return e.present && e.state == State::ejected && !e.by_check && now >= e.until;
}

bool OutlierDetector::available(size_t i, TimePoint now) const {
  const Endpoint& e = eps_[i];
  return e.present && (e.state == State::in || probe_due(i, now));
}

void OutlierDetector::on_picked(size_t i, TimePoint now) {
  if (probe_due(i, now)) eps_[i].state = State::probing;
}

void OutlierDetector::on_cancel(size_t i) {
  Endpoint& e = eps_[i];
  if (e.state == State::probing) e.state = State::ejected;  // `until` passed: due again
}

Millis OutlierDetector::duration_for(uint32_t in_a_row) const {
  int64_t base = od_.base_ejection.count();
  int64_t cap = std::max(base, static_cast<int64_t>(od_.max_ejection.count()));
  // base x n without overflow: n is at most cap / base + 1 before the cap applies.
  if (in_a_row > 0 && base > cap / static_cast<int64_t>(in_a_row)) return Millis{cap};
  return Millis{std::min(cap, base * static_cast<int64_t>(in_a_row))};
}

bool OutlierDetector::may_eject() const {
  size_t present = 0, out = 0;
  for (const Endpoint& e : eps_) {
    if (!e.present) continue;
    ++present;
    if (e.state != State::in) ++out;
  }
  if (out + 1 >= present) return false;  // never the last one in
  return (out + 1) * 100 <= present * od_.max_ejected_percent;
}

OutlierDetector::Event OutlierDetector::eject(Endpoint& e, TimePoint now, Reason reason) {
  e.state = State::ejected;
  e.failures = 0;
  e.check_passes = 0;
  ++e.ejections_total;
  Event ev;
  ev.kind = Event::Kind::ejected;
  ev.reason = reason;
  if (reason == Reason::health_check) {
    e.by_check = true;
    return ev;
  }
  e.by_check = false;
  ++e.in_a_row;
  e.last_duration = duration_for(e.in_a_row);
  e.until = now + e.last_duration;
  ev.duration = e.last_duration;
  ev.in_a_row = e.in_a_row;
  return ev;
}

OutlierDetector::Event OutlierDetector::bring_back(Endpoint& e, TimePoint now) {
  e.state = State::in;
  e.by_check = false;
  e.failures = 0;
  e.last_failed = false;
  e.returned_at = now;
  Event ev;
  ev.kind = Event::Kind::returned;
  return ev;
}

OutlierDetector::Event OutlierDetector::on_success(size_t i, TimePoint now) {
  Endpoint& e = eps_[i];
  if (!e.present) return {};
  switch (e.state) {
    case State::ejected: return {};  // started before the ejection: no evidence
    case State::probing: return bring_back(e, now);
    case State::in: break;
  }
  e.failures = 0;
  e.last_failed = false;
  if (e.in_a_row > 0 && now - e.returned_at >= e.last_duration) e.in_a_row = 0;
  return {};
}

OutlierDetector::Event OutlierDetector::on_failure(size_t i, TimePoint now, Failure kind) {
  Endpoint& e = eps_[i];
  if (!e.present) return {};  // an address that left DNS while the attempt ran
  switch (e.state) {
    case State::ejected: return {};
    case State::probing: return eject(e, now, Reason::probe_failed);
    case State::in: break;
  }
  e.last_failed = true;
  ++e.failures;
  if (!od_.enabled) return {};
  bool timeout = kind == Failure::connect_timeout;
  if (!timeout && e.failures < std::max<uint32_t>(1, od_.consecutive_failures)) return {};
  if (!may_eject()) return {};
  return eject(e, now, timeout ? Reason::connect_timeout : Reason::consecutive_failures);
}

void OutlierDetector::on_server_error(size_t i) {
  Endpoint& e = eps_[i];
  if (e.state != State::in) return;
  e.last_failed = true;
  e.failures = 0;  // it answered: the streak of failures is broken
}

OutlierDetector::Event OutlierDetector::on_check(size_t i, bool passed, TimePoint now) {
  Endpoint& e = eps_[i];
  if (passed) {
    e.check_failures = 0;
    ++e.check_passes;
    if (e.by_check && e.check_passes >= std::max<uint32_t>(1, hc_.healthy)) return bring_back(e, now);
    return {};
  }
  e.check_passes = 0;
  ++e.check_failures;
  if (e.state != State::in) return {};
  if (e.check_failures < std::max<uint32_t>(1, hc_.unhealthy) || !may_eject()) return {};
  return eject(e, now, Reason::health_check);
}

bool OutlierDetector::all_in_failing() const {
  bool any = false;
  for (const Endpoint& e : eps_) {
    if (!e.present || e.state != State::in) continue;
    if (!e.last_failed) return false;
    any = true;
  }
  return any;
}

void OutlierDetector::reconfigure(OutlierDetectionConfig od, HealthCheckConfig hc) {
  od_ = od;
  hc_ = hc;
}

const char* reason_name(OutlierDetector::Reason r) {
  switch (r) {
    case OutlierDetector::Reason::none: return "none";
    case OutlierDetector::Reason::consecutive_failures: return "consecutive_failures";
    case OutlierDetector::Reason::connect_timeout: return "connect_timeout";
    case OutlierDetector::Reason::probe_failed: return "probe_failed";
    case OutlierDetector::Reason::health_check: return "health_check";
  }
  return "none";
}

}  // namespace onelayer
