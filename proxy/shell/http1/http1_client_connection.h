// One upstream connection: connect with a timeout, the request's bytes out,
// the response parsed and handed to the attempt's exchange, then back to its
// endpoint's keep-alive pool (or closed).
#pragma once

#include <memory>
#include <string>

#include "core/base/clock.h"
#include "shell/io/conn.h"
#include "shell/http1/http1_body_encoder.h"
#include "shell/http1/http_parser.h"
#include "shell/tls/tls_client_context.h"
#include "shell/stream/upstream_handover.h"
#include "shell/stream/upstream_stream.h"

namespace onelayer {

class EndpointPool;

// The HTTP/1 codec of an upstream attempt: one keep-alive connection serves
// one attempt at a time as its UpstreamStream.
class Http1ClientConnection final : public Conn, public UpstreamStream, private HttpParser::Handler {
 public:
  // `addr_index`: the address of the endpoint to connect to (the balancer's
  // pick), -1 for the endpoint's sticky one.
  // `fresh`: a new TCP connection (counted in upstream_connections_total);
  // false for one taken over, counted already. `handover`: where it goes
  // when an `auto` upstream's handshake chooses h2.
  Http1ClientConnection(ConnectionHost* w, EndpointPool* ep, int addr_index, UpstreamHandover* handover, bool fresh = true);
  // An `auto` upstream's HTTP/2 connection whose handshake chose http/1.1:
  // its socket `s` (the descriptor now this connection's, and the
  // established TLS channel) carries on as HTTP/1.1. start_taken_over(),
  // once an attempt is attached, tells it the request can go.
  static Http1ClientConnection* take_over(UpstreamHandover::Socket s, UpstreamHandover* handover);
  void start_taken_over(const std::string& early) override;
  // The TLS channel goes before its context (a member of this class, so
  // otherwise freed first).
  ~Http1ClientConnection() override;

  void connect(Millis timeout);
  void start_connect();  // once an address is known
  void fail_dns(int err);
  void fail_dns_later(int err);
  // The connection now serves `rx`'s attempt; `head_request`: the response
  // has no body whatever its head says.
  void attach(UpstreamStream::Receiver* rx, bool head_request);

  // UpstreamStream.
  bool ready() const override { return connected_; }
  bool closing() const override { return Conn::closing(); }
  Millis connect_timeout() const override { return connect_timeout_; }
  int send_request(const OutgoingRequest& req) override;
  void send_request_body(std::string_view bytes) override;
  void send_request_end() override;
  void send_request_trailers(const Headers& trailers) override;
  size_t queued_bytes() const override { return write_queue(); }
  void pause_response() override { pause_reading(); }
  void resume_response() override { resume_reading(); }
  void release(bool reusable) override;
  void cancel(bool reset) override { detach_and_close(reset); }
  Http1ClientConnection* http1_connection() override { return this; }

  // `reset`: the peer gets a TCP RST (a request cut short must never look
  // like a clean end to it).
  void detach_and_close(bool reset = false);
  void release_to_pool();
  // Out of the pool for an attempt (take_idle).
  void leave_pool();
  // An idle connection of `ep`'s pool to address `addr` (-1: any), out of
  // the pool and ready for an attempt; null when there is none. With
  // reuse_safe, only one whose last request came on `client` (a client
  // connection, DownstreamStream::client_connection; 0 takes none).
  // `oldest`: the one pooled first, whatever its client (to make room).
  static Http1ClientConnection* take_idle(EndpointPool& ep, int addr, uint64_t client, bool oldest = false);
  // The endpoint's label (logs).
  const std::string& endpoint_label() const;
  // A tunnel's end: lets go of the exchange; closes once queued bytes are out.
  void close_when_flushed();
  // TLS (the upstream has a `tls` block): the context a new connection
  // handshakes with; a pooled one made with another context is not reused.
  void use_tls(std::shared_ptr<TlsClientContext> ctx) { tls_ctx_ = std::move(ctx); }
  // An `auto` upstream's connection for a request only HTTP/1.1 can carry:
  // its handshake offers http/1.1 alone (and teaches the endpoint nothing).
  void offer_http1_only() { http1_only_ = true; }
  const TlsClientContext* tls_context() const { return tls_ctx_.get(); }
  // The handshake after the TCP connect, within what is left of
  // connect_timeout; its end (Conn::tls_pump); errors after it.
  void start_tls();
  void on_tls_handshake(bool ok);
  void on_tls_error();

  void on_read(ssize_t nread, const uv_buf_t* buf);
  void on_write_done(int status) override;
  void pause_reading();
  void resume_reading();

  int addr_used() const { return addr_used_; }

 private:
  int on_head(MessageHead& head) override;
  int on_body(const char* data, size_t len) override;
  void on_trailers(Headers& trailers) override;
  int on_message_end() override;
  // An `auto` upstream's handshake chose h2: the socket and its TLS channel
  // go to a new HTTP/2 connection (handover_), and the attempt becomes a
  // stream on it. Waits for the handshake's last bytes to leave this handle
  // first (both handles write the same socket); plaintext read meanwhile
  // waits in `early_`.
  void hand_over_to_h2();
  void finish_h2_handover();
  // Before the handover: the peer closed, or TLS failed.
  void fail_handover(const std::string& why);

  EndpointPool* ep_;
  std::shared_ptr<TlsClientContext> tls_ctx_;  // set when the upstream has `tls`
  UpstreamHandover* handover_;                 // to HTTP/2 when the handshake chose h2
  uint64_t connect_started_ = 0;               // uv_now() when the connect began
  UpstreamStream::Receiver* ex_ = nullptr;  // the attempt's exchange
  HttpParser parser_;
  Http1BodyEncoder body_;  // the request body's framing
  uv_connect_t connect_req_;
  bool connected_ = false;
  bool idle_ = false;
  bool head_seen_ = false;
  bool tunnel_ = false;  // after a 101, bytes go to the exchange's tunnel
  bool upgrade_asked_ = false;  // the request asked for an Upgrade
  bool close_when_flushed_ = false;
  bool keep_alive_ = true;
  uint32_t requests_ = 0;        // requests sent on this connection
  bool expect_no_body_ = false;  // HEAD request
  bool informational_ = false;   // a 1xx response is being skipped
  bool message_done_ = false;
  bool reading_ = false;
  bool http1_only_ = false;  // see offer_http1_only
  bool handing_over_ = false;  // hand_over_to_h2 waits for the write queue
  std::string early_;          // plaintext read while handing over
  Millis connect_timeout_{1000};
  int addr_index_ = -1;  // index into ep_->addrs to use (the balancer's pick); -1: the sticky one
  int addr_used_ = -1;   // the index it connected to
  uint64_t client_connection_ = 0;
  int dns_error_ = 0;    // reported by fail_dns_later
  int open_error_ = 0;   // take_over could not open the socket
};

// An attempt's HTTP/1.1 connection to `ep`'s address `addr`: an idle pooled
// one made with `tls`, else a new one made with `handover` (`http1_only`:
// see offer_http1_only).
UpstreamStream* open_http1_stream(ConnectionHost* w, EndpointPool* ep, int addr, const std::shared_ptr<TlsClientContext>& tls,
                                  UpstreamStream::Receiver* r, bool head_request, Millis connect_timeout,
                                  UpstreamHandover* handover, bool http1_only = false);

}  // namespace onelayer
