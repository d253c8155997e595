// ProxyHost: what an exchange and its hedges need of the thread they run
// on, beyond a connection's I/O. The thread's ConnectionHost (the loop, the
// timer list the exchange's timers are entries of, the host its attempts'
// connections are made on), the runtime, the thread's random generator and
// where attempts get their upstream streams are plain references the owner
// fills once: reading them costs what reading the Worker's own members
// did. The endpoint tables are the owner's, and looked up through the two
// virtual calls below, once per attempt at most. In the proxy the Worker
// (shell/server) is the one host; tests of the exchange make their own.
#pragma once

#include <cstdint>

#include "core/base/default_random.h"
#include "core/base/destination.h"
#include "core/config/config.h"

namespace onelayer {

class ConnectionHost;
class Runtime;
class UpstreamStreamFactory;
struct EndpointState;

class ProxyHost {
 public:
  ProxyHost(const ProxyHost&) = delete;
  ProxyHost& operator=(const ProxyHost&) = delete;

  ConnectionHost& connection_host() const { return connection_host_; }
  Runtime& runtime() const { return runtime_; }
  DefaultRandom& random() const { return random_; }
  // Where attempts get their upstream streams (null: real connections,
  // UpstreamCodecs). Tests of the exchange install fakes.
  UpstreamStreamFactory* upstream_streams() const { return upstream_streams_; }
  void set_upstream_streams(UpstreamStreamFactory* f) { upstream_streams_ = f; }

  // `hp` (one of `u`'s endpoints) as this host's EndpointState. `generation`:
  // the id of the generation whose config holds `u`; a repeated lookup of
  // the same endpoint within it may skip building the key.
  virtual EndpointState* endpoint(const HostPort& hp, const Upstream& u, uint64_t generation) = 0;
  // An original destination (an `original_destination` upstream's attempt)
  // as this host's EndpointState. The host may drop entries no exchange
  // holds (EndpointState::holds) and no connection uses.
  virtual EndpointState* destination_endpoint(const Destination& d, const Upstream& u) = 0;

 protected:
  // `random` may be a member of the owner not constructed yet: it is only
  // bound here.
  ProxyHost(ConnectionHost& connection_host, Runtime& runtime, DefaultRandom& random)
      : connection_host_(connection_host), runtime_(runtime), random_(random) {}
  ~ProxyHost() = default;

 private:
  ConnectionHost& connection_host_;
  Runtime& runtime_;
  DefaultRandom& random_;
  UpstreamStreamFactory* upstream_streams_ = nullptr;
};

}  // namespace onelayer
