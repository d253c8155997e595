// One downstream request and its upstream attempts. The retry decisions come
// from the pure core (RetryState); this file carries them out: timers,
// replaying the buffered body, endpoint choice, counters, access log.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>

#include "core/retry_after.h"
#include "shell/connections.h"
#include "shell/endpoint_log.h"
#include "shell/logging.h"
#include "shell/proxy_responses.h"

namespace onelayer {

static constexpr size_t kHighWater = 256 * 1024;  // stop reading the other side above this
static constexpr size_t kLowWater = 64 * 1024;    // and resume below this

static int64_t steady_ms(TimePoint t) {
  return std::chrono::duration_cast<Millis>(t.time_since_epoch()).count();
}

Exchange::Exchange(DownConn* d, GenerationPtr gen, int listener_index, const Route* route,
                   RouteMetrics* rm, MessageHead& head, std::string routing_target)
    : down_(d), w_(d->worker_), gen_(std::move(gen)), route_(route), rm_(rm), target_(std::move(routing_target)) {
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
  if (up_) up_->detach_and_close();
}

void Exchange::start() {
  started_ = Clock::now();
  wall_start_ = std::chrono::system_clock::now();
  ownership_ = detect_outer_owner(req_.headers, cfg_->headers);
  Millis timeout = route_->timeout;
  if (auto in = incoming_timeout_ms(req_.headers, cfg_->headers)) timeout = std::min(timeout, Millis(*in));
  req_chunked_ = req_.chunked;
  req_has_body_ = req_chunked_ || req_.content_length > 0;
  head_request_ = req_.method == "HEAD";
  request_complete_ = false;
  replayable_ = !(req_.has_content_length && req_.content_length > route_->retry.buffer_limit);
  const std::string& key = route_->retry.idempotency_key;
  bool has_key = false;
  if (!key.empty()) {
    const Header* h = find_header(req_.headers, key);
    has_key = h && !h->value.empty();
  }
  rs_.emplace(route_->retry, timeout, started_,
              RetryState::Request{req_.method, has_key, replayable_, ownership_.outer_owned});
  ups_->budget.on_request(started_);
  if (timeout.count() <= 0) {
    // The caller's x-request-timeout-ms left nothing: no attempt at all.
    respond_error(504, "deadline_exceeded");
    return;
  }
  if (req_has_body_ && replayable_) {
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
  auto* d = static_cast<DownConn*>(t->data);
  return d->ex_.get();
}

void Exchange::on_attempt_timeout(uv_timer_t* t) {
  Exchange* ex = exchange_of(t);
  if (!ex || ex->finished_) return;
  AttemptResult r;
  if (ex->up_ && !ex->up_->connected_) {
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
  ex->declined_ = nullptr;
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
  if (!ups_->breaker.allow(now)) {
    RetryState::Decision d = rs_->on_circuit_open();
    declined_ = "circuit_open";
    rm_->on_declined("circuit_open");
    mark_exhausted_ = d.mark_exhausted;
    respond_error(503, "circuit_open");
    return;
  }
  Millis t = rs_->attempt_timeout(now);
  if (t.count() <= 0) {
    declined_ = "deadline";
    rm_->on_declined("deadline");
    mark_exhausted_ = rs_->owns_retries();
    respond_error(504, "deadline_exceeded");
    return;
  }
  rs_->on_attempt_started();
  rm_->on_attempt();

  EndpointState* ep = pick_endpoint(now);
  last_ep_ = ep;
  if (!endpoints_.empty()) endpoints_ += ',';
  endpoints_ += ep->label;

  if (!replayable_ && rs_->attempts_started() > 1) {
    // Cannot happen (the core refuses), but never replay a partial body.
    respond_error(502, "upstream_reset");
    return;
  }
  body_sent_ = 0;
  request_end_sent_ = false;
  arm_timer(t, on_attempt_timeout);

  // A DNS name's idle connections may lead to other addresses (members):
  // take one to the picked address, else open a new one.
  const std::shared_ptr<TlsClientContext>& tls = gen_->tls.upstreams[route_->upstream_index];
  for (size_t k = ep->idle.size(); k-- > 0;) {
    UpConn* u = ep->idle[k];
    if (pick_addr_ >= 0 && u->addr_used_ != pick_addr_) continue;
    if (u->tls_ctx_ != tls) {  // TLS HOOK: made under other TLS settings (a reload): never reused
      u->detach_and_close();
      continue;
    }
    ep->idle.erase(ep->idle.begin() + static_cast<std::ptrdiff_t>(k));
    if (u->closing()) continue;
    u->idle_ = false;
    u->disarm_timer();
    up_ = u;
    u->attach(this);
    u->expect_no_body_ = head_request_;
    on_connected();
    return;
  }
  UpConn* u = new UpConn(w_, ep);
  u->tls_ctx_ = tls;  // TLS HOOK: the upstream's TLS context (nullptr: cleartext)
  up_ = u;
  u->attach(this);
  u->expect_no_body_ = head_request_;
  u->addr_index_ = pick_addr_;
  u->connect(std::min(ucfg_->connect_timeout, t));
}

// The balancer's choice for this attempt (a retry prefers a member not
// tried yet), as this worker's EndpointState; a DNS name's addresses are
// handed to the balancer whenever this worker resolved them anew.
EndpointState* Exchange::pick_endpoint(TimePoint now) {
  UpstreamEndpoints::Pick p = eps_->pick(now, w_->random(), tried_, last_member_);
  uint32_t e = p.member == UpstreamEndpoints::kNone ? 0 : p.endpoint;
  EndpointState* ep = w_->endpoint(ucfg_->endpoints[e], *ucfg_);
  member_ = p.member;
  last_member_ = p.member;
  attempt_started_ = now;
  if (p.member < 64) tried_ |= uint64_t{1} << p.member;
  pick_addr_ = -1;
  for (size_t i = 0; i < ep->addr_text.size() && !p.address.empty(); ++i) {
    if (ep->addr_text[i] == p.address) pick_addr_ = static_cast<int>(i);
  }
  if (!ep->literal && !ep->addr_text.empty() && (ep->synced_to != eps_ || ep->synced_version != ep->addrs_version)) {
    eps_->set_addresses(e, ep->addr_text);
    ep->synced_to = eps_;
    ep->synced_version = ep->addrs_version;
  }
  return ep;
}

void Exchange::end_attempt(UpstreamEndpoints::Result r) {
  using Result = UpstreamEndpoints::Result;
  TimePoint now = Clock::now();
  // Without a member (a failure after the response head was judged) the
  // breaker counts the failure as before.
  bool upstream_failing = r != Result::success && r != Result::cancelled;
  if (member_ != UpstreamEndpoints::kNone) {
    uint32_t m = member_;
    member_ = UpstreamEndpoints::kNone;
    UpstreamEndpoints::Report rep = eps_->report(m, r, now, now - attempt_started_);
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
}

void Exchange::cancel_member() {
  if (member_ == UpstreamEndpoints::kNone) return;
  eps_->report(member_, UpstreamEndpoints::Result::cancelled, Clock::now(), {});
  member_ = UpstreamEndpoints::kNone;
}

void Exchange::on_connected() { send_head_and_body(); }

// Writes "<hex len>\r\n" (a chunk-size line) into buf, without a format
// string (this runs per body chunk); returns its length.
static unsigned chunk_size_line(char (&buf)[24], size_t len) {
  char* end = std::to_chars(buf, buf + 20, len, 16).ptr;
  end[0] = '\r';
  end[1] = '\n';
  return static_cast<unsigned>(end + 2 - buf);
}

static void append_chunk(std::string& out, const char* data, size_t len) {
  char line[24];
  out.append(line, chunk_size_line(line, len));
  out.append(data, len);
  out += "\r\n";
}

void Exchange::send_head_and_body() {
  TimePoint now = Clock::now();
  RequestRewrite rw;
  rw.config = cfg_;
  rw.inner_hops = route_->inner_hops;
  rw.claim_ownership = rs_->owns_retries() && route_->inner_hops == InnerHops::forbid;
  rw.attempt = rs_->attempts_started();
  rw.time_left_ms = route_->inner_hops == InnerHops::pass ? -1 : rs_->attempt_timeout(now).count();
  rw.client_ip = down_->peer_ip_;
  rw.outer_owned = ownership_.outer_owned;
  rw.via = via_member();
  if (down_->tls_) rw.proto = "https";  // TLS HOOK: the client spoke TLS to this listener

  std::string& out = w_->scratch();
  out.clear();
  out += req_.method;
  out += ' ';
  out += target_;
  out += " HTTP/1.1\r\n";
  if (!append_rewritten_request_headers(req_.headers, rw, out)) {
    out += "Host: ";
    if (!ucfg_->endpoints.empty()) out += last_ep_->label;
    out += "\r\n";
  }
  if (!upgrade_.empty()) {  // TUNNEL HOOK: Upgrade and Connection are hop-by-hop: say them anew
    out += "Connection: Upgrade\r\nUpgrade: ";
    out += upgrade_;
    out += "\r\n";
  }
  if (req_chunked_) {
    out += "Transfer-Encoding: chunked\r\n";
  } else if (req_.has_content_length) {
    out += "Content-Length: ";
    append_decimal(out, req_.content_length);
    out += "\r\n";
  }
  out += "\r\n";
  if (!body_.empty()) {
    if (req_chunked_) {
      append_chunk(out, body_.data(), body_.size());
    } else {
      out += body_;
    }
  }
  if (request_complete_ && req_chunked_) out += "0\r\n\r\n";
  if (request_complete_) request_end_sent_ = true;
  int rc = w_->write(up_, out);
  forwarded_any_ = true;
  if (replayable_) {
    body_sent_ = body_.size();
  } else {
    body_.clear();
    body_sent_ = 0;
  }
  if (rc < 0) {
    AttemptResult r;
    r.outcome = AttemptOutcome::reset;
    handle_failure(r, 502, "upstream_reset");
  }
}

void Exchange::send_body_bytes(const char* data, size_t len) {
  if (req_chunked_) {
    char hdr[24];
    uv_buf_t parts[3] = {uv_buf_init(hdr, chunk_size_line(hdr, len)),
                         uv_buf_init(const_cast<char*>(data), static_cast<unsigned>(len)),
                         uv_buf_init(const_cast<char*>("\r\n"), 2)};
    w_->write(up_, parts, 3);
  } else {
    uv_buf_t b = uv_buf_init(const_cast<char*>(data), static_cast<unsigned>(len));
    w_->write(up_, &b, 1);
  }
}

void Exchange::send_request_end() {
  request_end_sent_ = true;
  if (req_chunked_) w_->write(up_, "0\r\n\r\n");
}

bool Exchange::upstream_ready() const {
  return up_ && up_->connected_ && !waiting_backoff_ && !up_->closing();
}

void Exchange::on_request_body(const char* data, size_t len) {
  if (finished_) return;
  body_total_ += len;
  uint64_t max = lcfg_->limits.max_body_bytes;
  if (max > 0 && body_total_ > max) {
    refuse_request(413, "body_too_large", "request body over max_body_bytes");
    return;
  }
  if (replayable_ && body_total_ > route_->retry.buffer_limit) {
    // Too big to replay: from now on it streams and is not retried.
    replayable_ = false;
    rs_->set_body_replayable(false);
    body_.erase(0, body_sent_);
    body_sent_ = 0;
    if (awaiting_body_) {
      body_.append(data, len);  // sent with the head once connected
      start_when_body_buffered();
      return;
    }
  }
  if (awaiting_body_) {
    body_.append(data, len);
    return;
  }
  if (upstream_ready()) {
    if (replayable_) {
      body_.append(data, len);
      body_sent_ = body_.size();
    }
    send_body_bytes(data, len);
  } else {
    body_.append(data, len);
  }
  size_t queued = body_.size() * (replayable_ ? 0 : 1) + (up_ ? up_->write_queue() : 0);
  if (!replayable_ && queued > kHighWater) {
    down_->want_read_ = false;
    down_->pause_reading();
  }
}

void Exchange::on_request_end() {
  request_complete_ = true;
  if (finished_) return;
  if (awaiting_body_) {
    start_when_body_buffered();
    return;
  }
  if (upstream_ready() && !request_end_sent_) send_request_end();
}

void Exchange::on_up_drained() {
  if (!up_) return;
  if (!down_->want_read_ && up_->write_queue() < kLowWater) {
    down_->want_read_ = true;
    down_->resume_reading();
  }
}

void Exchange::on_down_drained() {
  if (up_ && response_started_ && down_->write_queue() < kLowWater) up_->resume_reading();
}

void Exchange::drop_upstream(bool reset) {
  cancel_member();
  if (up_) {
    up_->detach_and_close(reset);
    up_ = nullptr;
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
  declined_ = nullptr;
  if (!forwarded_any_) {
    spdlog::info("listener {}: {} {} from {}: {}", lcfg_->name, status, reason, down_->peer_ip_, detail);
    respond_error(status, reason);
    return;
  }
  // Part of the request went upstream (the body streamed past buffer_limit):
  // the upstream must see it cut, never a clean end.
  spdlog::warn("listener {}: {} {} from {}: {}; the head and part of the body (of {} bytes read) were "
               "already forwarded to {}: upstream connection reset",
               lcfg_->name, status, reason, down_->peer_ip_, detail, body_total_,
               last_ep_ ? last_ep_->label : "?");
  if (up_) end_attempt(UpstreamEndpoints::Result::cancelled);  // no result: free probe slots
  drop_upstream(true);
  respond_error(status, reason, "x-onelayer-forwarded: partial\r\n");
}

bool Exchange::decide_retry(const AttemptResult& r) {
  TimePoint now = Clock::now();
  // An open breaker refuses the retry before a budget token is spent on it.
  bool breaker_open = is_retryable_outcome(r, route_->retry.retry_on) && !response_started_ &&
                      rs_->owns_retries() && rs_->attempts_started() < route_->retry.max_attempts &&
                      ups_->breaker.state(now) == CircuitBreaker::State::open;
  RetryState::Decision d = breaker_open ? rs_->on_circuit_open()
                                        : rs_->on_attempt_result(r, now, response_started_, w_->random(), &ups_->budget);
  if (d.retry) {
    rm_->on_retry(d.trigger);
    if (!triggers_.empty()) triggers_ += ',';
    triggers_ += d.trigger;
    drop_upstream();
    waiting_backoff_ = true;
    arm_timer(d.wait, on_backoff_done);
    return true;
  }
  if (d.declined != Decline::none && d.declined != Decline::not_retryable) {
    declined_ = decline_name(d.declined);
    rm_->on_declined(declined_);
  }
  mark_exhausted_ = d.mark_exhausted;
  return false;
}

bool Exchange::end_failed_attempt(int status, const char* reason, UpstreamEndpoints::Result verdict) {
  stop_timer();
  end_attempt(verdict);
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
  if (!end_failed_attempt(status, reason, verdict)) return;
  if (decide_retry(r)) return;
  if (declined_ && std::string_view(declined_) == "deadline") {
    respond_error(504, "deadline_exceeded");
    return;
  }
  respond_error(status, reason);
}

void Exchange::on_connect_failed(int err, bool dns) {
  if (finished_) return;
  spdlog::debug("connect to {} failed: {}{}", last_ep_ ? last_ep_->label : "?", uv_strerror(err),
                dns ? " (dns)" : "");
  AttemptResult r;
  r.outcome = AttemptOutcome::connect_failure;
  r.request_may_have_reached = false;
  // A connect that waited the whole connect_timeout: a black hole, ejected at once.
  bool black_hole = err == UV_ETIMEDOUT && !dns && up_ && up_->connect_timeout_ >= ucfg_->connect_timeout;
  handle_failure(r, 502, "connect_failure",
                 black_hole ? UpstreamEndpoints::Result::connect_timeout : UpstreamEndpoints::Result::failure);
}

void Exchange::on_up_error(int err) {
  if (finished_) return;
  spdlog::debug("upstream {} error: {}", last_ep_ ? last_ep_->label : "?", uv_strerror(err));
  AttemptResult r;
  r.outcome = AttemptOutcome::reset;
  handle_failure(r, 502, "upstream_reset");
}

void Exchange::on_tls_failed(const std::string& why, bool verify) {
  if (finished_) return;
  const char* ep = last_ep_ ? last_ep_->label.c_str() : "?";
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
  spdlog::warn("upstream {} ({}): TLS: {}", ucfg_->name, last_ep_ ? last_ep_->label : "?", why);
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
  end_attempt(!server_error                                   ? Result::success
              : route_->retry.retry_on.has_status(head.status) ? Result::failure
                                                               : Result::server_error);
  if (is_retryable_outcome(r, route_->retry.retry_on) && decide_retry(r)) return -1;

  status_ = head.status;
  bool http11_down = req_.http_major == 1 && req_.http_minor >= 1;
  resp_no_body_ = head_request_ || head.status == 204 || head.status == 304;
  resp_chunked_down_ = false;
  resp_close_delimited_down_ = false;

  // The head waits in pending_head_ until the first body bytes (or the end of
  // this read): head and body then leave in one write.
  std::string& out = pending_head_;
  out.clear();
  size_t head_bytes = 64 + head.reason.size();
  for (const Header& h : head.headers) head_bytes += h.name.size() + h.value.size() + 4;
  out.reserve(head_bytes + 128);  // one allocation for the whole head
  std::optional<std::string> coded = response_transfer_codings(head.headers);
  if (!coded) {
    spdlog::info("upstream {}: response Transfer-Encoding applies chunked twice or not last", last_ep_->label);
    return -1;
  }
  const std::string& codings = *coded;
  if (!codings.empty() && !resp_no_body_ && !http11_down) {
    // An HTTP/1.0 client cannot be told of a transfer coding: refuse rather
    // than hand it coded bytes marked as plain.
    spdlog::info("upstream {}: response Transfer-Encoding {} cannot reach an HTTP/1.0 client", last_ep_->label,
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
    spdlog::info("upstream {}: {} response header(s) with invalid name or value dropped", last_ep_->label,
                 invalid);
  }
  if (head.has_content_length && (!resp_no_body_ || head_request_ || head.status == 304)) {
    out += "Content-Length: ";
    append_decimal(out, head.content_length);
    out += "\r\n";
  } else if (!resp_no_body_) {
    if (http11_down) {
      // Re-framed as chunked; codings the upstream applied stay in front.
      resp_chunked_down_ = true;
      out += "Transfer-Encoding: ";
      if (!codings.empty()) {
        out += codings;
        out += ", ";
      }
      out += "chunked\r\n";
    } else {
      resp_close_delimited_down_ = true;
    }
  }
  if (mark_exhausted_) {
    fmt::format_to(std::back_inserter(out), "{}: {}\r\n", cfg_->headers.retry_exhausted, rs_->attempts_started());
  }
  bool close = down_->close_after_ || w_->draining() || resp_close_delimited_down_;
  if (close) down_->close_after_ = true;
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
  char hdr[24];
  if (resp_chunked_down_) {
    parts[n++] = uv_buf_init(hdr, chunk_size_line(hdr, len));
  }
  parts[n++] = uv_buf_init(const_cast<char*>(data), static_cast<unsigned>(len));
  if (resp_chunked_down_) parts[n++] = uv_buf_init(const_cast<char*>("\r\n"), 2);
  int rc = w_->write(down_, parts, n);
  pending_head_.clear();
  if (rc < 0) {
    // The client is gone (reset): stop pulling the body from the upstream.
    down_->abort_connection();
    return -1;
  }
  if (down_->write_queue() > kHighWater && up_) up_->pause_reading();
  // Progress pushes the stall guard back. The connection timer re-arms
  // lazily (Conn::arm_timer), so a later deadline per chunk costs no timer work.
  arm_timer(lcfg_->limits.idle_timeout, on_stream_stalled);
  return 0;
}

void Exchange::on_up_end(bool reusable) {
  if (finished_) return;
  response_done_ = true;
  if (resp_chunked_down_) pending_head_ += "0\r\n\r\n";
  flush_head();
  if (up_) {
    UpConn* u = up_;
    up_ = nullptr;
    if (reusable && request_end_sent_) {
      u->release_to_pool();
    } else {
      u->detach_and_close();
    }
  }
  finish(resp_close_delimited_down_);
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
  bool close = down_->close_after_ || w_->draining() || !request_complete_;
  if (close) down_->close_after_ = true;
  else extra += down_->keep_alive_header();
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
  a.declined = declined_ ? declined_ : "";
  a.error = error_reason_ ? error_reason_ : "";
  a.status = status;
  a.attempts = rs_ ? rs_->attempts_started() : 0;
  a.duration_ms = secs * 1000.0;
  a.bytes_in = body_total_;
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
  if (up_ && !response_started_) end_attempt(UpstreamEndpoints::Result::cancelled);  // no result: free probe slots
  drop_upstream();
  if (!error_reason_) error_reason_ = reason;
  record(tunnel_ ? 101 : 499);  // the client went away before the answer was complete (or ended a tunnel)
}

}  // namespace onelayer
