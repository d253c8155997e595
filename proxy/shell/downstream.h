// One client connection: read, parse, validate, route; one exchange at a
// time, pipelining, keep-alive, header and idle timeouts, refusals, drain.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "shell/conn.h"
#include "shell/http_codec.h"

namespace onelayer {

class Exchange;
class WorkerListener;
struct RouteMetrics;

class DownConn final : public Conn, private HttpParser::Handler {
 public:
  DownConn(Worker* w, WorkerListener* l);
  ~DownConn() override;
  void start();

  void on_read(ssize_t nread, const uv_buf_t* buf);
  void on_write_done(int status) override;
  void on_closed() override;  // leaves the worker's list and its listener's count

  // From the exchange.
  void exchange_done(bool close_after);
  void abort_connection(const char* reason = "client_closed");
  // Backpressure: the upstream cannot take the body as fast as it comes.
  void hold_reading();
  void release_reading();
  bool reading_held() const { return !want_read_; }
  // The connection closes after this response (Connection: close, HTTP/1.0,
  // drain, errors); close_after_response() decides so.
  bool closes_after_response() const { return close_after_; }
  void close_after_response() { close_after_ = true; }
  const std::string& peer_ip() const { return peer_ip_; }
  Exchange* exchange() const { return ex_.get(); }
  // What a response that keeps the connection open must say: an HTTP/1.0
  // client is told "Connection: keep-alive", an HTTP/1.1 one nothing.
  std::string_view keep_alive_header() const {
    return http10_ && !close_after_ ? "Connection: keep-alive\r\n" : "";
  }
  // Upgrade tunnels (after a 101): the connection's bytes go to the
  // exchange's tunnel; bytes the client sent early are handed over once.
  void enter_tunnel() { tunnel_ = true; }
  void take_pending_input(std::string& out) {
    if (pending_in_) out.swap(*pending_in_);
  }
  bool saw_eof() const { return eof_; }
  // A TLS listener's handshake end and errors (Conn::tls_pump).
  void on_tls_handshake(bool ok);
  void on_tls_error();

  // From the worker.
  void drain();
  WorkerListener* listener() const { return listener_; }
  // The worker's intrusive list of its connections (`tracked` lives with
  // the connection's other flags, so idle connections pay no padding).
  struct Link {
    DownConn* prev = nullptr;
    DownConn* next = nullptr;
  };
  bool tracked() const { return tracked_; }
  void set_tracked(bool t) { tracked_ = t; }
  Link& worker_link() { return link_; }

 private:
  int on_head(MessageHead& head) override;
  int on_body(const char* data, size_t len) override;
  int on_message_end() override;

  static void on_head_or_idle_timeout(uv_timer_t* t);
  static void on_resume_timer(uv_timer_t* t);
  void process_input(const char* data, size_t len);
  // `extra`: raw header lines for the answer; `counted_in`: the route's
  // metrics when a route matched (else the listener's unrouted ones).
  // `hint`: a sentence for the answer's body that says what to do instead.
  void reject(int status, const char* reason, bool close_after, const char* log_detail,
              std::string_view extra = {}, RouteMetrics* counted_in = nullptr, const char* hint = nullptr);
  void close_when_flushed();
  void arm_idle_timer();
  void arm_header_timer();
  void pause_reading();
  void resume_reading();
  void account_in(size_t n);
  void buffer_pipelined(const char* data, size_t len);

  WorkerListener* listener_;  // outlives its connections (it frees itself after the last)
  HttpParser parser_;
  std::unique_ptr<std::string> pending_in_;  // bytes after a paused (pipelined) message; rare
  std::unique_ptr<Exchange> ex_;
  std::string peer_ip_;
  Link link_;
  bool tracked_ = false;
  bool reading_ = false;
  bool want_read_ = true;       // backpressure may turn this off
  bool close_after_ = false;    // Connection: close, HTTP/1.0 without keep-alive, drain, errors
  bool http10_ = false;         // the current request is HTTP/1.0
  bool close_pending_ = false;  // close once the write queue drains
  bool eof_ = false;
  bool in_exchange_ = false;
  bool tunnel_ = false;  // after a 101, bytes go to the exchange's tunnel
};

}  // namespace onelayer
