// One upstream endpoint as one worker sees it: its resolved addresses (the
// worker's DNS cache, refreshed in the background) and its pool of idle
// keep-alive connections. A record owned by the Worker; its few operations
// are named below.
#pragma once

#include <netdb.h>
#include <sys/socket.h>
#include <uv.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/clock.h"
#include "core/config/config.h"

namespace onelayer {

class H2ClientConnection;
class Http1ClientConnection;
class ConnectionHost;

// A lookup's answer as an endpoint keeps it: IPv4 and IPv6 addresses,
// IPv4 first, each family in the resolver's order.
std::vector<sockaddr_storage> resolved_addresses(const addrinfo* res);

struct EndpointState {
  // What an `auto` upstream's TLS handshake (ALPN) last chose at this
  // endpoint: later attempts go to that protocol's pool without a
  // handshake to learn it; a connection that negotiates otherwise updates it.
  enum class Alpn : uint8_t { unknown, http1, h2 };

  HostPort hp;
  std::string label;  // hp.to_string(), for logs and Host
  std::string key;
  bool literal = false;
  std::vector<sockaddr_storage> addrs;  // IPv4 first (resolved_addresses)
  // A DNS name: how many of addrs the balancer takes (its IPv4 addresses,
  // or all when it has none); the rest (IPv6) are the fallback a connect
  // failure goes on to within the same attempt.
  size_t balanced = 0;
  TimePoint resolved_at{};
  bool resolving = false;
  int last_resolve_error = 0;
  uint32_t max_idle = 64;
  Millis idle_timeout{60'000};
  uint32_t max_concurrent_streams = 1000;  // per HTTP/2 connection (pool.max_concurrent_streams)
  uint32_t max_requests_per_connection = 0;  // pool.max_requests_per_connection (0: no limit)
  bool reuse_safe = true;                    // the upstream's `reuse: safe`
  std::vector<Http1ClientConnection*> idle;
  std::vector<uint64_t> idle_clients;  // idle[i]'s last client connection (pool() and unpool() keep both)
  std::vector<Http1ClientConnection*> waiting;  // connections waiting for DNS
  std::vector<H2ClientConnection*> h2;     // HTTP/2 connections (h2_client_connection.h), in use or idle
  // HTTP/2 connections opened so far (each one's serial), and how many had
  // been opened when the peer last refused streams (GOAWAY, REFUSED_STREAM):
  // a connection whose serial is above the mark was opened since then.
  uint64_t h2_opened = 0;
  uint64_t h2_refusal_mark = 0;
  // The stream limit the endpoint's last HTTP/2 SETTINGS gave (0: none yet).
  uint32_t h2_peer_stream_limit = 0;
  Alpn alpn = Alpn::unknown;     // `auto` upstreams only
  // Original destinations (Worker::destination_endpoint): upstream
  // connections alive and exchanges that picked it; the worker's bounded
  // table drops an entry only when both are 0.
  uint32_t connections = 0;
  uint32_t holds = 0;
  uv_getaddrinfo_t gai_req;
  ConnectionHost* host = nullptr;  // whose loop resolves the name
  size_t next_addr = 0;
  // DNS names: addrs as IP text, so a balancer member (one address) finds
  // its index; handed to the upstream's UpstreamEndpoints when it changes.
  std::vector<std::string> addr_text;
  uint64_t addrs_version = 0;
  const void* synced_to = nullptr;
  uint64_t synced_version = 0;

  // A DNS name whose addresses are missing or older than the refresh
  // interval: starts a lookup unless one runs (waiting connections are
  // connected, or failed, when it ends).
  void refresh_addresses();
  // An idle pooled connection to address `addr` (-1: any), out of the pool
  // and ready for an attempt; null when there is none. With reuse_safe,
  // only one whose last request came on `client` (a client connection,
  // DownstreamStream::client_connection; 0 takes none). `oldest`: the one
  // pooled first, whatever its client (to make room).
  Http1ClientConnection* take_idle(int addr, uint64_t client, bool oldest = false);
  // Forgets `u` in the pool and the DNS wait list.
  void forget(Http1ClientConnection* u);
  // Into the pool, its last request having come on client connection `client`.
  void pool(Http1ClientConnection* u, uint64_t client);
  void unpool(size_t k);  // idle[k] out of the pool
  // An `auto` connection's handshake chose `chosen` (logged when it changes).
  void learn_alpn(Alpn chosen);
};

}  // namespace onelayer
