// One upstream connection: connect with a timeout, the request's bytes out,
// the response parsed and handed to the attempt's exchange, then back to its
// endpoint's keep-alive pool (or closed).
#pragma once

#include <memory>
#include <string>

#include "core/clock.h"
#include "shell/conn.h"
#include "shell/http_codec.h"
#include "shell/tls_context.h"

namespace onelayer {

class Exchange;
struct EndpointState;

class UpConn final : public Conn, private HttpParser::Handler {
 public:
  // `addr_index`: the address of the endpoint to connect to (the balancer's
  // pick), -1 for the endpoint's sticky one.
  UpConn(Worker* w, EndpointState* ep, int addr_index);
  // The TLS channel goes before its context (a member of this class, so
  // otherwise freed first).
  ~UpConn() override { tls_.reset(); }

  void connect(Millis timeout);
  void start_connect();  // once an address is known
  void fail_dns(int err);
  // The connection now serves `ex`'s attempt; `head_request`: the response
  // has no body whatever its head says.
  void attach(Exchange* ex, bool head_request);
  // `reset`: the peer gets a TCP RST (a request cut short must never look
  // like a clean end to it).
  void detach_and_close(bool reset = false);
  void release_to_pool();
  // Out of the pool for an attempt (EndpointState::take_idle).
  void leave_pool();
  // A tunnel's end: lets go of the exchange; closes once queued bytes are out.
  void close_when_flushed();
  // TLS (the upstream has a `tls` block): the context a new connection
  // handshakes with; a pooled one made with another context is not reused.
  void use_tls(std::shared_ptr<TlsClientContext> ctx) { tls_ctx_ = std::move(ctx); }
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

  bool connected() const { return connected_; }
  int addr_used() const { return addr_used_; }
  Millis connect_timeout() const { return connect_timeout_; }

 private:
  int on_head(MessageHead& head) override;
  int on_body(const char* data, size_t len) override;
  int on_message_end() override;

  EndpointState* ep_;
  std::shared_ptr<TlsClientContext> tls_ctx_;  // set when the upstream has `tls`
  uint64_t connect_started_ = 0;               // uv_now() when the connect began
  Exchange* ex_ = nullptr;
  HttpParser parser_;
  uv_connect_t connect_req_;
  bool connected_ = false;
  bool idle_ = false;
  bool head_seen_ = false;
  bool tunnel_ = false;  // after a 101, bytes go to the exchange's tunnel
  bool close_when_flushed_ = false;
  bool keep_alive_ = true;
  bool expect_no_body_ = false;  // HEAD request
  bool informational_ = false;   // a 1xx response is being skipped
  bool message_done_ = false;
  bool reading_ = false;
  Millis connect_timeout_{1000};
  int addr_index_ = -1;  // index into ep_->addrs to use (the balancer's pick); -1: the sticky one
  int addr_used_ = -1;   // the index it connected to
};

}  // namespace onelayer
