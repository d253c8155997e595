// One downstream request and its upstream attempts. The retry decisions come
// from the pure core (RetryState); this file carries them out: timers,
// replaying the buffered body, endpoint choice, counters, access log.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>

#include "core/fleet/retried_arrival.h"
#include "core/retry/grpc_attempt.h"
#include "core/grpc/grpc_error_answer.h"
#include "core/grpc/grpc_protocol.h"
#include "core/base/http_status.h"
#include "core/request/request_deadline.h"
#include "core/request/request_signal_fields.h"
#include "core/http/retry_after.h"
#include "shell/proxy/endpoint_log.h"
#include "shell/proxy/endpoint_state.h"
#include "shell/proxy/exchange.h"
#include "shell/http2/h2_session.h"
#include "shell/proxy/hedge_leg.h"
#include "shell/proxy/upstream_codecs.h"
#include "shell/proxy/upstream_stream_factory.h"
#include "shell/io/connection_host.h"
#include "shell/io/logging.h"
#include "shell/memory/spare_string_rooms.h"

namespace onelayer {

static int64_t steady_ms(TimePoint t) {
  return std::chrono::duration_cast<Millis>(t.time_since_epoch()).count();
}

// ---- The storm tools (docs/storm.md): small calls into the pure core.

// Hidden retries: an owned request whose (id, attempt) was seen before, or
// that an Envoy hop retried. Counts and warns; the request is not changed.
// Returns whether it was one.
static bool storm_note_hidden_retry(Runtime& rt, const Route& route, const RetryOwnership& own,
                                    const Headers& headers, const HeaderNames& names) {
  HiddenRetryDetector::Signals sig = HiddenRetryDetector::read_signals(headers);
  if (!sig.key && sig.envoy_attempt_count <= 1 && sig.grpc_previous_attempts == 0) return false;
  // The owner's attempt number: its grpc-previous-rpc-attempts is that minus one.
  if (const Header* a = find_header(headers, names.retry_attempt))
    std::from_chars(a->value.data(), a->value.data() + a->value.size(), sig.owner_attempt);
  HiddenRetryDetector::Verdict v = rt.hidden_retries.observe(route.name, own.owner, sig, Clock::now());
  if (v.warn) {
    spdlog::warn("route {}: hidden retry: a hop between retry owner {} and this layer sent the same attempt "
                 "again (its own retries multiply the owner's; see onelayer_hidden_retries_total)",
                 route.name, v.owner);
  }
  return v.hidden_retry;
}

void storm_on_attempt_result(UpstreamShared& ups, const Upstream& ucfg, RouteMetrics& rm, const Route& route,
                             uint32_t attempt, const AttemptResult& r) {
  bool failed = attempt_failed(r, route.retry.retry_on);
  if (ucfg.retry_budget.mode == BudgetMode::successes || ucfg.retry_budget.scope == BudgetScope::fleet)
    ups.budget.on_attempt_result(failed, Clock::now());
  if (failed) rm.on_attempt_failure(attempt <= 1, r);
}

Exchange::Exchange(DownstreamStream* down, ProxyHost* host, Admission& a, MessageHead& head)
    : down_(down),
      host_(host),
      gen_(std::move(a.gen)),
      route_(a.route),
      rm_(a.metrics),
      target_(std::move(a.upstream_target)),
      body_(a.route->retry.buffer_limit,
            !(head.has_content_length && head.content_length > a.route->retry.buffer_limit)),
      shed_permit_(std::move(a.permit)) {
  if (a.upgrade) upgrade_ = std::move(a.upgrade_protocols);
  cfg_ = gen_->config.get();
  lcfg_ = &cfg_->listeners[static_cast<size_t>(a.listener_index)];
  ucfg_ = &cfg_->upstreams[route_->upstream_index];
  ups_ = gen_->upstreams[route_->upstream_index].get();
  eps_ = gen_->endpoints[route_->upstream_index].get();
  destination_ = a.destination;
  // Take the parsed head; the parser's storage is reused for the next one.
  // An HTTP/2 head keeps checked_by_codec: the request rewrite then skips
  // the field checks nghttp2 has made.
  req_.take_request(head);
}

Exchange::~Exchange() {
  cancel_legs();
  if (destination_ep_) --destination_ep_->holds;
  cancel_member();
  if (attempt_.stream) attempt_.stream->cancel();
  // An HTTP/2 request's field list (its fields' strings too) serves the
  // next request head the worker's HTTP/2 sessions receive.
  if (req_.http_major == 2) H2Session::keep_field_list(req_.headers);
  // The replay buffer's room serves a later body (shell/memory/spare_string_rooms.h).
  if (body_.received() > 0) SpareStringRooms::give_back(body_.take_room());
}

void Exchange::start() {
  started_ = Clock::now();
  // One pass over the fields finds what the questions below read; a reader
  // runs only when its field is there (the common request has none).
  const RequestSignalFields fields =
      RequestSignalFields::find(req_.headers, cfg_->headers, route_->retry.idempotency_key);
  ownership_ = fields.may_be_outer_owned() ? detect_outer_owner(req_.headers, cfg_->headers) : RetryOwnership{};
  // Hidden-retry detection on requests an outer layer owns.
  const bool hidden =
      ownership_.outer_owned && storm_note_hidden_retry(host_->runtime(), *route_, ownership_, req_.headers, cfg_->headers);
  // Fleet budgets: an arrival some layer already retried counts against the
  // fleet budget of the service this listener fronts (docs/fleet.md).
  if (!lcfg_->fleet_service.empty() && (hidden || fleet::arrival_was_retried(req_.headers, cfg_->headers.retry_attempt))) {
    const auto& other = gen_->fleet_other[static_cast<size_t>(lcfg_ - cfg_->listeners.data())];
    if (other) other->fetch_add(1, std::memory_order_relaxed);
  }
  // x-request-timeout-ms and grpc-timeout shorten the route's deadline.
  const Millis timeout = fields.may_shorten_timeout() ? request_timeout(route_->timeout, req_.headers, cfg_->headers)
                                                      : route_->timeout;
  grpc_call_ = down_->protocol() == WireProtocol::h2 && fields.content_type != nullptr &&
               is_grpc_content_type(fields.content_type->value);  // is_grpc_request()
  // A zero length on an HTTP/2 stream that has not ended waits for the end
  // like a body does: DATA in between makes the request malformed, and the
  // upstream must not have it by then.
  const bool has_body = req_.chunked || req_.content_length > 0 || req_.end_pending;
  head_request_ = req_.method == "HEAD";
  request_complete_ = false;
  const bool has_key = fields.idempotency_key != nullptr && !fields.idempotency_key->value.empty();
  rs_.emplace(route_->retry, timeout, started_,
              RetryState::Request{req_.method, has_key, body_.replayable(), ownership_.outer_owned,
                                  route_->retry.idempotent});
  ups_->budget.on_request(started_);
  hedge_timer_.ex = this;
  if (HedgePlan::applies(route_->retry, *rs_) && upgrade_.empty()) hedge_.emplace(route_->retry);
  // The id of the retry-attempt baggage member (only when it is written).
  if (rs_->owns_retries() && route_->inner_hops == InnerHops::forbid && cfg_->propagate_baggage)
    attempt_id_ = host_->random().next() | 1;
  if (timeout.count() <= 0) {
    // The caller's x-request-timeout-ms left nothing: no attempt at all.
    respond_error(504, "deadline_exceeded");
    return;
  }
  if (grpc_call_ && ucfg_->protocol == UpstreamProtocol::http1) {
    // gRPC needs HTTP/2 to the upstream too: its trailers carry the outcome.
    spdlog::info("route {}: gRPC call to upstream {}, which speaks http1: answered UNAVAILABLE", route_->name,
                 ucfg_->name);
    respond_error(502, "bad_upstream_response");
    return;
  }
  // A gRPC body streams while it is kept for replay: a streaming call whose
  // client waits for answers before it ends must not wait for its own end.
  if (has_body && body_.replayable() && !grpc_call_) {
    // A body that fits buffer_limit is read whole first (it is buffered for
    // replay anyway): a malformed chunk, a bad trailer or max_body_bytes then
    // refuse the request before a byte of it reaches an upstream.
    awaiting_body_ = true;
    arm_timer(rs_->time_left(started_), on_body_deadline);
    return;
  }
  start_attempt(started_);  // this very moment: no second clock read
}

void Exchange::start_when_body_buffered() {
  awaiting_body_ = false;
  // The body deadline's timer is not stopped first: start_attempt re-arms
  // it (in place, no heap removal) or answers, which stops it.
  start_attempt(Clock::now());
}

TimerList& Exchange::timers() const { return host_->connection_host().timers(); }

void Exchange::arm_timer(Millis ms, TimerList::Entry::Callback cb) {
  timers().arm(*this, static_cast<uint64_t>(std::max<int64_t>(0, ms.count())), cb);
}

void Exchange::arm_wait(TimePoint from, Millis wait, TimerList::Entry::Callback cb) {
  // uv_now() and steady_clock both count CLOCK_MONOTONIC; the loop's time
  // is floored to the millisecond, so the deadline is rounded up.
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(from.time_since_epoch()).count() +
                     std::max<int64_t>(0, wait.count()) * 1'000'000;
  timers().arm_at(*this, static_cast<uint64_t>((ns + 999'999) / 1'000'000), cb);
}

void Exchange::stop_timer() { timers().disarm(*this); }

void Exchange::note_endpoint_tried(std::string_view label) {
  if (!lcfg_->access_log) return;  // the list's only reader
  if (!endpoints_.empty()) endpoints_ += ',';
  endpoints_ += label;
}

void Exchange::on_attempt_timeout(TimerList::Entry* e) {
  Exchange* ex = of(e);
  if (ex->finished_) return;
  AttemptResult r;
  if (ex->attempt_.stream && !ex->attempt_.stream->ready()) {
    r.outcome = AttemptOutcome::connect_failure;
    r.request_may_have_reached = false;
  } else {
    r.outcome = AttemptOutcome::timeout;
  }
  ex->handle_failure(r, 504, "deadline_exceeded");
}

// The response body made no progress for the listener's idle_timeout: the
// upstream stalled, or the client stopped reading and backpressure paused us.
void Exchange::on_stream_stalled(TimerList::Entry* e) {
  Exchange* ex = of(e);
  if (ex->finished_) return;
  spdlog::info("route {}: response body stalled for {} ms, closing", ex->route_->name,
               ex->lcfg_->limits.idle_timeout.count());
  ex->error_reason_ = "stream_stalled";
  ex->finish_aborted();
}

// The deadline passed while the client was still sending the body: nothing
// went upstream.
void Exchange::on_body_deadline(TimerList::Entry* e) {
  Exchange* ex = of(e);
  if (ex->finished_ || !ex->awaiting_body_) return;
  ex->awaiting_body_ = false;
  ex->declined_ = Decline::none;
  ex->respond_error(504, "deadline_exceeded");
}

void Exchange::on_backoff_done(TimerList::Entry* e) {
  Exchange* ex = of(e);
  if (ex->finished_) return;
  ex->start_attempt(Clock::now());
}

void Exchange::start_attempt(TimePoint now) {
  waiting_backoff_ = false;
  // Fault drills and route fault blocks (nothing to do unless one exists).
  if (!fault_delayed_ && (route_->fault.enabled || host_->runtime().faults.any_drill())) {
    FaultInjector::Decision f = host_->runtime().faults.decide(route_->fault, ucfg_->name, now, host_->random());
    if (f.delay.count() > 0) {
      rm_->on_fault("delay");
      fault_delayed_ = true;
      waiting_backoff_ = true;  // body bytes wait in body_ meanwhile
      arm_wait(now, std::min(f.delay, rs_->time_left(now)), on_backoff_done);
      return;
    }
    if (f.abort_status != 0 && rs_->attempt_timeout(now).count() > 0) {
      // The injected answer stands for the upstream's: counted as an
      // attempt, then through the retry rules like a real response. It
      // feeds neither the breaker nor outlier detection: a drill tests the
      // retry policy.
      rs_->on_attempt_started();
      rm_->on_attempt();
      rm_->on_fault("abort");
      note_endpoint_tried("fault");
      AttemptResult r;
      r.status = f.abort_status;
      // A route's grpc_status: a gRPC call's abort is that gRPC answer.
      Headers grpc_fault;
      if (grpc_call_ && !f.from_drill && route_->fault.grpc_status >= 0) {
        r.status = 200;
        r.grpc = grpc_status_from_code(route_->fault.grpc_status);
        grpc_fault.push_back({std::string(kGrpcStatusField), std::to_string(route_->fault.grpc_status)});
      }
      storm_on_attempt_result(*ups_, *ucfg_, *rm_, *route_, rs_->attempts_started(), r);
      if (decide_retry(r, now).retry) return;
      respond_error(f.abort_status, "fault_injected", std::move(grpc_fault));
      return;
    }
  }
  fault_delayed_ = false;
  RetryState::Admission a = rs_->admit_attempt(now, &ups_->breaker);
  if (!a.admitted) {
    decline(a.declined, a.mark_exhausted);
    if (a.declined == Decline::circuit_open) {
      respond_error(503, "circuit_open");
    } else {
      respond_error(504, "deadline_exceeded");
    }
    return;
  }
  const Millis t = a.timeout;
  rm_->on_attempt();

  EndpointState* ep = pick_endpoint(now, attempt_);  // begins attempt_
  attempt_.number = rs_->attempt_number();
  attempt_.first = rs_->attempts_started() == 1;
  note_endpoint_tried(ep->label);
  if (grpc_call_ && ep->alpn == EndpointState::Alpn::http1 && ucfg_->protocol == UpstreamProtocol::auto_) {
    refuse_grpc_over_http1();
    return;
  }

  if (!body_.replayable() && rs_->attempts_started() > 1) {
    // Cannot happen (the core refuses), but never replay a partial body.
    respond_error(502, "upstream_reset");
    return;
  }
  body_.rewind();
  arm_timer(t, on_attempt_timeout);

  // The hedge timer runs from the attempt's start (a fallback address
  // within the attempt does not restart it).
  if (hedge_) arm_hedge(now, now);
  // A pooled connection (or a free stream on one) when there is one, else
  // a new connection; its on_connected (or failure) comes later.
  open_stream(ep, std::min(ucfg_->connect_timeout, t), now);
}

void Exchange::open_stream(EndpointState* ep, Millis connect_timeout, TimePoint now) {
  const std::shared_ptr<TlsClientContext>& tls = gen_->tls.upstreams[route_->upstream_index];
  UpstreamStreamFactory* f = host_->upstream_streams();
  ConnectionHost* c = &host_->connection_host();
  attempt_.stream = f ? f->open(c, ep, *ucfg_, attempt_.address, tls, this, head_request_, connect_timeout)
                      : UpstreamCodecs::instance().open(c, ep, *ucfg_, attempt_.address, tls, this, head_request_,
                                                        connect_timeout);
  if (attempt_.stream->ready()) send_head_and_body(attempt_, now);
}

// A DNS name that answered both IPv4 and IPv6 (localhost: 127.0.0.1 and
// ::1) is balanced over its IPv4 addresses; when a connect to one fails,
// the same attempt goes on to the name's IPv6 addresses in turn (nothing
// was sent: no retry is spent). The address that refused gets its verdict
// now; the attempt goes on without one owed.
bool Exchange::connect_to_fallback_address() {
  EndpointState* ep = attempt_.endpoint;
  if (ep == nullptr || ep->literal || attempt_.stream == nullptr) return false;
  const size_t at = ep->balanced + attempt_.fallbacks;
  if (at >= ep->addrs.size()) return false;
  const TimePoint now = Clock::now();
  if (attempt_.verdict_owed()) {
    const uint32_t m = attempt_.take_member();
    UpstreamEndpoints::Report rep = eps_->report(m, UpstreamEndpoints::Result::failure, now, now - attempt_.started);
    if (rep.event.kind != OutlierDetector::Event::Kind::none) log_endpoint_event(ucfg_->name, eps_->label(m), rep.event);
  }
  const Millis connect_timeout = attempt_.stream->connect_timeout();
  drop_upstream();
  attempt_.address = static_cast<int>(at);
  attempt_.fallbacks++;
  spdlog::debug("upstream {}: trying its address {}", ep->label, ep->addr_text[at]);
  open_stream(ep, connect_timeout, now);
  return true;
}

// The balancer's choice for this attempt (a retry prefers a member not
// tried yet), as this worker's EndpointState; a DNS name's addresses are
// handed to the balancer whenever this worker resolved them anew.
EndpointState* Exchange::pick_endpoint(TimePoint now, Attempt& a) {
  if (ucfg_->original_destination) {
    // Every attempt to where the app was going; held while this exchange
    // lives, so the worker's bounded table keeps it.
    if (!destination_ep_) {
      destination_ep_ = host_->destination_endpoint(destination_, *ucfg_);
      ++destination_ep_->holds;
    }
    a.begin(destination_ep_, UpstreamEndpoints::kNone, -1, now);
    return destination_ep_;
  }
  UpstreamEndpoints::Pick p = eps_->pick(now, host_->random(), tried_, last_member_);
  uint32_t e = p.member == UpstreamEndpoints::kNone ? 0 : p.endpoint;
  EndpointState* ep = host_->endpoint(ucfg_->endpoints[e], *ucfg_, gen_->id);
  last_member_ = p.member;
  if (p.member < 64) tried_ |= uint64_t{1} << p.member;
  int addr = -1;
  for (size_t i = 0; i < ep->addr_text.size() && !p.address.empty(); ++i) {
    if (ep->addr_text[i] == p.address) addr = static_cast<int>(i);
  }
  a.begin(ep, p.member, addr, now);
  if (!ep->literal && !ep->addr_text.empty() && (ep->synced_to != eps_ || ep->synced_version != ep->addrs_version)) {
    eps_->set_addresses(e, ep->addr_text);
    ep->synced_to = eps_;
    ep->synced_version = ep->addrs_version;
  }
  return ep;
}

TimePoint Exchange::end_attempt_of(Attempt& a, UpstreamEndpoints::Result r) {
  using Result = UpstreamEndpoints::Result;
  TimePoint now = Clock::now();
  // Without a member (a failure after the response head was judged) the
  // breaker counts the failure as before.
  bool upstream_failing = r != Result::success && r != Result::cancelled;
  if (a.verdict_owed()) {
    uint32_t m = a.take_member();
    UpstreamEndpoints::Report rep = eps_->report(m, r, now, now - a.started);
    // The label (a lookup under the endpoints' lock) only for a line to write.
    if (rep.event.kind != OutlierDetector::Event::Kind::none)
      log_endpoint_event(ucfg_->name, eps_->label(m), rep.event);
    upstream_failing = rep.upstream_failing;
  }
  // The breaker sees the upstream as a whole: one endpoint's failure while
  // others answer is no verdict on it (and frees a half-open probe slot).
  if (r == Result::success) {
    ups_->breaker.on_success(now);
  } else if (upstream_failing) {
    ups_->breaker.on_failure(now);
  } else {
    ups_->breaker.on_cancel(now);
  }
  return now;
}

void Exchange::cancel_member() {
  if (!attempt_.verdict_owed()) return;
  eps_->report(attempt_.take_member(), UpstreamEndpoints::Result::cancelled, Clock::now(), {});
}

void Exchange::on_connected() {
  // An `auto` upstream's handshake chose http/1.1, which cannot carry gRPC.
  if (grpc_call_ && attempt_.stream->http1_connection()) {
    refuse_grpc_over_http1();
    return;
  }
  send_head_and_body(attempt_, Clock::now());
}

// As for an `http1` upstream (start): UNAVAILABLE. The connection, unused,
// goes back to its pool.
void Exchange::refuse_grpc_over_http1() {
  spdlog::info("route {}: gRPC call to upstream {}, whose endpoint {} chose http/1.1 (protocol auto): answered "
               "UNAVAILABLE",
               route_->name, ucfg_->name, attempt_.endpoint->label);
  end_attempt(UpstreamEndpoints::Result::cancelled);
  if (UpstreamStream* s = attempt_.stream) {
    attempt_.stream = nullptr;
    s->release(true);
  }
  respond_error(502, "bad_upstream_response");
}

void Exchange::send_head_and_body(Attempt& a, TimePoint now, HedgeLeg* leg) {
  RequestRewrite rw;
  rw.config = cfg_;
  rw.inner_hops = route_->inner_hops;
  rw.claim_ownership = rs_->owns_retries() && route_->inner_hops == InnerHops::forbid;
  rw.attempt = a.number;
  rw.checked_by_codec = req_.checked_by_codec;
  rw.time_left_ms = route_->inner_hops == InnerHops::pass ? -1 : rs_->attempt_timeout(now).count();
  if (cfg_->x_forwarded_for_on(*lcfg_)) rw.client_ip = down_->peer_ip();  // else none appended
  rw.outer_owned = ownership_.outer_owned;
  rw.attempt_id = attempt_id_;  // the retry-attempt baggage member
  rw.via = via_member(req_);  // the version the client spoke
  rw.grpc = grpc_call_;  // grpc-timeout and grpc-previous-rpc-attempts
  if (down_->over_tls()) rw.proto = "https";  // the client spoke TLS to this listener

  OutgoingRequest out;
  out.head = &req_;
  out.target = target_;
  out.rewrite = &rw;
  if (!ucfg_->endpoints.empty()) out.default_host = a.endpoint->label;
  out.upgrade = upgrade_;
  out.has_body = req_.chunked || req_.content_length > 0;
  out.body = leg ? body_.kept() : body_.pending();  // a hedge starts once the whole body is kept
  out.end = request_complete_;
  if (request_complete_ && !req_trailers_.empty()) out.trailers = &req_trailers_;
  if (request_complete_) a.request_end_sent = true;
  int rc = a.stream->send_request(out);
  forwarded_any_ = true;
  if (!leg) body_.sent_pending();
  if (rc < 0) {
    AttemptResult r;
    r.outcome = AttemptOutcome::reset;
    if (leg) on_leg_failed(leg, r);
    else handle_failure(r, 502, "upstream_reset");
  }
}

void Exchange::send_body_bytes(const char* data, size_t len) {
  attempt_.stream->send_request_body(std::string_view(data, len));
}

void Exchange::send_request_end() {
  attempt_.request_end_sent = true;
  if (req_trailers_.empty()) {
    attempt_.stream->send_request_end();
  } else {
    attempt_.stream->send_request_trailers(req_trailers_);
  }
}

bool Exchange::upstream_ready() const {
  return attempt_.stream && attempt_.stream->ready() && !waiting_backoff_ && !attempt_.stream->closing();
}

void Exchange::on_request_body(const char* data, size_t len) {
  if (finished_) return;
  if (body_.received() == 0) {
    std::string room;
    if (SpareStringRooms::take(room)) body_.give_room(std::move(room));
  }
  const bool outgrew_buffer = body_.count(len);
  uint64_t max = lcfg_->limits.max_body_bytes;
  if (max > 0 && body_.received() > max) {
    refuse_request(413, "body_too_large", "request body over max_body_bytes");
    return;
  }
  const std::string_view bytes(data, len);
  if (outgrew_buffer) {
    // Too big to replay: from now on it streams and is not retried.
    rs_->set_body_replayable(false);
    if (awaiting_body_) {
      body_.hold(bytes);  // sent with the head once connected
      start_when_body_buffered();
      return;
    }
  }
  if (awaiting_body_) {
    body_.hold(bytes);
    return;
  }
  if (upstream_ready()) {
    body_.sent_through(bytes);
    send_body_bytes(data, len);
  } else {
    body_.hold(bytes);
  }
  size_t queued = body_.queued() + (attempt_.stream ? attempt_.stream->queued_bytes() : 0);
  if (!body_.replayable() && queued > down_->message_watermarks().high) down_->hold_request_body();
}

void Exchange::on_request_trailers(const Headers& trailers) {
  if (finished_) return;
  rewrite_trailers(trailers, req_trailers_);
  // The caller header is onelayer's to write: not even as a trailer.
  if (!lcfg_->caller_header.empty())
    std::erase_if(req_trailers_, [&](const Header& h) { return iequals(h.name, lcfg_->caller_header); });
}

void Exchange::on_request_end() {
  request_complete_ = true;
  if (finished_) return;
  if (awaiting_body_) {
    start_when_body_buffered();
    return;
  }
  if (upstream_ready() && !attempt_.request_end_sent) send_request_end();
}

void Exchange::on_up_drained() {
  if (!attempt_.stream) return;
  if (down_->request_body_held() && attempt_.stream->queued_bytes() < down_->message_watermarks().low)
    down_->release_request_body();
}

void Exchange::on_down_drained() {
  if (!attempt_.stream || !response_started_) return;
  if (down_->queued_bytes() < down_->message_watermarks().low) {
    response_paused_ = false;
    attempt_.stream->resume_response();
  } else if (response_paused_) {
    down_->notify_when_drained();  // not yet: the next write again
  }
}

void Exchange::on_down_body_sent(size_t n) {
  const size_t from_upstream = std::min(n, response_window_owed_);
  response_window_owed_ -= from_upstream;
  if (from_upstream > 0 && attempt_.stream) attempt_.stream->response_body_sent(from_upstream);
}

void Exchange::drop_upstream(bool reset) {
  grpc_head_held_ = false;  // a held head goes with its attempt
  response_window_owed_ = 0;
  cancel_member();
  if (UpstreamStream* s = attempt_.stream) {
    attempt_.stream = nullptr;
    s->cancel(reset);
  }
}

void Exchange::refuse_request(int status, const char* reason, const char* detail) {
  if (finished_) return;
  if (response_started_) {
    error_reason_ = reason;
    finish_aborted();
    return;
  }
  stop_timer();
  declined_ = Decline::none;
  if (!forwarded_any_) {
    spdlog::info("listener {}: {} {} from {}: {}", lcfg_->name, status, reason, down_->peer_ip(), detail);
    respond_error(status, reason);
    return;
  }
  // Part of the request went upstream (the body streamed past buffer_limit):
  // the upstream must see it cut, never a clean end.
  spdlog::warn("listener {}: {} {} from {}: {}; the head and part of the body (of {} bytes read) were "
               "already forwarded to {}: upstream connection reset",
               lcfg_->name, status, reason, down_->peer_ip(), detail, body_.received(),
               attempt_.endpoint ? attempt_.endpoint->label : "?");
  if (attempt_.stream) end_attempt(UpstreamEndpoints::Result::cancelled);  // no result: free probe slots
  drop_upstream(true);
  respond_error(status, reason, Headers{{"x-onelayer-forwarded", "partial"}});
}

void Exchange::decline(Decline why, bool mark_exhausted) {
  declined_ = why;
  rm_->on_declined(why);  // counts only the reasons that are labels
  mark_exhausted_ = mark_exhausted;
}

RetryState::Decision Exchange::decide_retry(const AttemptResult& r, TimePoint now) {
  if (route_->retry.min_time_left) rs_->set_min_time_left(min_time_left(route_->retry, ups_->latency, now));
  RetryState::Decision d =
      rs_->on_attempt_result(r, now, response_started_, host_->random(), &ups_->budget, &ups_->breaker);
  if (d.retry) {
    if (!triggers_.empty()) triggers_ += ',';
    if (d.resend) {
      rm_->on_resend();
      triggers_ += kResendReason;
    } else {
      rm_->on_retry(d.trigger);
      append_trigger_name(triggers_, d.trigger);
    }
    drop_upstream();
    waiting_backoff_ = true;
    arm_wait(now, d.wait, on_backoff_done);
    return d;
  }
  if (is_counted_decline(d.declined)) {
    decline(d.declined, d.mark_exhausted);
  } else {
    mark_exhausted_ = d.mark_exhausted;
  }
  return d;
}

bool Exchange::end_failed_attempt(int status, const char* reason, UpstreamEndpoints::Result verdict,
                                  TimePoint* ended) {
  stop_timer();
  const TimePoint now = end_attempt(verdict);
  if (ended != nullptr) *ended = now;
  drop_upstream();
  if (response_started_) {
    error_reason_ = reason;
    status_ = status_ ? status_ : status;
    if (resp_no_body_) {
      // A HEAD answer, a 204 or a 304: the head the client was given is the
      // whole response, and the upstream failing after it (an HTTP/2 reset
      // before END_STREAM) takes nothing from it. It ends as sent; cutting
      // it would leave an HTTP/1.1 client whose head was not written yet
      // with a connection closed on no answer, which it may send again.
      down_->send_response_end();
      finish();
      return false;
    }
    // Bytes went downstream already: the only honest signal is a close.
    finish_aborted();
    return false;
  }
  return true;
}

void Exchange::handle_failure(const AttemptResult& r, int status, const char* reason,
                              UpstreamEndpoints::Result verdict) {
  TimePoint now;
  if (!end_failed_attempt(status, reason, verdict, &now)) return;
  storm_on_attempt_result(*ups_, *ucfg_, *rm_, *route_, rs_->attempts_started(), r);
  if (legs_in_flight()) {
    // A hedge is still running: it goes on as the request's attempt.
    adopt_leg(nullptr, now, false);
    after_retryable_answer(r, now);
    return;
  }
  RetryState::Decision d = decide_retry(r, now);
  if (d.retry) return;
  // No time left for another attempt: the caller hears of the deadline.
  if (d.declined == Decline::deadline) {
    respond_error(504, "deadline_exceeded");
    return;
  }
  respond_error(status, reason);
}

void Exchange::on_connect_failed(int err, bool dns) {
  if (finished_) return;
  spdlog::debug("connect to {} failed: {}{}", attempt_.endpoint ? attempt_.endpoint->label : "?", uv_strerror(err),
                dns ? " (dns)" : "");
  if (!dns && connect_to_fallback_address()) return;
  AttemptResult r;
  r.outcome = AttemptOutcome::connect_failure;
  r.request_may_have_reached = false;
  // A connect that waited the whole connect_timeout: a black hole, ejected at once.
  bool black_hole = err == UV_ETIMEDOUT && !dns && attempt_.stream && attempt_.stream->connect_timeout() >= ucfg_->connect_timeout;
  handle_failure(r, 502, "connect_failure",
                 black_hole ? UpstreamEndpoints::Result::connect_timeout : UpstreamEndpoints::Result::failure);
}

void Exchange::on_up_error(int err) {
  if (finished_) return;
  spdlog::debug("upstream {} error: {}", attempt_.endpoint ? attempt_.endpoint->label : "?", uv_strerror(err));
  AttemptResult r;
  r.outcome = AttemptOutcome::reset;
  handle_failure(r, 502, "upstream_reset");
}

std::string_view Exchange::request_timeout_header() const { return gen_->config->headers.request_timeout_ms; }

bool Exchange::follows_refusal() const {
  return refused_after_ != 0 && rs_ && rs_->attempts_started() == refused_after_ + 1;
}

// The upstream refused the stream before its application saw it (HTTP/2
// REFUSED_STREAM, or above a GOAWAY's last-stream-id): safe to send again
// whatever the method, on another connection (the first time at once: see
// RetryState::on_attempt_result). No verdict on the endpoint or the
// breaker: a server that closes connections after N requests refuses the
// streams in flight on each one, and is not failing.
void Exchange::on_up_refused() {
  if (finished_) return;
  spdlog::debug("upstream {} refused the stream", attempt_.endpoint ? attempt_.endpoint->label : "?");
  refused_after_ = rs_ ? rs_->attempts_started() : 0;
  AttemptResult r;
  r.outcome = AttemptOutcome::refused;
  r.request_may_have_reached = false;
  handle_failure(r, 502, "upstream_reset", UpstreamEndpoints::Result::cancelled);
}

void Exchange::on_tls_failed(const std::string& why, bool verify) {
  if (finished_) return;
  const char* ep = attempt_.endpoint ? attempt_.endpoint->label.c_str() : "?";
  if (verify) {
    // The upstream is not who it should be: no retry can change that.
    spdlog::warn("upstream {} ({}): TLS: {}", ucfg_->name, ep, why);
    if (end_failed_attempt(502, "upstream_tls")) respond_error(502, "upstream_tls");
    return;
  }
  spdlog::info("upstream {} ({}): TLS handshake failed: {}", ucfg_->name, ep, why);
  AttemptResult r;
  r.outcome = AttemptOutcome::connect_failure;
  r.request_may_have_reached = false;
  handle_failure(r, 502, "connect_failure");
}

void Exchange::on_up_tls_error(const std::string& why) {
  if (finished_) return;
  spdlog::warn("upstream {} ({}): TLS: {}", ucfg_->name, attempt_.endpoint ? attempt_.endpoint->label : "?", why);
  AttemptResult r;
  r.outcome = AttemptOutcome::reset;
  handle_failure(r, 502, "upstream_tls");
}

void Exchange::on_up_bad_response() {
  if (finished_) return;
  // Never retried: the upstream answered, just not in HTTP.
  if (end_failed_attempt(502, "bad_upstream_response")) respond_error(502, "bad_upstream_response");
}

int Exchange::on_up_head(MessageHead& head) {
  if (finished_) return -1;
  if (grpc_call_ && grpc_outcome_follows(head.status, head.headers)) {
    cancel_legs();  // gRPC A6: response headers commit the call
    if (grpc_held_head_) *grpc_held_head_ = head;
    else grpc_held_head_ = std::make_unique<MessageHead>(head);
    grpc_head_held_ = true;
    return 0;  // the attempt timer goes on bounding the wait
  }
  return judge_response(head, head.headers);
}

int Exchange::judge_response(MessageHead& head, const Headers& outcome_fields) {
  // The attempt's timer is not stopped here: whatever comes of the verdict
  // re-arms it in place (the stall guard, a retry's backoff) or stops it
  // (no body, a failure), with no heap removal and insertion in between.
  // Nothing below returns to the loop, so it cannot fire meanwhile.
  const bool in_trailers = &outcome_fields != &head.headers;
  const AttemptResult r = response_result(head, outcome_fields);
  const UpstreamEndpoints::Result verdict = response_verdict(r);
  const TimePoint now = end_attempt(verdict);
  // The upstream's recent latencies (retry.hedge.after, retry.min_time_left).
  if (attempt_.first) ups_->latency.first_attempt.record(now - attempt_.started, now);
  if (verdict == UpstreamEndpoints::Result::success) ups_->latency.success.record(now - attempt_.started, now);
  storm_on_attempt_result(*ups_, *ucfg_, *rm_, *route_, rs_->attempts_started(), r);
  if (legs_in_flight() && !HedgePlan::wins(r, route_->retry.retry_on)) {
    // A retryable answer while a hedge runs: the hedge goes on as the
    // request's attempt, this answer is dropped.
    drop_upstream();
    adopt_leg(nullptr, now, false);
    after_retryable_answer(r, now);
    return -1;
  }
  if (decide_retry(r, now).retry) return -1;
  cancel_legs();  // this answer wins
  answered_by_hedge_ = attempt_.hedge;

  status_ = head.status;
  if (r.grpc) grpc_answer_ = r.grpc;
  resp_no_body_ = head_request_ || head.status == 204 || head.status == 304;
  Headers extra;
  // An outcome read from the trailers is marked there (on_up_trailers).
  if (!in_trailers) add_exhausted_field(extra);
  DownstreamStream::ResponseMeta meta;
  meta.no_body = resp_no_body_;
  meta.head_request = head_request_;
  meta.via = via_member(head);  // the version the upstream answered in
  meta.extra = &extra;
  if (!down_->send_response_head(head, meta)) {
    spdlog::info("upstream {}: response cannot be carried to this client", attempt_.endpoint->label);
    on_up_bad_response();  // answered here: a codec need not report it again
    return -1;
  }
  response_started_ = true;
  if (resp_no_body_) stop_timer();
  else arm_timer(lcfg_->limits.idle_timeout, on_stream_stalled);
  return head_request_ ? 1 : 0;
}

AttemptResult Exchange::response_result(const MessageHead& head, const Headers& outcome_fields) const {
  const bool in_trailers = &outcome_fields != &head.headers;
  AttemptResult r;
  r.outcome = AttemptOutcome::response;
  r.status = head.status;
  r.inner_exhausted = response_marks_exhausted(head.headers, cfg_->headers) ||
                      (in_trailers && response_marks_exhausted(outcome_fields, cfg_->headers));
  if (const Header* ra = find_header(head.headers, "retry-after")) {
    r.retry_after = parse_retry_after(ra->value, std::chrono::system_clock::now());
  }
  if (grpc_call_) read_grpc_outcome(head.status, outcome_fields, r);
  return r;
}

UpstreamEndpoints::Result Exchange::response_verdict(const AttemptResult& r) const {
  using Result = UpstreamEndpoints::Result;
  const bool server_error = r.grpc ? attempt_failed(r, route_->retry.retry_on) : r.status >= 500 && r.status != 501;
  const bool listed = r.grpc ? route_->retry.retry_on.has_grpc_status(*r.grpc)
                             : route_->retry.retry_on.has_status(r.status);
  return !server_error ? Result::success : listed ? Result::failure : Result::server_error;
}

bool Exchange::release_grpc_head(const Headers* trailers) {
  grpc_head_held_ = false;
  MessageHead head = std::move(*grpc_held_head_);
  return judge_response(head, trailers ? *trailers : head.headers) >= 0 && !finished_;
}

int Exchange::on_up_body(const char* data, size_t len) {
  if (finished_) return -1;
  if (grpc_head_held_) {
    if (len == 0) return 0;
    // The first message commits the call: its outcome can no longer be retried.
    if (!release_grpc_head(nullptr)) return -1;
  }
  if (!down_->send_response_body(std::string_view(data, len))) {
    // The client is gone (reset): stop pulling the body from the upstream.
    abort("client_closed");
    down_->abort_stream("client_closed");
    return -1;
  }
  if (down_->reports_body_sent()) response_window_owed_ += len;
  if (down_->queued_bytes() > down_->message_watermarks().high && attempt_.stream) {
    attempt_.stream->pause_response();
    response_paused_ = true;
    down_->notify_when_drained();
  }
  // Progress pushes the stall guard back (a later deadline costs the timer
  // list no work).
  arm_timer(lcfg_->limits.idle_timeout, on_stream_stalled);
  return 0;
}

void Exchange::on_up_trailers(Headers& trailers) {
  if (finished_) return;
  if (grpc_head_held_) {
    // Headers, then trailers with no message between: the outcome is here.
    if (!release_grpc_head(&trailers)) return;
    add_exhausted_field(trailers);
  } else if (grpc_call_) {
    if (const Header* s = find_header(trailers, kGrpcStatusField)) grpc_answer_ = parse_grpc_status(s->value);
  }
  if (!response_started_) return;
  down_->send_response_trailers(trailers);
}

void Exchange::on_up_end(bool reusable) {
  if (finished_) return;
  // A held head and no message or trailers after it.
  if (grpc_head_held_ && !release_grpc_head(nullptr)) return;
  if (UpstreamStream* u = attempt_.stream) {
    attempt_.stream = nullptr;
    u->release(reusable && attempt_.request_end_sent);
  }
  down_->send_response_end();
  finish();
}

void Exchange::on_up_read_done() {
  if (!finished_) down_->flush();
}

void Exchange::add_exhausted_field(Headers& out) const {
  if (!mark_exhausted_) return;
  std::string n;
  append_decimal(n, rs_->attempts_started());
  out.push_back({cfg_->headers.retry_exhausted, std::move(n)});
}

void Exchange::respond_error(int status, const char* reason, Headers extra) {
  if (finished_) return;
  stop_timer();
  drop_upstream();
  if (response_started_) {
    finish_aborted();
    return;
  }
  status_ = status;
  error_reason_ = reason;
  if (grpc_call_) {  // the HTTP/2 stream answers in gRPC (append_grpc_error_fields)
    grpc_answer_ = grpc_status_for_error(reason, status);
    if (const Header* g = find_header(extra, kGrpcStatusField))
      grpc_answer_ = parse_grpc_status(g->value).value_or(*grpc_answer_);
  }
  add_exhausted_field(extra);
  response_started_ = true;
  down_->send_proxy_response(status, reason, extra, head_request_, request_complete_);
  finish();
}

void Exchange::record(int status) {
  TimePoint now = Clock::now();
  double secs = std::chrono::duration<double>(now - started_).count();
  const WireProtocol protocol = down_->protocol();
  rm_->on_response(status, secs, rs_ ? rs_->attempts_started() : 0, steady_ms(now), protocol == WireProtocol::h2);
  const uint32_t hedges = hedge_ ? hedge_->sent() : 0;
  if (hedges > 0) {
    rm_->on_hedge(RouteMetrics::HedgeResult::won, answered_by_hedge_ ? 1 : 0);
    rm_->on_hedge(RouteMetrics::HedgeResult::lost, hedges - (answered_by_hedge_ ? 1 : 0));
  }
  if (grpc_answer_) rm_->on_grpc_response(*grpc_answer_);
  const uint64_t bytes_out = bytes_out_ + down_->response_bytes();
  host_->runtime().metrics.bytes_out_total.fetch_add(bytes_out, std::memory_order_relaxed);
  if (!lcfg_->access_log) return;
  AccessRecord a;
  a.listener = lcfg_->name;
  a.route = route_->name;
  a.method = req_.method;
  a.path = req_.target;
  a.upstream_endpoints = endpoints_;
  a.retry_reasons = triggers_;
  a.declined = is_counted_decline(declined_) ? decline_name(declined_) : "";
  a.error = error_reason_ ? error_reason_ : "";
  a.status = status;
  a.attempts = rs_ ? rs_->attempts_started() : 0;
  a.hedges = hedges;
  a.duration_ms = secs * 1000.0;
  a.bytes_in = body_.received() + tunnel_bytes_in_;
  a.bytes_out = bytes_out;
  a.protocol = wire_protocol_name(protocol);
  a.stream_id = down_->stream_id();
  a.unix_ms = access_log_unix_ms(now);
  if (grpc_answer_) a.grpc_status = grpc_code(*grpc_answer_);
  a.caller = down_->caller();
  write_access_log(a);
}

void Exchange::finish() {
  if (finished_) return;
  finished_ = true;
  stop_timer();
  cancel_legs();
  record(status_);
  down_->exchange_done();  // this object dies on the next loop turn
}

void Exchange::finish_aborted() {
  // The response was cut short after bytes went downstream: the client must
  // see the truncation (HTTP/1 closes the connection, HTTP/2 resets the stream).
  if (finished_) return;
  finished_ = true;
  stop_timer();
  cancel_legs();
  drop_upstream();
  record(status_ ? status_ : 502);
  down_->abort_stream(error_reason_ ? error_reason_ : "upstream_reset");
}

void Exchange::abort(const char* reason) {
  if (finished_) return;
  finished_ = true;
  stop_timer();
  if (attempt_.stream && !response_started_) end_attempt(UpstreamEndpoints::Result::cancelled);  // no result: free probe slots
  cancel_legs();
  drop_upstream();
  if (!error_reason_) error_reason_ = reason;
  record(tunnel_ ? 101 : 499);  // the client went away before the answer was complete (or ended a tunnel)
}

}  // namespace onelayer
