// Downstream connections, upstream connections and the exchange that ties a
// downstream request to its upstream attempts. Worker-thread only.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/http_headers.h"
#include "core/retry.h"
#include "core/upstream_endpoints.h"
#include "shell/http_codec.h"
#include "shell/tls_context.h"
#include "shell/worker.h"

namespace onelayer {

class Exchange;

// One upstream endpoint as seen by one worker: its resolved addresses and
// its pool of idle keep-alive connections.
struct EndpointState {
  HostPort hp;
  std::string label;  // hp.to_string(), for logs and Host
  std::string key;
  bool literal = false;
  std::vector<sockaddr_storage> addrs;
  TimePoint resolved_at{};
  bool resolving = false;
  int last_resolve_error = 0;
  uint32_t max_idle = 64;
  Millis idle_timeout{60'000};
  std::vector<UpConn*> idle;
  std::vector<UpConn*> waiting;  // connections waiting for DNS
  uv_getaddrinfo_t gai_req;
  Worker* worker = nullptr;
  size_t next_addr = 0;
  // DNS names: addrs as IP text, so a balancer member (one address) finds
  // its index; handed to the upstream's UpstreamEndpoints when it changes.
  std::vector<std::string> addr_text;
  uint64_t addrs_version = 0;
  const void* synced_to = nullptr;
  uint64_t synced_version = 0;
};

class UpConn final : public Conn, public HttpParser::Handler {
 public:
  UpConn(Worker* w, EndpointState* ep);
  // The TLS channel goes before its context (a member of this class, so
  // otherwise freed first).
  ~UpConn() override { tls_.reset(); }
  void connect(Millis timeout);
  void start_connect();  // once an address is known
  void attach(Exchange* ex) { ex_ = ex; }
  // `reset`: the peer gets a TCP RST (a request cut short must never look
  // like a clean end to it).
  void detach_and_close(bool reset = false);
  void release_to_pool();
  // TUNNEL HOOK: lets go of the exchange; closes once queued bytes are out.
  void close_when_flushed();
  void fail_dns(int err);

  int on_head(MessageHead& head) override;
  int on_body(const char* data, size_t len) override;
  int on_message_end() override;
  void on_write_done(int status) override;

  void on_read(ssize_t nread, const uv_buf_t* buf);
  void pause_reading();
  void resume_reading();
  // TLS HOOK (upstream): the handshake after the TCP connect, within what
  // is left of connect_timeout; its end (Conn::tls_pump); errors after it.
  void start_tls();
  void on_tls_handshake(bool ok);
  void on_tls_error();

  EndpointState* ep_;
  std::shared_ptr<TlsClientContext> tls_ctx_;  // set when the upstream has `tls`
  uint64_t connect_started_ = 0;               // uv_now() when the connect began
  Exchange* ex_ = nullptr;
  HttpParser parser_;
  uv_connect_t connect_req_;
  bool connected_ = false;
  bool idle_ = false;
  bool head_seen_ = false;
  bool tunnel_ = false;  // TUNNEL HOOK: after a 101, bytes go to the exchange's tunnel
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

class DownConn final : public Conn, public HttpParser::Handler {
 public:
  DownConn(Worker* w, WorkerListener* l);
  ~DownConn() override;
  void start();

  int on_head(MessageHead& head) override;
  int on_body(const char* data, size_t len) override;
  int on_message_end() override;
  void on_write_done(int status) override;

  void on_read(ssize_t nread, const uv_buf_t* buf);
  // TLS HOOK (downstream): a TLS listener's handshake end and errors.
  void on_tls_handshake(bool ok);
  void on_tls_error();
  void process_input(const char* data, size_t len);
  void exchange_done(bool close_after);
  void reject(int status, const char* reason, bool close_after, const char* log_detail,
              const char* hint = nullptr);
  // What a response that keeps the connection open must say: an HTTP/1.0
  // client is told "Connection: keep-alive", an HTTP/1.1 one nothing.
  std::string_view keep_alive_header() const {
    return http10_ && !close_after_ ? "Connection: keep-alive\r\n" : "";
  }
  void abort_connection(const char* reason = "client_closed");
  void close_when_flushed();
  void arm_idle_timer();
  void arm_header_timer();
  void pause_reading();
  void resume_reading();
  void drain();
  void account_in(size_t n);
  void buffer_pipelined(const char* data, size_t len);

  WorkerListener* listener_;  // outlives its connections (see Worker::close_listener)
  HttpParser parser_;
  std::unique_ptr<std::string> pending_in_;  // bytes after a paused (pipelined) message; rare
  std::unique_ptr<Exchange> ex_;
  std::string peer_ip_;
  DownConn* prev_ = nullptr;  // the worker's intrusive list of connections
  DownConn* next_ = nullptr;
  bool tracked_ = false;
  bool reading_ = false;
  bool want_read_ = true;       // backpressure may turn this off
  bool close_after_ = false;    // Connection: close, HTTP/1.0 without keep-alive, drain, errors
  bool http10_ = false;         // the current request is HTTP/1.0
  bool close_pending_ = false;  // close once the write queue drains
  bool eof_ = false;
  bool in_exchange_ = false;
  bool tunnel_ = false;  // TUNNEL HOOK: after a 101, bytes go to the exchange's tunnel
};

// One downstream request and all its upstream attempts.
class Exchange {
 public:
  Exchange(DownConn* d, GenerationPtr gen, int listener_index, const Route* route,
           RouteMetrics* rm, MessageHead& head, std::string routing_target);
  ~Exchange();

  void start();
  void on_request_body(const char* data, size_t len);
  void on_request_end();
  void on_down_drained();
  void on_up_drained();
  // The request turned out malformed or too large after its head was taken:
  // answer `status`/`reason` here. When bytes of it already went upstream
  // (a body past buffer_limit streams), that connection is reset, and the
  // answer (x-onelayer-forwarded: partial) and the log line say so.
  void refuse_request(int status, const char* reason, const char* detail);
  void abort(const char* reason = "client_closed");  // downstream went away, or drain cut it

  // From the upstream connection.
  void on_connected();
  void on_connect_failed(int err, bool dns);
  int on_up_head(MessageHead& head);
  int on_up_body(const char* data, size_t len);
  void on_up_end(bool reusable);
  void on_up_error(int err);  // reset/EOF/parse error
  void on_up_bad_response();
  // TLS: a handshake that failed (a certificate that does not verify is
  // final, 502 upstream_tls; anything else is a connect failure), and a TLS
  // error after it (treated as a reset; 502 upstream_tls when final).
  void on_tls_failed(const std::string& why, bool verify);
  void on_up_tls_error(const std::string& why);

  bool response_started() const { return response_started_; }

  // Upgrade tunnels (tunnel.cc). set_upgrade: the request asks to switch to
  // these protocols (check_upgrade). on_up_switching: the upstream's 101
  // head; start_tunnel: the bytes after it. From then on both connections'
  // bytes come here until either side closes or idles.
  void set_upgrade(std::string protocols) { upgrade_ = std::move(protocols); }
  bool wants_upgrade() const { return !upgrade_.empty(); }
  int on_up_switching(MessageHead& head);
  void start_tunnel(const char* data, size_t len);
  void on_tunnel_down(ssize_t nread, const uv_buf_t* buf);
  void on_tunnel_up(ssize_t nread, const uv_buf_t* buf);
  void flush_head();  // writes a response head still waiting for body bytes
  bool request_complete() const { return request_complete_; }

 private:
  void start_attempt();
  void send_head_and_body();
  void send_body_bytes(const char* data, size_t len);
  void send_request_end();
  void arm_timer(Millis ms, void (*cb)(uv_timer_t*));
  void stop_timer();
  static void on_attempt_timeout(uv_timer_t* t);
  static void on_backoff_done(uv_timer_t* t);
  static void on_stream_stalled(uv_timer_t* t);
  // Ends a failed attempt: timer off, breaker told, upstream let go. False
  // when response bytes already went downstream (the exchange is aborted).
  bool end_failed_attempt(int status, const char* reason,
                          UpstreamEndpoints::Result verdict = UpstreamEndpoints::Result::failure);
  void handle_failure(const AttemptResult& r, int status, const char* reason,
                      UpstreamEndpoints::Result verdict = UpstreamEndpoints::Result::failure);
  bool decide_retry(const AttemptResult& r);
  void respond_error(int status, const char* reason, std::string_view extra_headers = {});
  void start_when_body_buffered();
  static void on_body_deadline(uv_timer_t* t);
  void finish(bool close_after);
  void finish_aborted();
  void record(int status);
  void drop_upstream(bool reset = false);
  EndpointState* pick_endpoint(TimePoint now);
  // The attempt's verdict to the balancer, outlier detector and breaker.
  void end_attempt(UpstreamEndpoints::Result r);
  void cancel_member();  // the attempt ends without a verdict
  bool upstream_ready() const;
  // The Via member this listener writes ("" when `via: false`).
  std::string_view via_member() const { return cfg_->via_on(*lcfg_) ? "1.1 onelayer" : ""; }

  DownConn* down_;
  Worker* w_;
  GenerationPtr gen_;
  const Config* cfg_;
  const Listener* lcfg_;
  const Route* route_;
  const Upstream* ucfg_;
  UpstreamShared* ups_;
  UpstreamEndpoints* eps_;
  RouteMetrics* rm_;
  MessageHead req_;
  std::string target_;  // what the upstream gets as request target
  RetryOwnership ownership_;
  std::optional<RetryState> rs_;
  TimePoint started_;
  std::chrono::system_clock::time_point wall_start_;

  std::string body_;          // replay buffer, or unsent bytes once streaming
  size_t body_sent_ = 0;      // bytes of body_ written to the current attempt
  uint64_t body_total_ = 0;
  bool replayable_ = true;
  // The body is read whole (up to buffer_limit) before the first attempt:
  // a request refused for its body never reaches the upstream.
  bool awaiting_body_ = false;
  bool forwarded_any_ = false;  // request bytes went to some upstream
  bool request_complete_ = false;
  bool request_end_sent_ = false;
  bool req_chunked_ = false;
  bool req_has_body_ = false;
  bool head_request_ = false;

  UpConn* up_ = nullptr;
  EndpointState* last_ep_ = nullptr;
  uint64_t tried_ = 0;                            // balancer members this request used
  uint32_t member_ = UpstreamEndpoints::kNone;    // the attempt's member, until its verdict is in
  uint32_t last_member_ = UpstreamEndpoints::kNone;
  TimePoint attempt_started_{};
  int pick_addr_ = -1;  // the picked member's index in its EndpointState's addrs (-1: any)
  bool waiting_backoff_ = false;
  bool response_started_ = false;
  bool response_done_ = false;
  bool finished_ = false;
  bool resp_chunked_down_ = false;  // re-framing upstream body as chunked downstream
  bool resp_close_delimited_down_ = false;
  bool resp_no_body_ = false;
  bool mark_exhausted_ = false;
  int status_ = 0;
  const char* error_reason_ = nullptr;
  std::string triggers_;   // retry triggers, comma separated
  const char* declined_ = nullptr;
  std::string endpoints_;  // endpoints tried
  uint64_t bytes_out_ = 0;
  std::string pending_head_;  // response head (and terminal chunk) not yet written
  std::string upgrade_;       // requested Upgrade protocols ("" : no upgrade)
  bool tunnel_ = false;       // a 101 went downstream: bytes flow both ways

  void end_tunnel(const char* error);
  void pass_tunnel_bytes(Conn* to, const char* data, size_t len, bool from_down);
  static void on_tunnel_idle(uv_timer_t* t);
};

}  // namespace onelayer
