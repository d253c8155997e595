// One request's exchange as the server codec that read the request sees
// it: the codec feeds it the request (body, trailers, end), tells it when
// the client took bytes or went away, and reads two facts back. The
// exchange answers through the codec's DownstreamStream. shell/proxy's
// Exchange implements this; an ExchangeStarter makes it.
#pragma once

#include <uv.h>

#include <cstddef>

#include "core/http/http_headers.h"

namespace onelayer {

class RequestExchange {
 public:
  virtual ~RequestExchange() = default;

  // Runs the exchange. Made first and started apart, so the codec holds it
  // before the exchange's first call back (which may end it).
  virtual void start() = 0;
  virtual void on_request_body(const char* data, size_t len) = 0;
  // The request's trailers (a chunked body's trailer section, an HTTP/2
  // trailing HEADERS), before on_request_end.
  virtual void on_request_trailers(const Headers& trailers) = 0;
  virtual void on_request_end() = 0;
  // The client took written bytes (DownstreamStream::notify_when_drained).
  virtual void on_down_drained() = 0;
  // `n` bytes of the response body left the downstream's queue
  // (DownstreamStream::reports_body_sent).
  virtual void on_down_body_sent(size_t n) = 0;
  // The request turned out malformed after its head was taken: answered here.
  virtual void refuse_request(int status, const char* reason, const char* detail) = 0;
  // The client went away, or drain cut the exchange.
  virtual void abort(const char* reason = "client_closed") = 0;
  // After a 101 (HTTP/1 Upgrade): what the client connection read.
  virtual void on_tunnel_down(ssize_t nread, const uv_buf_t* buf) = 0;
  virtual bool response_started() const = 0;
  virtual bool request_complete() const = 0;
};

}  // namespace onelayer
