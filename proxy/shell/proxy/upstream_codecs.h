// The upstream side's two codecs behind one UpstreamStreamFactory: for each
// attempt it picks HTTP/1.1 (shell/http1) or HTTP/2 (shell/http2) from the
// upstream's `protocol` and, for `auto`, from what the endpoint's TLS
// handshakes chose so far; and it moves a connection from one codec to the
// other when a handshake chose the other (UpstreamHandover). The codecs
// know neither each other nor this class, only the handover it gives the
// connections it makes. It holds no state: one serves every worker.
#pragma once

#include "shell/proxy/upstream_stream_factory.h"
#include "shell/stream/upstream_handover.h"

namespace onelayer {

class UpstreamCodecs final : public UpstreamStreamFactory, public UpstreamHandover {
 public:
  static UpstreamCodecs& instance();

  // UpstreamStreamFactory.
  UpstreamStream* open(ConnectionHost* w, EndpointState* ep, const Upstream& upstream, int addr,
                       const std::shared_ptr<TlsClientContext>& tls, UpstreamStream::Receiver* r, bool head_request,
                       Millis connect_timeout) override;

  // UpstreamHandover.
  UpstreamStream* continue_as_h2(Socket s, Millis time_left, UpstreamStream::Receiver* r,
                                 bool head_request) override;
  UpstreamStream* continue_as_http1(Socket s, UpstreamStream::Receiver* r, bool head_request) override;
  UpstreamStream* open_http1(ConnectionHost* w, EndpointPool* ep, int addr, const std::shared_ptr<TlsClientContext>& tls,
                             UpstreamStream::Receiver* r, bool head_request, Millis connect_timeout) override;
};

}  // namespace onelayer
