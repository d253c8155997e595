// Where an exchange's attempts get their upstream streams. The worker's
// default is UpstreamCodecs (real connections, HTTP/1.1 or HTTP/2 as the
// upstream asks); tests of the exchange install their own
// (ProxyHost::set_upstream_streams) and hand it fake streams.
#pragma once

#include <memory>

#include "core/base/clock.h"
#include "shell/stream/upstream_stream.h"

namespace onelayer {

class TlsClientContext;
class ConnectionHost;
struct EndpointState;
struct Upstream;

class UpstreamStreamFactory {
 public:
  virtual ~UpstreamStreamFactory() = default;
  // A stream for one attempt to `ep` (its address `addr`, -1: the sticky
  // one), for `upstream`'s protocol: a pooled connection when one is idle
  // (ready() at once; the caller sends), else a new connection whose
  // on_connected (or failure) comes later. `tls`: the context connections
  // handshake with (null: cleartext); pooled ones made with another are not
  // reused. `head_request`: the response has no body.
  virtual UpstreamStream* open(ConnectionHost* w, EndpointState* ep, const Upstream& upstream, int addr,
                               const std::shared_ptr<TlsClientContext>& tls, UpstreamStream::Receiver* r,
                               bool head_request, Millis connect_timeout) = 0;
};

}  // namespace onelayer
