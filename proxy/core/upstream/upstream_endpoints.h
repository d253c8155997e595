// The endpoints of one upstream as every worker thread shares them: which
// one each attempt goes to (EndpointBalancer) and which are ejected
// (OutlierDetector), behind one short lock, like the retry budget.
//
// A member is what the balancer balances over: each endpoint written as an
// IP literal is one member; a DNS name is one member until a worker has
// resolved it, then one member per address it resolved to (label
// "name:port/address"), each with its own health; of a dual-stack answer
// only the IPv4 addresses. At most kMaxMembers per
// upstream; addresses beyond that are not balanced on their own.
// Labels and addresses of a member never change once it exists, so the
// string_views handed out stay valid for the object's lifetime.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/clock.h"
#include "core/base/random.h"
#include "core/config/config.h"
#include "core/upstream/endpoint_balancer.h"
#include "core/upstream/outlier_detector.h"

namespace onelayer {

class UpstreamEndpoints {
 public:
  static constexpr size_t kMaxMembers = EndpointBalancer::kMaxEndpoints;
  static constexpr uint32_t kNone = UINT32_MAX;

  struct Pick {
    uint32_t member = kNone;
    uint32_t endpoint = 0;     // index into Upstream::endpoints
    std::string_view address;  // the IP to connect to; empty: any of the endpoint's addresses
    bool probe = false;        // the one attempt that decides an ejected member's return
  };
  // failure: connect failure, reset, timeout, or a 5xx the route retries on;
  // server_error: another 5xx (except 501), which the circuit breaker counts
  // but the outlier detector does not.
  enum class Result { success, failure, connect_timeout, server_error, cancelled };
  struct Report {
    OutlierDetector::Event event;
    bool upstream_failing = false;  // not a success, and every member that is in fails
  };
  struct MemberView {
    uint32_t member;
    uint32_t endpoint;
    std::string_view label;
    std::string_view address;
    bool ejected;
    uint64_t ejections_total;
  };

  explicit UpstreamEndpoints(const Upstream& u);

  // Same endpoints and balancing: the state may carry over a reload.
  bool same_members(const Upstream& u) const;
  void reconfigure(const Upstream& u);  // thresholds only

  // `tried`: bit per member this request already used; `previous`: the last
  // of them, kNone on a first attempt. Every pick must be followed by
  // exactly one report() for it.
  Pick pick(TimePoint now, Random& rng, uint64_t tried, uint32_t previous);
  Report report(uint32_t member, Result r, TimePoint now, Clock::duration latency);
  Report check(uint32_t member, bool passed, TimePoint now);  // an active health check's verdict

  // DNS: the addresses (IP text, no port) endpoint `endpoint` resolves to now.
  // When the answer holds IPv4 addresses, its IPv6 addresses are no members
  // (they are the name's fallback after a connect failure).
  void set_addresses(uint32_t endpoint, const std::vector<std::string>& answer);

  std::string_view label(uint32_t member) const;
  // Present members, for gauges and health checks.
  std::vector<MemberView> members() const;

 private:
  struct Member {
    uint32_t endpoint;
    std::string label;
    std::string address;  // "" for a DNS name not resolved yet
  };
  void add_member(uint32_t endpoint, std::string label, std::string address);

  mutable std::mutex mu_;
  std::vector<HostPort> endpoints_;
  Balance balance_;
  std::vector<Member> members_;  // reserved to kMaxMembers: never reallocates
  EndpointBalancer balancer_;
  OutlierDetector detector_;
};

}  // namespace onelayer
