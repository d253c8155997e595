// One downstream request and all its upstream attempts: carries out the
// core's retry decisions (timers, endpoint choice, body replay), streams the
// response, counts and logs it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/config.h"
#include "core/http_headers.h"
#include "core/replay_body.h"
#include "core/retry.h"
#include "core/upstream_endpoints.h"
#include "shell/attempt.h"
#include "shell/http1_encoder.h"
#include "shell/http_codec.h"
#include "shell/runtime.h"

namespace onelayer {

class Conn;
class DownConn;
class UpConn;
class Worker;
struct EndpointState;
struct RouteMetrics;

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

  bool response_started() const { return response_started_; }
  void flush_head();  // writes a response head still waiting for body bytes
  bool request_complete() const { return request_complete_; }
  // The listener's in-flight slot (max_concurrent_requests), given up when
  // the exchange is freed.
  void hold_shed_permit(LoadShedder::Permit permit) { shed_permit_ = std::move(permit); }

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
  // `ended`: when (the clock read once for the verdict and the decision).
  bool end_failed_attempt(int status, const char* reason,
                          UpstreamEndpoints::Result verdict = UpstreamEndpoints::Result::failure,
                          TimePoint* ended = nullptr);
  void handle_failure(const AttemptResult& r, int status, const char* reason,
                      UpstreamEndpoints::Result verdict = UpstreamEndpoints::Result::failure);
  // Asks the core about a finished attempt and carries out a retry (backoff
  // timer) or records the decline; the caller answers the client otherwise.
  RetryState::Decision decide_retry(const AttemptResult& r, TimePoint now);
  void decline(Decline why, bool mark_exhausted);
  void respond_error(int status, const char* reason, std::string_view extra_headers = {});
  void start_when_body_buffered();
  static void on_body_deadline(uv_timer_t* t);
  void finish(bool close_after);
  void finish_aborted();
  void record(int status);
  void drop_upstream(bool reset = false);
  EndpointState* pick_endpoint(TimePoint now);
  // The attempt's verdict to the balancer, outlier detector and breaker.
  // Returns the time it read, for the retry decision that follows.
  TimePoint end_attempt(UpstreamEndpoints::Result r);
  void cancel_member();  // the attempt ends without a verdict
  bool upstream_ready() const;
  // The Via member this listener writes ("" when `via: false`).
  std::string_view via_member() const { return cfg_->via_on(*lcfg_) ? "1.1 onelayer" : ""; }
  void end_tunnel(const char* error);
  void pass_tunnel_bytes(Conn* to, const char* data, size_t len, bool from_down);
  static void on_tunnel_idle(uv_timer_t* t);

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

  ReplayBody body_;  // kept for replay up to buffer_limit, else the bytes not sent yet
  // The body is read whole (up to buffer_limit) before the first attempt:
  // a request refused for its body never reaches the upstream.
  bool awaiting_body_ = false;
  bool forwarded_any_ = false;  // request bytes went to some upstream
  bool request_complete_ = false;
  bool head_request_ = false;

  Attempt attempt_;  // the current (or last) attempt
  uint64_t tried_ = 0;                            // balancer members this request used
  uint32_t last_member_ = UpstreamEndpoints::kNone;
  bool waiting_backoff_ = false;
  bool response_started_ = false;
  bool finished_ = false;
  bool resp_no_body_ = false;
  bool mark_exhausted_ = false;
  bool fault_delayed_ = false;  // this attempt's injected delay is over
  uint64_t attempt_id_ = 0;     // retry-attempt baggage id (0: not written)
  LoadShedder::Permit shed_permit_;
  int status_ = 0;
  const char* error_reason_ = nullptr;
  std::string triggers_;   // retry triggers, comma separated
  Decline declined_ = Decline::none;
  std::string endpoints_;  // endpoints tried
  uint64_t bytes_out_ = 0;
  std::string pending_head_;  // response head (and terminal chunk) not yet written
  std::string upgrade_;        // requested Upgrade protocols ("" : no upgrade)
  bool tunnel_ = false;        // a 101 went downstream: bytes flow both ways
  uint64_t tunnel_bytes_in_ = 0;  // tunnel bytes from the client (the access log's bytes_in)
  Http1BodyEncoder up_body_;    // the request body's framing upstream
  Http1BodyEncoder down_body_;  // the response body's framing to the client
};

}  // namespace onelayer
