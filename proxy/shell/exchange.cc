// One downstream request and its upstream attempts. The retry decisions come
// from the pure core (RetryState); this file carries them out: timers,
// replaying the buffered body, endpoint choice, counters, access log.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/http_status.h"
#include "core/retry_after.h"
#include "shell/downstream.h"
#include "shell/endpoint_log.h"
#include "shell/endpoint_state.h"
#include "shell/exchange.h"
#include "shell/http1_encoder.h"
#include "shell/logging.h"
#include "shell/proxy_responses.h"
#include "shell/upstream.h"
#include "shell/worker.h"

namespace onelayer {

static constexpr size_t kHighWater = 256 * 1024;  // stop reading the other side above this
static constexpr size_t kLowWater = 64 * 1024;    // and resume below this

static int64_t steady_ms(TimePoint t) {
  return std::chrono::duration_cast<Millis>(t.time_since_epoch()).count();
}

// ---- The storm tools (docs/storm.md): small calls into the pure core.

// Hidden retries: an owned request whose (id, attempt) was seen before, or
// that an Envoy hop retried. Counts and warns; the request is not changed.
static void storm_note_hidden_retry(Runtime& rt, const Route& route, const RetryOwnership& own,
                                    const Headers& headers) {
  HiddenRetryDetector::Signals sig = HiddenRetryDetector::read_signals(headers);
  if (!sig.key && sig.envoy_attempt_count <= 1) return;
  HiddenRetryDetector::Verdict v = rt.hidden_retries.observe(route.name, own.owner, sig, Clock::now());
  if (v.warn) {
    spdlog::warn("route {}: hidden retry: a hop between retry owner {} and this layer sent the same attempt "
                 "again (its own retries multiply the owner's; see onelayer_hidden_retries_total)",
                 route.name, v.owner);
  }
}

// Every attempt outcome the upstream (or an injected fault) gave: the
// successes-mode budget and onelayer_attempt_failures_total.
static void storm_on_attempt_result(UpstreamShared& ups, const Upstream& ucfg, RouteMetrics& rm, const Route& route,
                                    uint32_t attempt, const AttemptResult& r) {
  bool failed = attempt_failed(r, route.retry.retry_on);
  if (ucfg.retry_budget.mode == BudgetMode::successes) ups.budget.on_attempt_result(failed, Clock::now());
  if (failed) rm.on_attempt_failure(attempt <= 1, RetryTrigger{r.outcome, r.status});
}

Exchange::Exchange(DownConn* d, GenerationPtr gen, int listener_index, const Route* route,
                   RouteMetrics* rm, MessageHead& head, std::string routing_target)
    : down_(d),
      w_(d->worker()),
      gen_(std::move(gen)),
      route_(route),
      rm_(rm),
      target_(std::move(routing_target)),
      body_(route->retry.buffer_limit,
            !(head.has_content_length && head.content_length > route->retry.buffer_limit)) {
  cfg_ = gen_->config.get();
  lcfg_ = &cfg_->listeners[static_cast<size_t>(listener_index)];
  ucfg_ = &cfg_->upstreams[route_->upstream_index];
  ups_ = gen_->upstreams[route_->upstream_index].get();
  eps_ = gen_->endpoints[route_->upstream_index].get();
  // Take the parsed head; the parser's storage is reused for the next one.
  req_.method.swap(head.method);
  req_.target.swap(head.target);
  req_.headers.swap(head.headers);
  req_.http_major = head.http_major;
  req_.http_minor = head.http_minor;
  req_.chunked = head.chunked;
  req_.has_content_length = head.has_content_length;
  req_.content_length = head.content_length;
  req_.keep_alive = head.keep_alive;
}

Exchange::~Exchange() {
  cancel_member();
  if (attempt_.stream) attempt_.stream->detach_and_close();
}

void Exchange::start() {
  started_ = Clock::now();
  ownership_ = detect_outer_owner(req_.headers, cfg_->headers);
  // Hidden-retry detection on requests an outer layer owns.
  if (ownership_.outer_owned) storm_note_hidden_retry(w_->runtime(), *route_, ownership_, req_.headers);
  Millis timeout = route_->timeout;
  if (auto in = incoming_timeout_ms(req_.headers, cfg_->headers)) timeout = std::min(timeout, Millis(*in));
  up_body_.set_framing(req_.chunked              ? BodyFraming::chunked
                       : req_.has_content_length ? BodyFraming::length
                                                 : BodyFraming::none);
  const bool has_body = req_.chunked || req_.content_length > 0;
  head_request_ = req_.method == "HEAD";
  request_complete_ = false;
  const std::string& key = route_->retry.idempotency_key;
  bool has_key = false;
  if (!key.empty()) {
    const Header* h = find_header(req_.headers, key);
    has_key = h && !h->value.empty();
  }
  rs_.emplace(route_->retry, timeout, started_,
              RetryState::Request{req_.method, has_key, body_.replayable(), ownership_.outer_owned});
  ups_->budget.on_request(started_);
  // The id of the retry-attempt baggage member (only when it is written).
  if (rs_->owns_retries() && route_->inner_hops == InnerHops::forbid && cfg_->propagate_baggage)
    attempt_id_ = w_->random().next() | 1;
  if (timeout.count() <= 0) {
    // The caller's x-request-timeout-ms left nothing: no attempt at all.
    respond_error(504, "deadline_exceeded");
    return;
  }
  if (has_body && body_.replayable()) {
    // A body that fits buffer_limit is read whole first (it is buffered for
    // replay anyway): a malformed chunk, a bad trailer or max_body_bytes then
    // refuse the request before a byte of it reaches an upstream.
    awaiting_body_ = true;
    arm_timer(rs_->time_left(started_), on_body_deadline);
    return;
  }
  start_attempt();
}

void Exchange::start_when_body_buffered() {
  awaiting_body_ = false;
  stop_timer();
  start_attempt();
}

void Exchange::arm_timer(Millis ms, void (*cb)(uv_timer_t*)) {
  down_->arm_timer(static_cast<uint64_t>(std::max<int64_t>(0, ms.count())), cb);
}

void Exchange::stop_timer() { down_->disarm_timer(); }

static Exchange* exchange_of(uv_timer_t* t) {
  return Conn::of<DownConn>(t)->exchange();
}

void Exchange::on_attempt_timeout(uv_timer_t* t) {
  Exchange* ex = exchange_of(t);
  if (!ex || ex->finished_) return;
  AttemptResult r;
  if (ex->attempt_.stream && !ex->attempt_.stream->connected()) {
    r.outcome = AttemptOutcome::connect_failure;
    r.request_may_have_reached = false;
  } else {
    r.outcome = AttemptOutcome::timeout;
  }
  ex->handle_failure(r, 504, "deadline_exceeded");
}

// The response body made no progress for the listener's idle_timeout: the
// upstream stalled, or the client stopped reading and backpressure paused us.
void Exchange::on_stream_stalled(uv_timer_t* t) {
  Exchange* ex = exchange_of(t);
  if (!ex || ex->finished_) return;
  spdlog::info("route {}: response body stalled for {} ms, closing", ex->route_->name,
               ex->lcfg_->limits.idle_timeout.count());
  ex->error_reason_ = "stream_stalled";
  ex->finish_aborted();
}

// The deadline passed while the client was still sending the body: nothing
// went upstream.
void Exchange::on_body_deadline(uv_timer_t* t) {
  Exchange* ex = exchange_of(t);
  if (!ex || ex->finished_ || !ex->awaiting_body_) return;
  ex->awaiting_body_ = false;
  ex->declined_ = Decline::none;
  ex->respond_error(504, "deadline_exceeded");
}

void Exchange::on_backoff_done(uv_timer_t* t) {
  Exchange* ex = exchange_of(t);
  if (!ex || ex->finished_) return;
  ex->start_attempt();
}

void Exchange::start_attempt() {
  waiting_backoff_ = false;
  TimePoint now = Clock::now();
  // Fault drills and route fault blocks (nothing to do unless one exists).
  if (!fault_delayed_ && (route_->fault.enabled || w_->runtime().faults.any_drill())) {
    FaultInjector::Decision f = w_->runtime().faults.decide(route_->fault, ucfg_->name, now, w_->random());
    if (f.delay.count() > 0) {
      rm_->on_fault("delay");
      fault_delayed_ = true;
      waiting_backoff_ = true;  // body bytes wait in body_ meanwhile
      arm_timer(std::min(f.delay, rs_->time_left(now)), on_backoff_done);
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
      if (!endpoints_.empty()) endpoints_ += ',';
      endpoints_ += "fault";
      AttemptResult r;
      r.status = f.abort_status;
      storm_on_attempt_result(*ups_, *ucfg_, *rm_, *route_, rs_->attempts_started(), r);
      if (decide_retry(r, now).retry) return;
      respond_error(f.abort_status, "fault_injected");
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

  EndpointState* ep = pick_endpoint(now);  // begins attempt_
  if (!endpoints_.empty()) endpoints_ += ',';
  endpoints_ += ep->label;

  if (!body_.replayable() && rs_->attempts_started() > 1) {
    // Cannot happen (the core refuses), but never replay a partial body.
    respond_error(502, "upstream_reset");
    return;
  }
  body_.rewind();
  arm_timer(t, on_attempt_timeout);

  // An idle connection to the picked address, else a new one. One made
  // under other TLS settings (before a reload) is never reused.
  const std::shared_ptr<TlsClientContext>& tls = gen_->tls.upstreams[route_->upstream_index];
  while (UpConn* pooled = ep->take_idle(attempt_.address)) {
    if (pooled->tls_context() != tls.get()) {
      pooled->detach_and_close();
      continue;
    }
    attempt_.stream = pooled;
    pooled->attach(this, head_request_);
    on_connected();
    return;
  }
  attempt_.stream = new UpConn(w_, ep, attempt_.address);
  attempt_.stream->use_tls(tls);  // nullptr: cleartext
  attempt_.stream->attach(this, head_request_);
  attempt_.stream->connect(std::min(ucfg_->connect_timeout, t));
}

// The balancer's choice for this attempt (a retry prefers a member not
// tried yet), as this worker's EndpointState; a DNS name's addresses are
// handed to the balancer whenever this worker resolved them anew.
EndpointState* Exchange::pick_endpoint(TimePoint now) {
  UpstreamEndpoints::Pick p = eps_->pick(now, w_->random(), tried_, last_member_);
  uint32_t e = p.member == UpstreamEndpoints::kNone ? 0 : p.endpoint;
  EndpointState* ep = w_->endpoint(ucfg_->endpoints[e], *ucfg_);
  last_member_ = p.member;
  if (p.member < 64) tried_ |= uint64_t{1} << p.member;
  int addr = -1;
  for (size_t i = 0; i < ep->addr_text.size() && !p.address.empty(); ++i) {
    if (ep->addr_text[i] == p.address) addr = static_cast<int>(i);
  }
  attempt_.begin(ep, p.member, addr, now);
  if (!ep->literal && !ep->addr_text.empty() && (ep->synced_to != eps_ || ep->synced_version != ep->addrs_version)) {
    eps_->set_addresses(e, ep->addr_text);
    ep->synced_to = eps_;
    ep->synced_version = ep->addrs_version;
  }
  return ep;
}

TimePoint Exchange::end_attempt(UpstreamEndpoints::Result r) {
  using Result = UpstreamEndpoints::Result;
  TimePoint now = Clock::now();
  // Without a member (a failure after the response head was judged) the
  // breaker counts the failure as before.
  bool upstream_failing = r != Result::success && r != Result::cancelled;
  if (attempt_.verdict_owed()) {
    uint32_t m = attempt_.take_member();
    UpstreamEndpoints::Report rep = eps_->report(m, r, now, now - attempt_.started);
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

void Exchange::on_connected() { send_head_and_body(); }

void Exchange::send_head_and_body() {
  TimePoint now = Clock::now();
  RequestRewrite rw;
  rw.config = cfg_;
  rw.inner_hops = route_->inner_hops;
  rw.claim_ownership = rs_->owns_retries() && route_->inner_hops == InnerHops::forbid;
  rw.attempt = rs_->attempts_started();
  rw.time_left_ms = route_->inner_hops == InnerHops::pass ? -1 : rs_->attempt_timeout(now).count();
  rw.client_ip = down_->peer_ip();
  rw.outer_owned = ownership_.outer_owned;
  rw.attempt_id = attempt_id_;  // the retry-attempt baggage member
  rw.via = via_member();
  if (down_->tls()) rw.proto = "https";  // the client spoke TLS to this listener

  std::string& out = w_->scratch();
  out.clear();
  out += req_.method;
  out += ' ';
  out += target_;
  out += " HTTP/1.1\r\n";
  if (!append_rewritten_request_headers(req_.headers, rw, out)) {
    out += "Host: ";
    if (!ucfg_->endpoints.empty()) out += attempt_.endpoint->label;
    out += "\r\n";
  }
  if (!upgrade_.empty()) {  // Upgrade and Connection are hop-by-hop: said anew
    out += "Connection: Upgrade\r\nUpgrade: ";
    out += upgrade_;
    out += "\r\n";
  }
  up_body_.append_head_lines(out, req_.content_length);
  out += "\r\n";
  const std::string_view owed = body_.pending();
  if (!owed.empty()) up_body_.append(out, owed);
  if (request_complete_) {
    out += up_body_.last();
    attempt_.request_end_sent = true;
  }
  int rc = w_->write(attempt_.stream, out);
  forwarded_any_ = true;
  body_.sent_pending();
  if (rc < 0) {
    AttemptResult r;
    r.outcome = AttemptOutcome::reset;
    handle_failure(r, 502, "upstream_reset");
  }
}

void Exchange::send_body_bytes(const char* data, size_t len) {
  uv_buf_t parts[3];
  w_->write(attempt_.stream, parts, up_body_.frame(std::string_view(data, len), parts));
}

void Exchange::send_request_end() {
  attempt_.request_end_sent = true;
  if (up_body_.chunked()) w_->write(attempt_.stream, up_body_.last());
}

bool Exchange::upstream_ready() const {
  return attempt_.stream && attempt_.stream->connected() && !waiting_backoff_ && !attempt_.stream->closing();
}

void Exchange::on_request_body(const char* data, size_t len) {
  if (finished_) return;
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
  size_t queued = body_.queued() + (attempt_.stream ? attempt_.stream->write_queue() : 0);
  if (!body_.replayable() && queued > kHighWater) down_->hold_reading();
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
  if (down_->reading_held() && attempt_.stream->write_queue() < kLowWater) down_->release_reading();
}

void Exchange::on_down_drained() {
  if (attempt_.stream && response_started_ && down_->write_queue() < kLowWater) attempt_.stream->resume_reading();
}

void Exchange::drop_upstream(bool reset) {
  cancel_member();
  if (attempt_.stream) {
    attempt_.stream->detach_and_close(reset);
    attempt_.stream = nullptr;
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
  respond_error(status, reason, "x-onelayer-forwarded: partial\r\n");
}

void Exchange::decline(Decline why, bool mark_exhausted) {
  declined_ = why;
  rm_->on_declined(why);  // counts only the reasons that are labels
  mark_exhausted_ = mark_exhausted;
}

RetryState::Decision Exchange::decide_retry(const AttemptResult& r, TimePoint now) {
  RetryState::Decision d =
      rs_->on_attempt_result(r, now, response_started_, w_->random(), &ups_->budget, &ups_->breaker);
  if (d.retry) {
    rm_->on_retry(d.trigger.outcome, d.trigger.status);
    if (!triggers_.empty()) triggers_ += ',';
    append_trigger_name(triggers_, d.trigger);
    drop_upstream();
    waiting_backoff_ = true;
    arm_timer(d.wait, on_backoff_done);
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
    // Bytes went downstream already: the only honest signal is a close.
    error_reason_ = reason;
    status_ = status_ ? status_ : status;
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
  stop_timer();
  AttemptResult r;
  r.outcome = AttemptOutcome::response;
  r.status = head.status;
  r.inner_exhausted = response_marks_exhausted(head.headers, cfg_->headers);
  if (const Header* ra = find_header(head.headers, "retry-after")) {
    r.retry_after = parse_retry_after(ra->value, std::chrono::system_clock::now());
  }
  using Result = UpstreamEndpoints::Result;
  bool server_error = head.status >= 500 && head.status != 501;
  const Result verdict = !server_error                                   ? Result::success
                         : route_->retry.retry_on.has_status(head.status) ? Result::failure
                                                                          : Result::server_error;
  const TimePoint now = end_attempt(verdict);
  storm_on_attempt_result(*ups_, *ucfg_, *rm_, *route_, rs_->attempts_started(), r);
  if (decide_retry(r, now).retry) return -1;

  status_ = head.status;
  bool http11_down = req_.http_major == 1 && req_.http_minor >= 1;
  resp_no_body_ = head_request_ || head.status == 204 || head.status == 304;

  // The head waits in pending_head_ until the first body bytes (or the end of
  // this read): head and body then leave in one write.
  std::string& out = pending_head_;
  out.clear();
  size_t head_bytes = 64 + head.reason.size();
  for (const Header& h : head.headers) head_bytes += h.name.size() + h.value.size() + 4;
  out.reserve(head_bytes + 128);  // one allocation for the whole head
  std::optional<std::string> coded = response_transfer_codings(head.headers);
  if (!coded) {
    spdlog::info("upstream {}: response Transfer-Encoding applies chunked twice or not last", attempt_.endpoint->label);
    return -1;
  }
  const std::string& codings = *coded;
  if (!codings.empty() && !resp_no_body_ && !http11_down) {
    // An HTTP/1.0 client cannot be told of a transfer coding: refuse rather
    // than hand it coded bytes marked as plain.
    spdlog::info("upstream {}: response Transfer-Encoding {} cannot reach an HTTP/1.0 client", attempt_.endpoint->label,
                 codings);
    return -1;
  }
  out += "HTTP/1.1 ";
  append_decimal(out, static_cast<uint64_t>(head.status));
  out += ' ';
  // A reason phrase with a control byte (an escape sequence for the client's
  // terminal, a NUL) or an empty one is replaced by the standard one.
  out += is_clean_reason_phrase(head.reason) ? std::string_view(head.reason) : std::string_view(status_text(head.status));
  out += "\r\n";
  if (size_t invalid = append_rewritten_response_headers(head.headers, via_member(), out)) {
    spdlog::info("upstream {}: {} response header(s) with invalid name or value dropped", attempt_.endpoint->label,
                 invalid);
  }
  // Without a length the body is re-framed as chunked (the upstream's
  // codings in front), or, for an HTTP/1.0 client, ends with the connection.
  // A response to HEAD and a 304 keep the length they announce.
  down_body_.set_framing(response_framing(head.has_content_length, resp_no_body_, http11_down));
  down_body_.append_head_lines(out, head.content_length, codings,
                               head.has_content_length && (head_request_ || head.status == 304));
  if (mark_exhausted_) {
    fmt::format_to(std::back_inserter(out), "{}: {}\r\n", cfg_->headers.retry_exhausted, rs_->attempts_started());
  }
  const bool close_delimited = down_body_.framing() == BodyFraming::close_delimited;
  bool close = down_->closes_after_response() || w_->draining() || close_delimited;
  if (close) down_->close_after_response();
  if (!close) out += down_->keep_alive_header();
  out += close ? "Connection: close\r\n\r\n" : "\r\n";
  bytes_out_ += out.size();
  response_started_ = true;
  if (!resp_no_body_) arm_timer(lcfg_->limits.idle_timeout, on_stream_stalled);
  return head_request_ ? 1 : 0;
}

int Exchange::on_up_body(const char* data, size_t len) {
  if (finished_) return -1;
  bytes_out_ += len;
  uv_buf_t parts[4];
  unsigned n = 0;
  if (!pending_head_.empty()) parts[n++] = uv_buf_init(pending_head_.data(), static_cast<unsigned>(pending_head_.size()));
  n += down_body_.frame(std::string_view(data, len), parts + n);
  int rc = w_->write(down_, parts, n);
  pending_head_.clear();
  if (rc < 0) {
    // The client is gone (reset): stop pulling the body from the upstream.
    down_->abort_connection();
    return -1;
  }
  if (down_->write_queue() > kHighWater && attempt_.stream) attempt_.stream->pause_reading();
  // Progress pushes the stall guard back. The connection timer re-arms
  // lazily (Conn::arm_timer), so a later deadline per chunk costs no timer work.
  arm_timer(lcfg_->limits.idle_timeout, on_stream_stalled);
  return 0;
}

void Exchange::on_up_end(bool reusable) {
  if (finished_) return;
  pending_head_ += down_body_.last();
  flush_head();
  if (attempt_.stream) {
    UpConn* u = attempt_.stream;
    attempt_.stream = nullptr;
    if (reusable && attempt_.request_end_sent) {
      u->release_to_pool();
    } else {
      u->detach_and_close();
    }
  }
  finish(down_body_.framing() == BodyFraming::close_delimited);
}

void Exchange::flush_head() {
  if (pending_head_.empty()) return;
  int rc = w_->write(down_, pending_head_);
  pending_head_.clear();
  if (rc < 0) down_->abort_connection();
}

void Exchange::respond_error(int status, const char* reason, std::string_view extra_headers) {
  if (finished_) return;
  stop_timer();
  drop_upstream();
  if (response_started_) {
    finish_aborted();
    return;
  }
  status_ = status;
  error_reason_ = reason;
  std::string extra(extra_headers);
  if (mark_exhausted_) extra += fmt::format("{}: {}\r\n", cfg_->headers.retry_exhausted, rs_->attempts_started());
  bool close = down_->closes_after_response() || w_->draining() || !request_complete_;
  if (close) {
    down_->close_after_response();
  } else {
    extra += down_->keep_alive_header();
  }
  std::string out;
  append_proxy_response(out, status, reason, close, extra, head_request_);
  bytes_out_ += out.size();
  response_started_ = true;
  w_->write(down_, out);
  finish(close);
}

void Exchange::record(int status) {
  TimePoint now = Clock::now();
  double secs = std::chrono::duration<double>(now - started_).count();
  rm_->on_response(status, secs, rs_ ? rs_->attempts_started() : 0, steady_ms(now));
  w_->runtime().metrics.bytes_out_total.fetch_add(bytes_out_, std::memory_order_relaxed);
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
  a.duration_ms = secs * 1000.0;
  a.bytes_in = body_.received() + tunnel_bytes_in_;
  a.bytes_out = bytes_out_;
  a.unix_ms = std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch()).count();
  write_access_log(a);
}

void Exchange::finish(bool close_after) {
  if (finished_) return;
  finished_ = true;
  stop_timer();
  record(status_);
  down_->exchange_done(close_after);  // may free nothing now; this object dies on the next turn
}

void Exchange::finish_aborted() {
  // The response was cut short after bytes went downstream: close the
  // downstream connection so the client sees the truncation.
  if (finished_) return;
  finished_ = true;
  stop_timer();
  drop_upstream();
  record(status_ ? status_ : 502);
  down_->abort_connection();
}

void Exchange::abort(const char* reason) {
  if (finished_) return;
  finished_ = true;
  stop_timer();
  if (attempt_.stream && !response_started_) end_attempt(UpstreamEndpoints::Result::cancelled);  // no result: free probe slots
  drop_upstream();
  if (!error_reason_) error_reason_ = reason;
  record(tunnel_ ? 101 : 499);  // the client went away before the answer was complete (or ended a tunnel)
}

}  // namespace onelayer
