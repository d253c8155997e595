// What an exchange needs of one upstream attempt's stream, whatever the
// protocol: an HTTP/1.1 connection of the endpoint's keep-alive pool
// (Http1ClientConnection) or one stream of a multiplexed HTTP/2 connection
// (H2ClientStream).
// The exchange hands over the request and hears the response through the
// Receiver; framing, pooling and connection reuse are the codec's.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/base/clock.h"
#include "core/http/http_headers.h"

namespace onelayer {

class Http1ClientConnection;
struct MessageHead;
struct RequestRewrite;

// One attempt's request as the exchange gives it to the stream.
struct OutgoingRequest {
  const MessageHead* head = nullptr;  // method, fields as received, framing facts
  std::string_view target;            // the request target to send
  const RequestRewrite* rewrite = nullptr;  // the fields onelayer writes (retry protocol, Via, ...)
  std::string_view default_host;      // Host / :authority when the request had none
  std::string_view upgrade;           // Upgrade protocols ("": no upgrade)
  bool has_body = false;              // a body follows (or is in `body`)
  std::string_view body;              // body bytes to send with the head
  bool end = false;                   // `body` is the whole body
  const Headers* trailers = nullptr;  // with `end`: the request's trailers (null: none)
};

class UpstreamStream {
 public:
  // The exchange's side: the stream's events. Callbacks may call back into
  // the stream (send, pause, finish, cancel).
  class Receiver {
   public:
    virtual ~Receiver() = default;
    virtual void on_connected() = 0;                   // the request can go now
    // The attempt goes on as `s` before anything was sent: an `auto`
    // upstream's connection negotiated h2 (ALPN), so the attempt became a
    // stream of the HTTP/2 connection that took the socket over. The old
    // stream is gone; on_connected (or a failure) comes from `s`.
    virtual void on_stream_moved(UpstreamStream* s) = 0;
    // The request can go over HTTP/1.1 only (an Upgrade): an `auto`
    // upstream's new connection then offers ALPN http/1.1 alone.
    virtual bool needs_http1() const { return false; }
    // The attempt follows one whose HTTP/2 stream the upstream refused: it
    // goes on a connection opened since the endpoint's latest refusal.
    virtual bool follows_refusal() const { return false; }
    // The request-timeout header's name in the config the attempt runs
    // under: a new HTTP/2 connection made for it never indexes that header
    // (asked only when a connection is made).
    virtual std::string_view request_timeout_header() const = 0;
    // The exchange gives an HTTP/2 response's window back itself, by
    // response_body_sent() as the client takes the body; otherwise the
    // stream does as soon as on_up_body() has taken the bytes.
    virtual bool reopens_response_window() const { return false; }
    // The client connection the request came on (DownstreamStream's; 0:
    // unknown), for `reuse: safe`.
    virtual uint64_t client_connection() const { return 0; }
    virtual void on_connect_failed(int err, bool dns) = 0;
    // TLS handshake failed (`verify`: the certificate did not verify).
    virtual void on_tls_failed(const std::string& why, bool verify) = 0;
    // The final response head (1xx skipped). 0 go on, 1 no body follows,
    // -1 stop: the exchange has let go of the stream already (a retry, or
    // it answered the client itself); the codec stops reading it.
    virtual int on_up_head(MessageHead& head) = 0;
    virtual int on_up_body(const char* data, size_t len) = 0;  // 0, or -1 to stop
    virtual void on_up_trailers(Headers& trailers) = 0;
    // The response is complete; `reusable`: the connection may serve again.
    virtual void on_up_end(bool reusable) = 0;
    virtual void on_up_error(int err) = 0;  // reset, EOF, write error
    // HTTP/2: the upstream refused the stream (REFUSED_STREAM, or above a
    // GOAWAY's last-stream-id): the request never reached the application.
    virtual void on_up_refused() = 0;
    virtual void on_up_tls_error(const std::string& why) = 0;
    virtual void on_up_bad_response() = 0;
    // The stream's queued request bytes went out (backpressure release).
    virtual void on_up_drained() = 0;
    // The end of one read: a response head held back goes downstream now.
    virtual void on_up_read_done() = 0;
    // HTTP/1 upgrade tunnels (a request sent with `upgrade`): the 101 head
    // (0 go on, -1 refuse: a bad response), the bytes after it, then every
    // read of the tunnel (nread < 0: its end). Only the exchange tunnels.
    virtual int on_up_switching(MessageHead&) { return -1; }
    virtual void start_tunnel(const char*, size_t) {}
    virtual void on_tunnel_up(ssize_t, const uv_buf_t*) {}
  };

  virtual ~UpstreamStream() = default;

  // The request may be sent (connected; for HTTP/2 a stream may be opened).
  virtual bool ready() const = 0;
  virtual bool closing() const = 0;
  // The connect timeout this stream's connection was given (black-hole test).
  virtual Millis connect_timeout() const = 0;
  // Head and the body bytes given with it. <0: a libuv error (write failed).
  virtual int send_request(const OutgoingRequest& req) = 0;
  virtual void send_request_body(std::string_view bytes) = 0;
  virtual void send_request_end() = 0;
  // The request's trailers (filtered: rewrite_trailers), then its end. A
  // framing that cannot carry them (HTTP/1.1 with Content-Length) just ends.
  virtual void send_request_trailers(const Headers&) { send_request_end(); }
  virtual size_t queued_bytes() const = 0;
  // Backpressure on the response (the client reads slowly).
  virtual void pause_response() = 0;
  virtual void resume_response() = 0;
  // `n` bytes of the response body went on to the client
  // (Receiver::reopens_response_window): HTTP/2 reopens the stream's
  // window by as much; HTTP/1.1 has no window.
  virtual void response_body_sent(size_t /*n*/) {}
  // After on_up_end: the stream is done; `reusable` (the whole request went
  // and the response ended cleanly): its connection goes back to the pool.
  // The stream object is gone after this call.
  virtual void release(bool reusable) = 0;
  // The attempt is abandoned: HTTP/1 closes the connection (`reset`: with a
  // TCP RST), HTTP/2 resets the stream (CANCEL). Gone after this call.
  virtual void cancel(bool reset = false) = 0;

  // The HTTP/1 connection behind this stream (upgrade tunnels), else null.
  virtual Http1ClientConnection* http1_connection() { return nullptr; }

  // A stream UpstreamHandover returned: its connection, which took over
  // another's socket, starts (HTTP/2: sends its preface, then reads `early`,
  // the plaintext that came before the switch; HTTP/1.1: tells the attempt
  // it may send). Others never get this call.
  virtual void start_taken_over(const std::string& /*early*/) {}
};

}  // namespace onelayer
