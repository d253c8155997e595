// One downstream request and all its upstream attempts: carries out the
// core's retry decisions (timers, endpoint choice, body replay), streams the
// response, counts and logs it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/config.h"
#include "core/base/grpc_status.h"
#include "core/hedging/hedge_policy.h"
#include "core/http/http_headers.h"
#include "core/retry/replay_body.h"
#include "core/retry/retry.h"
#include "core/upstream/upstream_endpoints.h"
#include "shell/memory/recycled_blocks.h"
#include "shell/proxy/attempt.h"
#include "shell/proxy/proxy_host.h"
#include "shell/stream/downstream_stream.h"
#include "shell/stream/request_exchange.h"
#include "core/http/message_head.h"
#include "shell/proxy/request_admission.h"
#include "shell/proxy/runtime.h"
#include "shell/io/timer_list.h"
#include "shell/stream/upstream_stream.h"

namespace onelayer {

class Conn;
class Http1ServerConnection;
class HedgeLeg;
class Http1ClientConnection;
struct EndpointState;
struct RouteMetrics;

// Every attempt outcome the upstream (or an injected fault) gave: the
// successes-mode budget and onelayer_attempt_failures_total.
void storm_on_attempt_result(UpstreamShared& ups, const Upstream& ucfg, RouteMetrics& rm, const Route& route,
                             uint32_t attempt, const AttemptResult& r);

// One downstream request and all its upstream attempts. It talks to the
// client through a DownstreamStream and to each attempt's upstream through
// an UpstreamStream (whose events it receives): no byte of HTTP/1 or HTTP/2
// framing is written here. Its one timer (attempt, backoff, body and stall
// deadlines) is an entry of the worker's timer list.
class Exchange final : public UpstreamStream::Receiver, public RequestExchange, private TimerList::Entry {
 public:
  ONELAYER_RECYCLED_BLOCKS(Exchange)
  // `a`: the admitted request (route, metrics, shed permit, target);
  // `head`: its head, taken over (the codec's storage is reused).
  Exchange(DownstreamStream* down, ProxyHost* host, Admission& a, MessageHead& head);
  ~Exchange() override;

  void start() override;
  // The first body bytes take the room of a buffer an earlier body left on
  // this thread (shell/memory/spare_string_rooms.h: kept when its exchange or its
  // HTTP/2 stream ended).
  void on_request_body(const char* data, size_t len) override;
  // The request's trailers (a chunked body's trailer section, an HTTP/2
  // trailing HEADERS), before on_request_end: kept with the body, so a
  // replayed request carries them again.
  void on_request_trailers(const Headers& trailers) override;
  void on_request_end() override;
  void on_down_drained() override;
  // `n` bytes of the response body left the downstream's queue
  // (DownstreamStream::reports_body_sent): the upstream stream's window
  // reopens by as much of them as came from it.
  void on_down_body_sent(size_t n) override;
  // The request turned out malformed or too large after its head was taken:
  // answer `status`/`reason` here. When bytes of it already went upstream
  // (a body past buffer_limit streams), that connection is reset, and the
  // answer (x-onelayer-forwarded: partial) and the log line say so.
  void refuse_request(int status, const char* reason, const char* detail) override;
  void abort(const char* reason = "client_closed") override;  // downstream went away, or drain cut it

  // UpstreamStream::Receiver: the current attempt's stream. TLS: a
  // handshake that failed (a certificate that does not verify is final, 502
  // upstream_tls; anything else is a connect failure), and a TLS error after
  // it (treated as a reset; 502 upstream_tls when final).
  void on_connected() override;
  void on_stream_moved(UpstreamStream* s) override { attempt_.stream = s; }
  bool needs_http1() const override { return wants_upgrade(); }
  bool follows_refusal() const override;
  std::string_view request_timeout_header() const override;
  bool reopens_response_window() const override { return down_->reports_body_sent(); }
  uint64_t client_connection() const override { return down_->client_connection(); }
  void on_connect_failed(int err, bool dns) override;
  void on_tls_failed(const std::string& why, bool verify) override;
  int on_up_head(MessageHead& head) override;
  int on_up_body(const char* data, size_t len) override;
  void on_up_trailers(Headers& trailers) override;
  void on_up_end(bool reusable) override;
  void on_up_error(int err) override;  // reset/EOF/parse error
  void on_up_refused() override;
  void on_up_tls_error(const std::string& why) override;
  void on_up_bad_response() override;
  void on_up_drained() override;
  void on_up_read_done() override;

  // Upgrade tunnels (exchange_tunnel.cc), for a request that asked for an allowed
  // Upgrade (the admission's protocols). on_up_switching: the upstream's 101
  // head; start_tunnel: the bytes after it. From then on both connections'
  // bytes come here until either side closes or idles.
  bool wants_upgrade() const { return !upgrade_.empty(); }
  int on_up_switching(MessageHead& head) override;
  void start_tunnel(const char* data, size_t len) override;
  void on_tunnel_down(ssize_t nread, const uv_buf_t* buf) override;
  void on_tunnel_up(ssize_t nread, const uv_buf_t* buf) override;

  bool response_started() const override { return response_started_; }
  bool request_complete() const override { return request_complete_; }
 private:
  friend class HedgeLeg;  // its stream's events, until adopted (on_leg_*)
  void start_attempt(TimePoint now);
  void open_stream(EndpointState* ep, Millis connect_timeout, TimePoint now);
  bool connect_to_fallback_address();
  // The request to `a`'s stream: for the current attempt what the body has
  // so far; for a hedge `leg`, the whole body kept for replay.
  void send_head_and_body(Attempt& a, TimePoint now, HedgeLeg* leg = nullptr);
  void refuse_grpc_over_http1();
  void send_body_bytes(const char* data, size_t len);
  void send_request_end();
  TimerList& timers() const;  // the host's (its ConnectionHost's)
  void arm_timer(Millis ms, TimerList::Entry::Callback cb);
  // A wait that must not end early (a backoff, Retry-After, a fault's
  // delay): `wait` from `from`, a precise clock read, rounded up to the
  // loop's millisecond.
  void arm_wait(TimePoint from, Millis wait, TimerList::Entry::Callback cb);
  void stop_timer();
  // `label` (an endpoint, or "fault" for an injected answer) onto the
  // endpoints tried, when the listener writes an access log.
  void note_endpoint_tried(std::string_view label);
  static Exchange* of(TimerList::Entry* e) { return static_cast<Exchange*>(e); }
  static void on_attempt_timeout(TimerList::Entry* e);
  static void on_backoff_done(TimerList::Entry* e);
  static void on_stream_stalled(TimerList::Entry* e);
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
  void respond_error(int status, const char* reason, Headers extra = {});
  void start_when_body_buffered();
  static void on_body_deadline(TimerList::Entry* e);
  void finish();
  void finish_aborted();
  void record(int status);
  void drop_upstream(bool reset = false);
  EndpointState* pick_endpoint(TimePoint now, Attempt& a);
  // The attempt's verdict to the balancer, outlier detector and breaker.
  // Returns the time it read, for the retry decision that follows.
  TimePoint end_attempt(UpstreamEndpoints::Result r) { return end_attempt_of(attempt_, r); }
  TimePoint end_attempt_of(Attempt& a, UpstreamEndpoints::Result r);
  void cancel_member();  // the attempt ends without a verdict
  bool upstream_ready() const;
  // The Via member this listener writes for a message that arrived as `m`
  // (its protocol version: "2 onelayer", "1.1 onelayer"; "" when `via: false`).
  std::string_view via_member(const MessageHead& m) const {
    return cfg_->via_on(*lcfg_) ? via_member_for(m.http_major, m.http_minor) : "";
  }
  void end_tunnel(const char* error);
  void pass_tunnel_bytes(Conn* to, const char* data, size_t len, bool from_down);
  static void on_tunnel_idle(TimerList::Entry* e);
  Http1ClientConnection* tunnel_upstream() const;  // the HTTP/1 connection of a tunnel's attempt
  // The x-retry-exhausted field when this answer must carry it.
  void add_exhausted_field(Headers& out) const;
  // The verdict on a response head whose outcome is in `outcome_fields`
  // (the head itself, or for a gRPC head held back, the trailers): retry,
  // or send the head downstream. on_up_head's return value.
  int judge_response(MessageHead& head, const Headers& outcome_fields);
  // What a response head (and its outcome fields) says, as the retry
  // decision reads it, and the verdict the balancer and breaker get.
  AttemptResult response_result(const MessageHead& head, const Headers& outcome_fields) const;
  UpstreamEndpoints::Result response_verdict(const AttemptResult& r) const;

  // Hedged requests (docs/retries.md; the decisions are HedgePlan's). The
  // hedge timer runs beside the attempt timer; each hedge is a HedgeLeg
  // until one answer wins or the current attempt ends and a leg takes its
  // place (adopt_leg).
  struct HedgeTimer : TimerList::Entry {
    Exchange* ex = nullptr;
  };
  void arm_hedge(TimePoint last_start, TimePoint now);
  static void on_hedge_timer(TimerList::Entry* e);
  void send_hedge(TimePoint now);
  void on_leg_connected(HedgeLeg* leg);
  void on_leg_failed(HedgeLeg* leg, const AttemptResult& r);
  int on_leg_head(HedgeLeg* leg, MessageHead& head);
  bool legs_in_flight() const;
  // `leg` (nullptr: the first leg in flight) becomes the current attempt;
  // the current one, if any, is cancelled. `answered`: its answer won, so
  // the other legs are cancelled too; otherwise (the current attempt
  // failed) they run on.
  void adopt_leg(HedgeLeg* leg, TimePoint now, bool answered);
  void end_leg(HedgeLeg* leg);  // its stream cancelled, its timer off
  void cancel_legs();           // every leg in flight lost
  // gRPC A6: a status in retry_on on one attempt sends the next hedge at
  // once (after a pushback's wait; a negative pushback stops hedging).
  void after_retryable_answer(const AttemptResult& r, TimePoint now);
  // gRPC (docs/grpc.md): a held head's outcome arrived (trailers, or
  // nullptr for the first message or the end): judged as above. False
  // when the head did not go downstream (retried, or refused).
  bool release_grpc_head(const Headers* trailers);

  DownstreamStream* down_;
  ProxyHost* host_;  // the worker: its timers, endpoints, random generator
  GenerationPtr gen_;
  const Config* cfg_;
  const Listener* lcfg_;
  const Route* route_;
  const Upstream* ucfg_;
  UpstreamShared* ups_;
  UpstreamEndpoints* eps_;
  // An `original_destination` upstream: the request's original destination
  // and, once picked, its EndpointState (held: see ProxyHost::destination_endpoint).
  Destination destination_;
  EndpointState* destination_ep_ = nullptr;
  RouteMetrics* rm_;
  MessageHead req_;
  std::string target_;  // what the upstream gets as request target
  RetryOwnership ownership_;
  std::optional<RetryState> rs_;
  TimePoint started_;

  ReplayBody body_;  // kept for replay up to buffer_limit, else the bytes not sent yet
  Headers req_trailers_;  // the request's trailers, filtered (every attempt sends them)
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
  // How many attempts had started when the upstream last refused one's
  // stream (HTTP/2; 0: none): the attempt after it goes on a connection
  // opened since the refusal (H2ClientConnection::for_new_stream).
  uint32_t refused_after_ = 0;
  bool response_paused_ = false;  // the upstream's response waits for the client's queue
  // Body bytes of the attempt's response queued downstream whose upstream
  // window is still to be given back (reopens_response_window()).
  size_t response_window_owed_ = 0;
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
  std::string upgrade_;        // requested Upgrade protocols ("" : no upgrade)
  bool tunnel_ = false;        // a 101 went downstream: bytes flow both ways
  uint64_t tunnel_bytes_in_ = 0;  // tunnel bytes from the client (the access log's bytes_in)
  // gRPC: a call over HTTP/2 with a gRPC content-type. A 200 head without
  // grpc-status is held until the first message or the trailers (the
  // attempt's timer still runs), so a status in the trailers can be retried.
  bool grpc_call_ = false;
  bool grpc_head_held_ = false;
  // Made when a head is first held: most exchanges never hold one, and a
  // MessageHead member cost every exchange its construction and
  // destruction.
  std::unique_ptr<MessageHead> grpc_held_head_;
  std::optional<GrpcStatus> grpc_answer_;  // the grpc-status the caller got
  std::optional<HedgePlan> hedge_;  // set when the request may be hedged
  // Hedges sent (kept until the exchange dies: a leg never dies inside its
  // own callback).
  std::vector<std::unique_ptr<HedgeLeg>> legs_;
  HedgeTimer hedge_timer_;
  bool answered_by_hedge_ = false;  // the response downstream came from a hedge
};

}  // namespace onelayer
