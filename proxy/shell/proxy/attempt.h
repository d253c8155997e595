// One upstream attempt of an exchange: the upstream stream it writes to, the
// endpoint and balancer member it went to, when it began, and whether the
// whole request has gone to it. What spans attempts (the replay body, the
// retry state, the members tried, the response) stays in the Exchange.
#pragma once

#include <cstdint>

#include "core/base/clock.h"
#include "core/upstream/upstream_endpoints.h"

namespace onelayer {

class UpstreamStream;
struct EndpointState;

struct Attempt {
  UpstreamStream* stream = nullptr;          // null while backing off and once the response is done
  EndpointState* endpoint = nullptr;  // kept after the attempt, for logs and Host
  uint32_t member = UpstreamEndpoints::kNone;  // the balancer member, until its verdict is reported
  int address = -1;                   // the member's index in endpoint->addrs (-1: any)
  TimePoint started{};
  bool request_end_sent = false;      // the request's end went to `stream`
  size_t fallbacks = 0;               // a DNS name's fallback addresses tried after connect failures
  uint32_t number = 0;                // its x-retry-attempt number
  bool first = false;                 // the request's first attempt
  bool hedge = false;                 // a hedged attempt (shell/proxy/hedge_leg.h)

  // A new attempt to `ep` (its stream comes next).
  void begin(EndpointState* ep, uint32_t picked_member, int addr, TimePoint now) {
    endpoint = ep;
    member = picked_member;
    address = addr;
    started = now;
    request_end_sent = false;
    fallbacks = 0;
    number = 0;
    first = false;
    hedge = false;
  }
  bool verdict_owed() const { return member != UpstreamEndpoints::kNone; }
  // The member whose verdict is owed, once; kNone after.
  uint32_t take_member() {
    const uint32_t m = member;
    member = UpstreamEndpoints::kNone;
    return m;
  }
};

}  // namespace onelayer
