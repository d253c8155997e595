// Optional active health checks (`upstreams[].health_check`), run on the
// main loop for the whole process: every `interval`, one HTTP GET of `path`
// to each member (address) of each upstream that enables them, on a
// connection of its own: HTTP/1.1, or HTTP/2 (H2HealthProbe) to h2c and h2
// upstreams and to `auto` ones whose handshake chose h2. A 2xx status
// within `timeout` passes, anything else (refused, reset, timeout, another
// status) fails. Verdicts go to the upstream's shared
// UpstreamEndpoints, which ejects after `unhealthy` failed checks in a row
// and returns after `healthy` passed ones.
#pragma once

#include <uv.h>

#include <map>
#include <set>
#include <memory>
#include <utility>

#include "shell/proxy/runtime.h"

namespace onelayer {

class HealthChecker {
 public:
  HealthChecker(uv_loop_t* loop, Runtime& rt);
  ~HealthChecker();
  void start();
  void close();  // stops the timer and cancels checks in flight

 public:
  struct Check;  // one check in flight (health_checker.cc)

 private:
  struct Target {
    TimePoint next{};
    bool in_flight = false;
  };
  using Key = std::pair<const UpstreamEndpoints*, uint32_t>;

  void tick();
  void launch(const Upstream& u, const std::shared_ptr<UpstreamEndpoints>& eps, const UpstreamEndpoints::MemberView& m,
              Target& t, const std::shared_ptr<TlsClientContext>& tls);
  void finished(Check* c, bool passed);

  uv_loop_t* loop_;
  Runtime& rt_;
  uv_timer_t timer_;
  bool closed_ = false;
  std::map<Key, Target> targets_;
  std::set<Check*> checks_;  // each frees itself once its handles have closed
};

}  // namespace onelayer
