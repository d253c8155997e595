// Transparent passthrough: a connection of a transparent listener that does
// not speak HTTP/1.x or h2c (TLS, another protocol, a server that speaks
// first) is tunnelled byte for byte to its original destination, as an
// Upgrade tunnel is after its 101 (shell/http1/http1_tunnel.h: the same write step and
// high water). Each side's reading stops while the other side's write
// queue is above high water and resumes below low water; an EOF is passed
// on as a half-close (shutdown), so protocols that close one way first
// work; the tunnel ends when both ways are shut, on a reset or error of
// either side, or after the listener's idle_timeout without a byte. Never
// retried: once bytes have gone, only the app can tell what they meant.
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>

#include "core/base/destination.h"

namespace onelayer {

class Http1ServerConnection;
class ConnectionHost;

class Passthrough {
 public:
  Passthrough(Http1ServerConnection* client, ConnectionHost* host, const Destination& dst, uint64_t idle_ms);
  ~Passthrough();  // closes the destination side
  Passthrough(const Passthrough&) = delete;
  Passthrough& operator=(const Passthrough&) = delete;

  // Connects to the destination; `early` (the bytes read while detecting)
  // goes first once connected, then the client's EOF if it had sent one
  // (`client_eof`). The client's reading is held until then.
  void start(std::string early, bool client_eof);
  // From the client connection: its reads and its completed writes.
  void from_client(ssize_t nread, const uv_buf_t* buf);
  void client_drained();

 private:
  class Dest;
  void on_connected(int status);
  void from_dest(ssize_t nread, const uv_buf_t* buf);
  void dest_drained(int status);
  void dest_closed();
  void end(const char* why);
  void maybe_done();
  void rearm_idle();

  Http1ServerConnection* client_;
  ConnectionHost* host_;
  Dest* dest_ = nullptr;
  Destination dst_;
  uint64_t idle_ms_;
  std::string early_;
  uv_shutdown_t client_shutdown_;
  bool connected_ = false;
  bool client_eof_ = false;
  bool dest_eof_ = false;
  bool client_shut_ = false;  // the client was sent the destination's EOF
  bool dest_shut_ = false;    // the destination was sent the client's EOF
  bool dest_paused_ = false;
};

}  // namespace onelayer
