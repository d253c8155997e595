// Downstream connections: read, parse, validate and route requests; one
// exchange at a time (pipelined requests wait, parsed in order); write
// responses; keep-alive, header/idle timeouts, backpressure, drain.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/route_match.h"
#include "shell/connections.h"
#include "shell/logging.h"
#include "shell/proxy_responses.h"

namespace onelayer {

void conn_handle_closed(Conn* c);

DownConn::DownConn(Worker* w, WorkerListener* l)
    : Conn(w), listener_(l), parser_(HTTP_REQUEST, this) {
  uv_tcp_init(w->loop(), &tcp_);
  uv_timer_init(w->loop(), &timer_);
}

DownConn::~DownConn() = default;

static const Limits kDefaultLimits{};

// Bytes that arrive while a request is being answered wait in pending_in_.
// Reading goes on (no epoll change per request) until this much waits.
static constexpr size_t kMaxPipelined = 64 * 1024;

static const Limits& limits_for(Worker* w, const std::string& listener) {
  const GenerationPtr& g = w->generation();
  int i = g->listener_index(listener);
  return i < 0 ? kDefaultLimits : g->config->listeners[static_cast<size_t>(i)].limits;
}

void DownConn::start() {
  const Limits& lim = limits_for(worker_, listener_->name);
  const Metrics& m = worker_->runtime().metrics;
  size_t open = m.downstream_connections_active.load(std::memory_order_relaxed) +
                m.upstream_connections_active.load(std::memory_order_relaxed);
  if (open > worker_->runtime().max_open_connections) {
    spdlog::warn("listener {}: descriptor budget reached ({} connections open), closing new connection",
                 listener_->name, open);
    reject(503, "max_connections", true, "descriptor budget reached");
    return;
  }
  if (listener_->connections > lim.max_connections) {
    spdlog::warn("listener {}: max_connections {} reached, closing new connection", listener_->name,
                 lim.max_connections);
    reject(503, "max_connections", true, "connection limit reached");
    return;
  }
  sockaddr_storage ss{};
  int len = sizeof ss;
  if (uv_tcp_getpeername(&tcp_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    char ip[INET6_ADDRSTRLEN] = {0};
    if (ss.ss_family == AF_INET)
      uv_ip4_name(reinterpret_cast<sockaddr_in*>(&ss), ip, sizeof ip);
    else if (ss.ss_family == AF_INET6)
      uv_ip6_name(reinterpret_cast<sockaddr_in6*>(&ss), ip, sizeof ip);
    peer_ip_ = ip;
  }
  uv_tcp_nodelay(&tcp_, 1);
  parser_.set_limits(lim.max_header_bytes, 128);
  arm_header_timer();
  resume_reading();
}

void DownConn::resume_reading() {
  if (closing_ || reading_ || eof_) return;
  if (pending_in_ && pending_in_->size() >= kMaxPipelined) return;  // pipelined: wait for the exchange
  if (!want_read_) return;
  if (uv_read_start(stream(), Conn::no_read_buffer, Conn::on_readable<DownConn>) == 0) reading_ = true;
}

void DownConn::pause_reading() {
  if (reading_) {
    uv_read_stop(stream());
    reading_ = false;
  }
}

// Header and idle timeouts share one callback: a partial request head gets
// 408, an idle keep-alive connection is closed.
static void on_head_or_idle_timeout(uv_timer_t* t) {
  auto* d = static_cast<DownConn*>(t->data);
  if (d->ex_) return;
  if (d->parser_.in_message()) {
    d->reject(408, "header_timeout", true, "request head not complete in time");
  } else {
    d->abort_connection();
  }
}

void DownConn::arm_header_timer() {
  const Limits& lim = limits_for(worker_, listener_->name);
  arm_timer(static_cast<uint64_t>(lim.header_timeout.count()), on_head_or_idle_timeout);
}

void DownConn::arm_idle_timer() {
  const Limits& lim = limits_for(worker_, listener_->name);
  arm_timer(static_cast<uint64_t>(lim.idle_timeout.count()), on_head_or_idle_timeout);
}

void DownConn::account_in(size_t n) {
  worker_->runtime().metrics.bytes_in_total.fetch_add(n, std::memory_order_relaxed);
}

void DownConn::buffer_pipelined(const char* data, size_t len) {
  if (!pending_in_) pending_in_ = std::make_unique<std::string>();
  pending_in_->append(data, len);
  if (pending_in_->size() >= kMaxPipelined) pause_reading();
}

void DownConn::on_read(ssize_t nread, const uv_buf_t* buf) {
  if (nread > 0 && parser_.error() == HttpParser::Error::paused) {
    account_in(static_cast<size_t>(nread));
    buffer_pipelined(buf->base, static_cast<size_t>(nread));
    return;
  }
  if (nread > 0) {
    account_in(static_cast<size_t>(nread));
    if (!ex_ && !parser_.in_message()) arm_header_timer();  // a new request starts: header clock
    process_input(buf->base, static_cast<size_t>(nread));
    return;
  }
  if (nread == 0) return;
  if (nread == UV_EOF) {
    eof_ = true;
    pause_reading();
    bool has_pending = pending_in_ && !pending_in_->empty();
    if (ex_ ? ex_->request_complete() : (has_pending || parser_.error() == HttpParser::Error::paused)) {
      // Half-closed client: answer what was sent (pipelined requests too),
      // then close.
      return;
    }
    abort_connection();
    return;
  }
  abort_connection();
}

void DownConn::process_input(const char* data, size_t len) {
  size_t used = parser_.feed(data, len);
  HttpParser::Error err = parser_.error();
  if (err == HttpParser::Error::none) return;
  if (err == HttpParser::Error::paused) {
    if (used < len) buffer_pipelined(data + used, len - used);
    return;
  }
  if (closing_) return;
  // A parse failure: the stream can no longer be trusted.
  if (ex_) {
    if (ex_->response_started()) {
      abort_connection();
      return;
    }
    ex_->abort();
    worker_->retire(std::move(ex_));
  }
  if (err == HttpParser::Error::user) {
    return;  // the callback that failed has answered already
  }
  if (err == HttpParser::Error::head_too_large || err == HttpParser::Error::too_many_headers) {
    reject(431, "headers_too_large", true, "request head over max_header_bytes or too many fields");
    return;
  }
  reject(400, "bad_request", true, parser_.error_reason());
}

static bool parse_target(const MessageHead& h, std::string& host, std::string& path,
                         std::string& upstream_target) {
  const std::string& t = h.target;
  if (!t.empty() && t[0] == '/') {
    path = t;
    upstream_target = t;
    if (const Header* hh = find_header(h.headers, "host")) host = hh->value;
    return true;
  }
  if (t == "*" && h.method == "OPTIONS") {
    path = "*";
    upstream_target = t;
    if (const Header* hh = find_header(h.headers, "host")) host = hh->value;
    return true;
  }
  // absolute-form (RFC 9112 3.2.2): route by the configured upstreams using
  // its authority as the host; never connect to the host it names.
  auto starts = [&](std::string_view p) { return t.size() > p.size() && iequals(std::string_view(t).substr(0, p.size()), p); };
  size_t skip = starts("http://") ? 7 : starts("https://") ? 8 : 0;
  if (skip == 0) return false;
  size_t slash = t.find_first_of("/?", skip);
  host = t.substr(skip, slash == std::string::npos ? std::string::npos : slash - skip);
  if (host.empty() || host.find('@') != std::string::npos) return false;
  upstream_target = slash == std::string::npos ? "/" : t.substr(slash);
  if (upstream_target[0] == '?') upstream_target.insert(0, "/");
  path = upstream_target;
  return true;
}

int DownConn::on_head(MessageHead& head) {
  disarm_timer();
  ++requests_;
  bool http11 = head.http_major == 1 && head.http_minor >= 1;
  if (!head.keep_alive || !http11) close_after_ = true;
  if (worker_->draining()) close_after_ = true;

  if (head.method == "CONNECT") {
    reject(400, "bad_request", true, "CONNECT is not supported");
    return -1;
  }
  if (head.http_major != 1) {
    reject(400, "bad_request", true, "only HTTP/1.x is served");
    return -1;
  }
  for (unsigned char c : head.target) {
    if (c <= 0x20 || c >= 0x7f) {  // RFC 9112 3.2: no whitespace, controls or raw non-ASCII
      reject(400, "bad_request", true, "invalid byte in the request target");
      return -1;
    }
  }
  // H: the only transfer coding forwarded is chunked alone (gzip, chunked
  // would reach the upstream without its gzip).
  for (const Header& h : head.headers) {
    if (iequals(h.name, "transfer-encoding") && !iequals(h.value, "chunked")) {
      reject(400, "bad_request", true, "unsupported Transfer-Encoding");
      return -1;
    }
  }
  RequestHeaderProblem problem =
      head.obs_fold ? RequestHeaderProblem::obs_fold : validate_request_headers(head.headers, http11, 0);
  if (problem != RequestHeaderProblem::none) {
    reject(400, "bad_request", true, to_string(problem));
    return -1;
  }
  std::string host, path, upstream_target;
  if (!parse_target(head, host, path, upstream_target)) {
    reject(400, "bad_request", true, "request target form not supported");
    return -1;
  }
  const GenerationPtr& gen = worker_->generation();
  int li = gen->listener_index(listener_->name);
  if (li < 0) {
    reject(503, "draining", true, "listener removed by reload");
    return -1;
  }
  const Listener& l = gen->config->listeners[static_cast<size_t>(li)];
  const Route* route = match_route(l, host, path, head.method);
  if (!route) {
    // Answer with the body (if any) still unread: the connection closes.
    reject(404, "no_route", !(head.content_length == 0 && !head.chunked), "no route matched");
    return head.content_length == 0 && !head.chunked ? 0 : -1;
  }
  if (l.limits.max_body_bytes > 0 && head.has_content_length &&
      head.content_length > l.limits.max_body_bytes) {
    reject(413, "body_too_large", true, "Content-Length over max_body_bytes");
    return -1;
  }
  if (const Header* e = find_header(head.headers, "expect")) {
    if (!iequals(e->value, "100-continue")) {
      reject(417, "bad_request", true, "unsupported Expect");
      return -1;
    }
    // Answer 100 here and drop Expect upstream: the body is needed anyway
    // for replay, and the upstream then never has to speak 1xx.
    worker_->write(this, "HTTP/1.1 100 Continue\r\n\r\n");
  }
  size_t ri = static_cast<size_t>(route - l.routes.data());
  RouteMetrics* rm = gen->route_metrics[static_cast<size_t>(li)][ri];
  in_exchange_ = true;
  ex_ = std::make_unique<Exchange>(this, gen, li, route, rm, head, std::move(upstream_target));
  ex_->start();
  return 0;
}

int DownConn::on_body(const char* data, size_t len) {
  if (!ex_) return 0;  // answered already (no_route without body); discard
  ex_->on_request_body(data, len);
  return closing_ ? -1 : 0;
}

int DownConn::on_message_end() {
  if (ex_) ex_->on_request_end();
  if (!ex_ && !in_exchange_ && !closing_) return 0;  // answered without an exchange; go on
  if (closing_) return HPE_PAUSED;
  // One request at a time: the next pipelined one waits until this one is
  // answered (responses go out in request order).
  return HPE_PAUSED;
}

void DownConn::on_write_done(int status) {
  if (status < 0) {
    if (status != UV_ECANCELED) abort_connection();
    return;
  }
  if (close_pending_ && write_queue() == 0) {
    close_handles();
    return;
  }
  if (ex_) ex_->on_down_drained();
}

static void on_resume_timer(uv_timer_t* t) {
  auto* d = static_cast<DownConn*>(t->data);
  d->parser_.resume();
  d->arm_idle_timer();
  if (d->pending_in_ && !d->pending_in_->empty()) {
    std::string in;
    in.swap(*d->pending_in_);
    d->arm_header_timer();
    d->process_input(in.data(), in.size());
  }
  if (d->eof_ && !d->in_exchange_ && !d->closing()) {
    d->close_when_flushed();  // the client had half-closed: nothing more will come
    return;
  }
  if (!d->closing()) d->resume_reading();
}

void DownConn::exchange_done(bool close_after) {
  bool request_complete = ex_->request_complete();
  worker_->retire(std::move(ex_));
  in_exchange_ = false;
  want_read_ = true;
  bool has_pending = pending_in_ && !pending_in_->empty();
  if (close_after || close_after_ || worker_->draining() || !request_complete || (eof_ && !has_pending)) {
    close_when_flushed();
    return;
  }
  if (has_pending) {
    // Pipelined bytes wait: parse them on the next loop turn, outside every
    // callback of the exchange that just ended.
    arm_timer(0, on_resume_timer);
    return;
  }
  // Nothing buffered: ready for the next request now (no extra loop turn).
  parser_.resume();
  arm_idle_timer();
  resume_reading();
}

void DownConn::close_when_flushed() {
  if (closing_) return;
  pause_reading();
  if (write_queue() == 0) {
    close_handles();
  } else {
    close_pending_ = true;
  }
}

void DownConn::reject(int status, const char* reason, bool close_after, const char* log_detail) {
  if (closing_) return;
  if (close_after) close_after_ = true;
  std::string out;
  append_proxy_response(out, status, reason, close_after_, {}, parser_.head().method == "HEAD");
  worker_->write(this, out);
  spdlog::info("listener {}: {} {} from {}: {}", listener_->name, status, reason, peer_ip_,
               log_detail ? log_detail : "");
  WorkerListener* l = listener_;
  if (!l->unrouted) l->unrouted = worker_->runtime().metrics.route(listener_->name, "", "");
  auto now_ms = std::chrono::duration_cast<Millis>(Clock::now().time_since_epoch()).count();
  l->unrouted->on_response(status, 0, 0, now_ms);
  AccessRecord r;
  r.listener = listener_->name;
  r.method = parser_.head().method;
  r.path = parser_.head().target;
  r.status = status;
  r.error = reason;
  r.unix_ms = std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch()).count();
  r.bytes_out = out.size();
  write_access_log(r);
  if (close_after_) {
    close_when_flushed();
  } else {
    // Only no_route without a body keeps the connection: the parser goes on.
    in_exchange_ = false;
  }
}

void DownConn::abort_connection(const char* reason) {
  if (closing_) return;
  if (ex_) {
    ex_->abort(reason);
    worker_->retire(std::move(ex_));
  }
  close_handles();
}

void DownConn::drain() {
  close_after_ = true;
  if (!ex_ && !parser_.in_message()) close_when_flushed();
}

void conn_handle_closed(Conn* c) {
  if (++c->closed_handles_ < 2) return;
  if (auto* d = dynamic_cast<DownConn*>(c)) {
    d->worker_->down_closed(d);
  }
  delete c;
}

}  // namespace onelayer
