// EndpointPool: one upstream endpoint as the client connections of one
// worker see it. Where to connect (its addresses, which its owner keeps up
// to date: refresh_addresses), the pool's settings, the idle HTTP/1.1
// connections and the HTTP/2 ones. The connections read and write these
// fields directly, as they did when they were EndpointState's (a pooled
// request costs no call more); only the lookup of a name's addresses,
// which wakes the connections of both codecs when it ends, is the owner's.
// shell/proxy's EndpointState derives from it and adds what the exchange
// and the worker keep of the endpoint (the balancer's view of its
// addresses, the table's key, the exchanges holding it).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/clock.h"
#include "core/config/config.h"

namespace onelayer {

class H2ClientConnection;
class Http1ClientConnection;

class EndpointPool {
 public:
  // What an `auto` upstream's TLS handshake (ALPN) last chose at this
  // endpoint: later attempts go to that protocol's pool without a
  // handshake to learn it; a connection that negotiates otherwise updates it.
  enum class Alpn : uint8_t { unknown, http1, h2 };

  EndpointPool(const EndpointPool&) = delete;
  EndpointPool& operator=(const EndpointPool&) = delete;

  HostPort hp;
  std::string label;  // hp.to_string(), for logs and Host
  bool literal = false;  // hp.host is an IP address: addrs holds it, no lookup
  std::vector<sockaddr_storage> addrs;  // IPv4 first (resolved_addresses)
  size_t next_addr = 0;  // the sticky address (an attempt with none of its own), advanced by a failed connect
  bool resolving = false;
  int last_resolve_error = 0;
  uint32_t max_idle = 64;
  Millis idle_timeout{60'000};
  uint32_t max_concurrent_streams = 1000;  // per HTTP/2 connection (pool.max_concurrent_streams)
  uint32_t max_requests_per_connection = 0;  // pool.max_requests_per_connection (0: no limit)
  bool reuse_safe = true;                    // the upstream's `reuse: safe`
  std::vector<Http1ClientConnection*> idle;
  std::vector<uint64_t> idle_clients;  // idle[i]'s last client connection (pool() and unpool() keep both)
  std::vector<Http1ClientConnection*> waiting;  // connections waiting for the lookup (refresh_addresses)
  std::vector<H2ClientConnection*> h2;     // HTTP/2 connections (h2_client_connection.h), in use or idle
  // HTTP/2 connections opened so far (each one's serial), and how many had
  // been opened when the peer last refused streams (GOAWAY, REFUSED_STREAM):
  // a connection whose serial is above the mark was opened since then.
  uint64_t h2_opened = 0;
  uint64_t h2_refusal_mark = 0;
  // The stream limit the endpoint's last HTTP/2 SETTINGS gave (0: none yet).
  uint32_t h2_peer_stream_limit = 0;
  Alpn alpn = Alpn::unknown;     // `auto` upstreams only
  // Upstream connections alive (an original destination's entry is
  // dropped only when none is left).
  uint32_t connections = 0;

  // A DNS name whose addresses are missing or older than the refresh
  // interval: starts a lookup unless one runs. When it ends, the owner
  // connects (or fails) the connections in `waiting` and tells each of
  // `h2` (H2ClientConnection::on_addresses_resolved).
  virtual void refresh_addresses() = 0;
  // Forgets `u` in the pool and the lookup's wait list.
  void forget(Http1ClientConnection* u);
  // Into the pool, its last request having come on client connection `client`.
  void pool(Http1ClientConnection* u, uint64_t client);
  void unpool(size_t k);  // idle[k] out of the pool
  // An `auto` connection's handshake chose `chosen` (logged when it changes).
  void learn_alpn(Alpn chosen);

 protected:
  EndpointPool() = default;
  ~EndpointPool() = default;
};

}  // namespace onelayer
