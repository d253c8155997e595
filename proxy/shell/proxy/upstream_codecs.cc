#include "shell/proxy/upstream_codecs.h"

#include "core/config/config.h"
#include "shell/http1/http1_client_connection.h"
#include "shell/http2/h2_client_connection.h"
#include "shell/proxy/endpoint_state.h"

namespace onelayer {

namespace {
UpstreamCodecs codecs;  // stateless: made before main, nothing uses it earlier
}  // namespace

UpstreamCodecs& UpstreamCodecs::instance() { return codecs; }

UpstreamStream* UpstreamCodecs::open(ConnectionHost* w, EndpointState* ep, const Upstream& upstream, int addr,
                                     const std::shared_ptr<TlsClientContext>& tls, UpstreamStream::Receiver* r,
                                     bool head_request, Millis connect_timeout) {
  if (upstream.protocol == UpstreamProtocol::h2c || upstream.protocol == UpstreamProtocol::h2)
    return open_h2_upstream_stream(w, ep, addr, tls, r, head_request, connect_timeout, this);
  // `auto`: the protocol the endpoint's handshakes chose last. Unknown (or
  // http/1.1), a new connection offers both and may still turn HTTP/2.
  const bool negotiates = upstream.protocol == UpstreamProtocol::auto_ && tls;
  if (negotiates && ep->alpn == EndpointState::Alpn::h2 && !r->needs_http1())
    return open_h2_upstream_stream(w, ep, addr, tls, r, head_request, connect_timeout, this);
  return open_http1_stream(w, ep, addr, tls, r, head_request, connect_timeout, this, negotiates && r->needs_http1());
}

UpstreamStream* UpstreamCodecs::continue_as_h2(Socket s, Millis time_left, UpstreamStream::Receiver* r,
                                               bool head_request) {
  return H2ClientConnection::take_over(std::move(s), time_left, this, r->request_timeout_header())->new_stream(r, head_request);
}

UpstreamStream* UpstreamCodecs::continue_as_http1(Socket s, UpstreamStream::Receiver* r, bool head_request) {
  Http1ClientConnection* c = Http1ClientConnection::take_over(std::move(s), this);
  c->attach(r, head_request);
  return c;
}

UpstreamStream* UpstreamCodecs::open_http1(ConnectionHost* w, EndpointPool* ep, int addr,
                                           const std::shared_ptr<TlsClientContext>& tls, UpstreamStream::Receiver* r,
                                           bool head_request, Millis connect_timeout) {
  return open_http1_stream(w, ep, addr, tls, r, head_request, connect_timeout, this);
}

}  // namespace onelayer
