// One upstream endpoint as one worker sees it: its resolved addresses (the
// worker's DNS cache, refreshed in the background) and its pools of
// connections. What the client connections use of it is its EndpointPool
// base (shell/stream); what the exchange and the worker keep besides is
// here. A record owned by the Worker; its few operations are named below.
#pragma once

#include <netdb.h>
#include <sys/socket.h>
#include <uv.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/clock.h"
#include "core/config/config.h"
#include "shell/stream/endpoint_pool.h"

namespace onelayer {

class ConnectionHost;

// A lookup's answer as an endpoint keeps it: IPv4 and IPv6 addresses,
// IPv4 first, each family in the resolver's order.
std::vector<sockaddr_storage> resolved_addresses(const addrinfo* res);

struct EndpointState final : EndpointPool {
  std::string key;  // the worker's table's
  // A DNS name: how many of addrs the balancer takes (its IPv4 addresses,
  // or all when it has none); the rest (IPv6) are the fallback a connect
  // failure goes on to within the same attempt.
  size_t balanced = 0;
  TimePoint resolved_at{};
  // Original destinations (Worker::destination_endpoint): exchanges that
  // picked it; the worker's bounded table drops an entry only when this and
  // `connections` are 0.
  uint32_t holds = 0;
  uv_getaddrinfo_t gai_req;
  ConnectionHost* host = nullptr;  // whose loop resolves the name
  // DNS names: addrs as IP text, so a balancer member (one address) finds
  // its index; handed to the upstream's UpstreamEndpoints when it changes.
  std::vector<std::string> addr_text;
  uint64_t addrs_version = 0;
  const void* synced_to = nullptr;
  uint64_t synced_version = 0;

  // EndpointPool: a lookup on the host's loop (waiting connections are
  // connected, or failed, when it ends; HTTP/2 ones are told).
  void refresh_addresses() override;
};

}  // namespace onelayer
