#include "core/upstream/upstream_endpoints.h"
#include "core/base/random.h"

#include <algorithm>
#include <bit>

namespace onelayer {

static bool is_ip_literal(std::string_view host) {
  if (host.find(':') != std::string_view::npos) return true;  // IPv6 (HostPort drops the brackets)
  int dots = 0;
  for (char c : host) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  return dots == 3;
}

UpstreamEndpoints::UpstreamEndpoints(const Upstream& u)
    : endpoints_(u.endpoints),
      balance_(u.balance),
      balancer_(u.balance),
      detector_(u.outlier_detection, u.health_check) {
  members_.reserve(kMaxMembers);
  for (size_t e = 0; e < endpoints_.size() && members_.size() < kMaxMembers; ++e) {
    const HostPort& hp = endpoints_[e];
    add_member(static_cast<uint32_t>(e), hp.to_string(), is_ip_literal(hp.host) ? hp.host : std::string());
  }
}

void UpstreamEndpoints::add_member(uint32_t endpoint, std::string label, std::string address) {
  members_.push_back(Member{endpoint, std::move(label), std::move(address)});
  balancer_.resize(members_.size());
  detector_.resize(members_.size());
}

bool UpstreamEndpoints::same_members(const Upstream& u) const {
  return u.endpoints == endpoints_ && u.balance == balance_;
}

void UpstreamEndpoints::reconfigure(const Upstream& u) {
  std::lock_guard lock(mu_);
  detector_.reconfigure(u.outlier_detection, u.health_check);
}

UpstreamEndpoints::Pick UpstreamEndpoints::pick(TimePoint now, Random& rng, uint64_t tried, uint32_t previous) {
  std::lock_guard lock(mu_);
  uint64_t available = 0, probes = 0, present = 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    uint64_t bit = uint64_t{1} << i;
    if (!detector_.present(i)) continue;
    present |= bit;
    // available() is "in, or a probe due": the probe test is made once.
    const bool due = detector_.probe_due(i, now);
    if (due) probes |= bit;
    if (due || !detector_.ejected(i)) available |= bit;
  }
  Pick p;
  size_t i;
  if (probes & ~tried) {
    i = static_cast<size_t>(std::countr_zero(probes & ~tried));  // a due probe goes first
  } else {
    // Nothing available (every member ejected by checks or probing) is a
    // state the limits prevent; should it happen, any present member serves.
    i = balancer_.pick(available ? available : present, tried,
                       previous == kNone ? EndpointBalancer::kNone : previous, now, rng);
  }
  if (i == EndpointBalancer::kNone) return p;
  p.probe = (probes >> i) & 1;  // nothing since the loop changed the detector
  detector_.on_picked(i, now);
  balancer_.on_start(i);
  p.member = static_cast<uint32_t>(i);
  p.endpoint = members_[i].endpoint;
  p.address = members_[i].address;
  return p;
}

UpstreamEndpoints::Report UpstreamEndpoints::report(uint32_t member, Result r, TimePoint now,
                                                    Clock::duration latency) {
  std::lock_guard lock(mu_);
  Report rep;
  if (member >= members_.size()) return rep;
  size_t i = member;
  switch (r) {
    case Result::cancelled:
      balancer_.on_cancel(i);
      detector_.on_cancel(i);
      return rep;
    case Result::success:
      balancer_.on_end(i, now, latency, false);
      rep.event = detector_.on_success(i, now);
      if (rep.event.kind == OutlierDetector::Event::Kind::returned) balancer_.reseed(i, now, latency);
      return rep;
    case Result::failure:
    case Result::connect_timeout:
      balancer_.on_end(i, now, latency, true);
      rep.event = detector_.on_failure(i, now, r == Result::connect_timeout ? OutlierDetector::Failure::connect_timeout
                                                                           : OutlierDetector::Failure::failure);
      if (rep.event.kind == OutlierDetector::Event::Kind::ejected) balancer_.reset(i);
      rep.upstream_failing = detector_.all_in_failing();
      return rep;
    case Result::server_error:
      balancer_.on_end(i, now, latency, true);
      if (detector_.ejected(i)) {
        rep.event = detector_.on_success(i, now);  // it answered: a probe that gets a 500 still returns it
        if (rep.event.kind == OutlierDetector::Event::Kind::returned) balancer_.reseed(i, now, latency);
      } else {
        detector_.on_server_error(i);
      }
      rep.upstream_failing = detector_.all_in_failing();
      return rep;
  }
  return rep;
}

UpstreamEndpoints::Report UpstreamEndpoints::check(uint32_t member, bool passed, TimePoint now) {
  std::lock_guard lock(mu_);
  Report rep;
  if (member >= members_.size() || !detector_.present(member)) return rep;
  rep.event = detector_.on_check(member, passed, now);
  if (rep.event.kind != OutlierDetector::Event::Kind::none) balancer_.reset(member);
  return rep;
}

void UpstreamEndpoints::set_addresses(uint32_t endpoint, const std::vector<std::string>& answer) {
  if (answer.empty() || endpoint >= endpoints_.size()) return;
  // A dual-stack answer (localhost: 127.0.0.1 and ::1) names one host twice:
  // only its IPv4 addresses are balanced on; the IPv6 ones are what a
  // connect failure falls back to within the attempt (Exchange).
  const bool any_ipv4 = std::any_of(answer.begin(), answer.end(), [](const std::string& a) {
    return a.find(':') == std::string::npos;
  });
  std::vector<std::string> addresses;
  for (const std::string& a : answer) {
    if (!any_ipv4 || a.find(':') == std::string::npos) addresses.push_back(a);
  }
  std::lock_guard lock(mu_);
  bool all_tracked = true;
  for (const std::string& a : addresses) {
    auto it = std::find_if(members_.begin(), members_.end(),
                           [&](const Member& m) { return m.endpoint == endpoint && m.address == a; });
    if (it != members_.end()) continue;
    if (members_.size() >= kMaxMembers) {
      all_tracked = false;
      continue;
    }
    add_member(endpoint, endpoints_[endpoint].to_string() + "/" + a, a);
  }
  for (size_t i = 0; i < members_.size(); ++i) {
    const Member& m = members_[i];
    if (m.endpoint != endpoint) continue;
    bool listed = m.address.empty() ? !all_tracked
                                    : std::find(addresses.begin(), addresses.end(), m.address) != addresses.end();
    detector_.set_present(i, listed);
  }
}

std::string_view UpstreamEndpoints::label(uint32_t member) const {
  std::lock_guard lock(mu_);
  return member < members_.size() ? std::string_view(members_[member].label) : std::string_view();
}

std::vector<UpstreamEndpoints::MemberView> UpstreamEndpoints::members() const {
  std::lock_guard lock(mu_);
  std::vector<MemberView> out;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (!detector_.present(i)) continue;
    const Member& m = members_[i];
    out.push_back({static_cast<uint32_t>(i), m.endpoint, m.label, m.address, detector_.ejected(i),
                   detector_.ejections_total(i)});
  }
  return out;
}

}  // namespace onelayer
