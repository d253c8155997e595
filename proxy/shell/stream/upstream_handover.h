// How an upstream connection whose TLS handshake chose the other HTTP
// version carries on as the other codec without knowing it. An `auto`
// upstream's HTTP/1.1 connection that negotiated h2 hands its socket to an
// HTTP/2 connection; an HTTP/2 one that negotiated http/1.1 hands it to an
// HTTP/1.1 connection, and its other waiting attempts go over HTTP/1.1
// connections of their own. shell/proxy's UpstreamCodecs implements this
// (it opens the streams in the first place); each client connection holds
// the handover it was made with.
#pragma once

#include <uv.h>

#include <memory>

#include "core/base/clock.h"
#include "shell/stream/upstream_stream.h"

namespace onelayer {

class TlsChannel;
class TlsClientContext;
class ConnectionHost;
class EndpointPool;

class UpstreamHandover {
 public:
  // A connected socket with its established TLS channel, given up by the
  // connection that made it: `fd` is a descriptor of its own for the taker.
  struct Socket {
    ConnectionHost* host = nullptr;
    EndpointPool* ep = nullptr;
    int addr_used = -1;  // the endpoint's address it is connected to
    std::shared_ptr<TlsClientContext> tls;
    std::unique_ptr<TlsChannel> channel;
    uv_os_sock_t fd = -1;
    Millis connect_timeout{0};  // as configured (what the streams report)
  };

  virtual ~UpstreamHandover() = default;

  // `s` goes on as an HTTP/2 connection whose first stream is `r`'s attempt
  // (returned). The peer's SETTINGS must come within `time_left`. Nothing
  // happens on it until the stream's start_taken_over(early), once the
  // attempt has moved to it (Receiver::on_stream_moved).
  virtual UpstreamStream* continue_as_h2(Socket s, Millis time_left, UpstreamStream::Receiver* r,
                                         bool head_request) = 0;
  // `s` goes on as an HTTP/1.1 connection serving `r`'s attempt (returned),
  // told it may send at start_taken_over().
  virtual UpstreamStream* continue_as_http1(Socket s, UpstreamStream::Receiver* r, bool head_request) = 0;
  // An HTTP/1.1 stream for an attempt that cannot ride a handed-over
  // socket: an idle pooled connection to `ep`'s address `addr` made with
  // `tls` (ready() at once), else a new one.
  virtual UpstreamStream* open_http1(ConnectionHost* w, EndpointPool* ep, int addr,
                                     const std::shared_ptr<TlsClientContext>& tls, UpstreamStream::Receiver* r,
                                     bool head_request, Millis connect_timeout) = 0;
};

}  // namespace onelayer
