// Downstream connections: read, parse, validate and route requests; one
// exchange at a time (pipelined requests wait, parsed in order); write
// responses; keep-alive, header/idle timeouts, backpressure, drain.
#include <arpa/inet.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "core/base/http_status.h"
#include "core/config/config.h"
#include "core/metrics/metrics.h"
#include "core/request/request_validation.h"
#include "shell/http1/http1_server_connection.h"
#include "shell/http1/http1_body_encoder.h"
#include "shell/http1/proxy_responses.h"
#include "shell/io/logging.h"
#include "shell/stream/h2_preface.h"
#include "shell/tls/peer_identity.h"

namespace onelayer {

Http1ServerConnection::Http1ServerConnection(Http1ServerHost* host, ServerListener* l)
    : ClientSocket(host), listener_(l) {
}

Http1ServerConnection::~Http1ServerConnection() {
  if (transparent_) server_host()->forget_transparent(this);
}

// An idle keep-alive connection is mostly this object (docs/benchmarks.md,
// "Memory per idle keep-alive connection"): what it gains must be worth it.
static_assert(sizeof(Http1ServerConnection) <= 424, "Http1ServerConnection grew: an idle connection holds every byte of it");

static const Limits kDefaultLimits{};

// Bytes that arrive while a request is being answered wait in pending_in_.
// Reading goes on (no epoll change per request) until this much waits.
static constexpr size_t kMaxPipelined = 64 * 1024;

static const Limits& limits_for(Http1ServerHost* h, const std::string& listener) {
  const Listener* cfg = h->listener_config(listener);
  return cfg ? cfg->limits : kDefaultLimits;
}

void Http1ServerConnection::start() {
  const Listener* cfg = server_host()->listener_config(listener_->name());
  const Limits& lim = cfg ? cfg->limits : kDefaultLimits;
  const bool transparent_listener = cfg && cfg->mode == ListenerMode::transparent;
  const Metrics& m = host_->metrics();
  size_t open = m.downstream_connections_active.load(std::memory_order_relaxed) +
                m.upstream_connections_active.load(std::memory_order_relaxed);
  if (open > server_host()->max_open_connections()) {
    spdlog::warn("listener {}: descriptor budget reached ({} connections open), closing new connection",
                 listener_->name(), open);
    reject(503, "max_connections", true, "descriptor budget reached");
    return;
  }
  if (listener_->connections() > lim.max_connections) {
    spdlog::warn("listener {}: max_connections {} reached, closing new connection", listener_->name(),
                 lim.max_connections);
    reject(503, "max_connections", true, "connection limit reached");
    return;
  }
  remember_peer();
  uv_tcp_nodelay(&tcp_, 1);
  tls_ = server_host()->open_tls(listener_->name());  // a handshake first (header_timeout covers it)
  const int transparent = transparent_listener ? start_transparent() : 0;
  if (transparent < 0) return;  // refused
  if (transparent == 0) arm_header_timer();  // else the detect timer runs
  resume_reading();
}

void Http1ServerConnection::remember_peer() {
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
}

// Woken from the parked set: idle still (the first bytes start the header
// clock); TCP_NODELAY stayed with the socket.
void Http1ServerConnection::resume_after_park() {
  protocol_known_ = true;  // only HTTP/1 connections are parked
  remember_peer();
  arm_idle_timer();
  resume_reading();
}

// Parks the idle connection: its socket (a duplicate of the descriptor, as
// closing the handle closes its own) goes to the parked set with the rest of
// the idle time, and this object closes without counting as a closed
// connection. False (nothing changed) when the set cannot take it.
bool Http1ServerConnection::park(uint64_t idle_left_ms) {
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(&tcp_), &fd) != 0) return false;
  int kept = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (kept < 0) return false;  // at the descriptor limit: stays whole
  if (!server_host()->park(kept, listener_, idle_left_ms)) {
    ::close(kept);
    return false;
  }
  parked_ = true;
  close_handles();
  return true;
}

void Http1ServerConnection::on_idle_long(TimerList::Entry* t) {
  auto* d = Conn::of<Http1ServerConnection>(t);
  uint64_t idle = static_cast<uint64_t>(limits_for(d->server_host(), d->listener_->name()).idle_timeout.count());
  uint64_t left = idle > Http1ServerHost::kParkAfterMs ? idle - Http1ServerHost::kParkAfterMs : 0;
  bool quiet = !d->h2_ && !d->ex_ && !d->in_exchange_ && !d->in_request() && !d->pending_in_ && d->reading_ && !d->eof_ &&
               !d->close_pending_ && d->write_queue() == 0 && !d->tls_ && !d->host_->draining() &&
               !d->transparent_;  // a parked socket would lose its original destination
  if (left > 0 && quiet && d->park(left)) return;
  d->arm_timer(left, on_head_or_idle_timeout);
}

void Http1ServerConnection::resume_reading() {
  if (closing() || reading_ || eof_) return;
  if (pending_in_ && pending_in_->size() >= kMaxPipelined) return;  // pipelined: wait for the exchange
  if (!want_read_) return;
  if (uv_read_start(stream(), Conn::no_read_buffer, Conn::on_readable<Http1ServerConnection>) == 0) reading_ = true;
}

void Http1ServerConnection::pause_reading() {
  if (reading_) {
    uv_read_stop(stream());
    reading_ = false;
  }
}

// Header and idle timeouts share one callback: a partial request head gets
// 408, an idle keep-alive connection is closed.
void Http1ServerConnection::on_head_or_idle_timeout(TimerList::Entry* t) {
  auto* d = Conn::of<Http1ServerConnection>(t);
  if (d->ex_) return;
  if (d->in_request()) {
    d->reject(408, "header_timeout", true, "request head not complete in time");
  } else {
    d->abort_connection();
  }
}

void Http1ServerConnection::arm_header_timer() {
  const Limits& lim = limits_for(server_host(), listener_->name());
  arm_timer(static_cast<uint64_t>(lim.header_timeout.count()), on_head_or_idle_timeout);
}

void Http1ServerConnection::arm_idle_timer() {
  const Limits& lim = limits_for(server_host(), listener_->name());
  auto idle = static_cast<uint64_t>(lim.idle_timeout.count());
  // Idle a while, a connection is parked (a socket alone) for the rest.
  if (idle > Http1ServerHost::kParkAfterMs && !tls_) {
    arm_timer(Http1ServerHost::kParkAfterMs, on_idle_long);
    return;
  }
  arm_timer(idle, on_head_or_idle_timeout);
}

void Http1ServerConnection::account_in(size_t n) {
  host_->metrics().bytes_in_total.fetch_add(n, std::memory_order_relaxed);
}

void Http1ServerConnection::buffer_pipelined(const char* data, size_t len) {
  if (!pending_in_) pending_in_ = std::make_unique<std::string>();
  pending_in_->append(data, len);
  if (pending_in_->size() >= kMaxPipelined) pause_reading();
}

void Http1ServerConnection::on_read(ssize_t nread, const uv_buf_t* buf) {
  if (lingering_) {  // the answer is out: what the client still sends is dropped
    if (nread < 0) close_handles();
    return;
  }
  if (passing_through()) {
    pass_through(nread, buf);
    return;
  }
  if (h2_) {
    if (nread > 0) {
      account_in(static_cast<size_t>(nread));
      h2_->on_input(buf->base, static_cast<size_t>(nread));
    } else if (nread < 0) {
      abort_connection();
    }
    return;
  }
  if (nread > 0 && !protocol_known_) {
    account_in(static_cast<size_t>(nread));
    if (detecting_protocol()) {
      detect_first_bytes(buf->base, static_cast<size_t>(nread));
    } else {
      take_first_bytes(buf->base, static_cast<size_t>(nread));
    }
    return;
  }
  if (tunnel_ && ex_) {  // after a 101 the bytes are the tunnel's
    if (nread > 0) account_in(static_cast<size_t>(nread));
    if (nread != 0) ex_->on_tunnel_down(nread, buf);
    return;
  }
  if (nread > 0 && parser_paused()) {
    account_in(static_cast<size_t>(nread));
    buffer_pipelined(buf->base, static_cast<size_t>(nread));
    return;
  }
  if (nread > 0) {
    account_in(static_cast<size_t>(nread));
    if (!ex_ && !in_request()) arm_header_timer();  // a new request starts: header clock
    process_input(buf->base, static_cast<size_t>(nread));
    return;
  }
  if (nread == 0) return;
  if (nread == UV_EOF) {
    eof_ = true;
    pause_reading();
    bool has_pending = pending_in_ && !pending_in_->empty();
    if (ex_ ? ex_->request_complete() : (has_pending || parser_paused())) {
      // Half-closed client: answer what was sent (pipelined requests too),
      // then close.
      return;
    }
    abort_connection();
    return;
  }
  abort_connection();
}

void Http1ServerConnection::take_first_bytes(const char* data, size_t len) {
  std::string joined;
  if (pending_in_ && !pending_in_->empty()) {
    joined.swap(*pending_in_);
    joined.append(data, len);
    data = joined.data();
    len = joined.size();
  }
  H2Preface p = detect_h2_preface(std::string_view(data, len));
  if (p == H2Preface::need_more) {
    buffer_pipelined(data, len);
    return;
  }
  protocol_known_ = true;
  ListenerProtocols allowed;
  if (const Listener* cfg = server_host()->listener_config(listener_->name())) allowed = cfg->protocols;
  if (p == H2Preface::yes && !allowed.h2c) {
    reject(400, "bad_request", true, "HTTP/2 preface on a listener without h2c", {}, nullptr,
           "This listener does not speak HTTP/2 (listeners[].protocols); send HTTP/1.1.");
    return;
  }
  if (p == H2Preface::no && !allowed.http1) {
    reject(505, "protocol_not_allowed", true, "HTTP/1 request on a listener without http1", {}, nullptr,
           "This listener speaks HTTP/2 with prior knowledge only (listeners[].protocols: [h2c]).");
    return;
  }
  if (p == H2Preface::yes) {
    disarm_timer();  // the HTTP/2 side keeps its own
    h2_ = server_host()->take_over_h2c(this, listener_);
    h2_->on_input(data, len);
    return;
  }
  process_input(data, len);
}

// A client whose TLS handshake fails is closed (nothing of HTTP was said).
void Http1ServerConnection::on_tls_handshake(bool ok) {
  if (ok) {
    tls_->set_peer_identity(verified_peer_identity(tls_->ssl()));
    return;
  }
  spdlog::info("listener {}: TLS handshake with {} failed: {}", listener_->name(), peer_ip_, tls_->error_text());
  close_handles();
}

const std::string& Http1ServerConnection::caller() const {
  static const std::string none;
  return tls_ ? tls_->peer_identity() : none;
}

void Http1ServerConnection::on_tls_error() {
  spdlog::info("listener {}: TLS error from {}: {}", listener_->name(), peer_ip_, tls_->error_text());
  abort_connection("tls_error");
}

HttpParser& Http1ServerConnection::parser() {
  if (!parser_) {
    parser_ = server_host()->parsers().take(HTTP_REQUEST, this);
    parser_->set_limits(limits_for(server_host(), listener_->name()).max_header_bytes, kMaxRequestHeaderFields);
  }
  return *parser_;
}

void Http1ServerConnection::release_if_idle() {
  if (ex_ || in_exchange_ || closing() || (parser_ && (parser_->feeding() || parser_->in_message()))) return;
  if (pending_in_ && !pending_in_->empty()) return;
  pending_in_.reset();
  server_host()->parsers().give_back(parser_);
}

void Http1ServerConnection::process_input(const char* data, size_t len) {
  size_t used = parser().feed(data, len);
  HttpParser::Error err = parser_->error();
  if (err == HttpParser::Error::none) {
    release_if_idle();
    return;
  }
  if (err == HttpParser::Error::paused) {
    if (used < len) buffer_pipelined(data + used, len - used);
    return;
  }
  if (closing()) return;
  // A parse failure: the stream can no longer be trusted.
  if (ex_) {
    if (ex_->response_started()) {
      abort_connection();
      return;
    }
    if (err == HttpParser::Error::parse) {
      // The body was malformed (a chunk, a trailer): the exchange answers,
      // and resets an upstream that has part of the request.
      ex_->refuse_request(400, "bad_request", parser_->error_reason());
      if (!ex_) return;  // answered; the connection closes once flushed
    }
    ex_->abort();
    server_host()->retire(std::move(ex_));
  }
  if (err == HttpParser::Error::user) {
    return;  // the callback that failed has answered already
  }
  if (err == HttpParser::Error::head_too_large || err == HttpParser::Error::too_many_headers) {
    reject(431, "headers_too_large", true, "request head over max_header_bytes or too many fields");
    return;
  }
  reject(400, "bad_request", true, parser_->error_reason());
}

int Http1ServerConnection::on_head(MessageHead& head) {
  // The header timer is left armed: while an exchange runs its callback does
  // nothing, and the idle timer that follows is a later deadline, recorded
  // without heap work (a disarm and a new arm would cost two).
  // HTTP/1.0 stays open when it asks for keep-alive (llhttp's keep_alive
  // says so); its responses then need Content-Length framing.
  http10_ = !(head.http_major == 1 && head.http_minor >= 1);
  if (!head.keep_alive) close_after_ = true;
  if (host_->draining()) close_after_ = true;

  ExchangeStarter::Start a =
      server_host()->exchanges().start(*this, listener_->name(), head, caller(), original_destination());
  if (a.refused()) {
    std::string extra;
    append_serialized(a.extra, extra);
    // Answered with the body (if any) still unread: the connection closes.
    reject(a.status, a.reason, !a.keeps_connection, a.detail, extra, a.counted_in,
           a.hint.empty() ? nullptr : a.hint.c_str());
    return a.keeps_connection ? 0 : -1;
  }
  if (a.expect_continue) {
    // Answer 100 here and drop Expect upstream: the body is needed anyway
    // for replay, and the upstream then never has to speak 1xx.
    host_->write(this, "HTTP/1.1 100 Continue\r\n\r\n");
  }
  if (a.upgrade) close_after_ = true;  // this connection ends with the exchange, tunnel or not
  in_exchange_ = true;
  response_ = std::make_unique<Response>();
  ex_ = std::move(a.exchange);
  ex_->start();
  return 0;
}

int Http1ServerConnection::on_body(const char* data, size_t len) {
  if (!ex_) return 0;  // answered already (no_route without body); discard
  ex_->on_request_body(data, len);
  return closing() ? -1 : 0;
}

// A chunked request's trailer section: it goes upstream with the request's
// end where the upstream's framing can carry it.
void Http1ServerConnection::on_trailers(Headers& trailers) {
  if (ex_) ex_->on_request_trailers(trailers);
}

int Http1ServerConnection::on_message_end() {
  if (ex_) ex_->on_request_end();
  if (!ex_ && !in_exchange_ && !closing()) return 0;  // answered without an exchange; go on
  if (closing()) return HPE_PAUSED;
  // One request at a time: the next pipelined one waits until this one is
  // answered (responses go out in request order).
  return HPE_PAUSED;
}

void Http1ServerConnection::on_write_done(int status) {
  if (status < 0) {
    if (status != UV_ECANCELED) abort_connection();
    return;
  }
  if (close_pending_ && write_queue() == 0) {
    finish_close();
    return;
  }
  if (h2_) h2_->on_write_done();
  if (ex_) ex_->on_down_drained();
  if (passing_through()) passthrough_drained();
}

void Http1ServerConnection::on_resume_timer(TimerList::Entry* t) {
  auto* d = Conn::of<Http1ServerConnection>(t);
  d->parser().resume();
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
  if (d->closing()) return;
  d->release_if_idle();
  d->resume_reading();
}

void Http1ServerConnection::exchange_done() {
  bool request_complete = ex_->request_complete();
  server_host()->retire(std::move(ex_));
  response_.reset();
  in_exchange_ = false;
  want_read_ = true;
  bool has_pending = pending_in_ && !pending_in_->empty();
  if (close_after_ || host_->draining() || !request_complete || (eof_ && !has_pending)) {
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
  // Idle: the parser goes back (unless this runs inside it; then the parse
  // goes on and process_input gives it back).
  if (parser_) parser_->resume();
  release_if_idle();
  arm_idle_timer();
  resume_reading();
}

// ---- DownstreamStream: the exchange's answer in HTTP/1.1.

struct Http1ServerConnection::Response {
  Http1BodyEncoder body;     // how the body is framed to this client
  std::string pending_head;  // the head (and last chunk) not yet written
  uint64_t bytes = 0;        // written so far
  bool trailers_sent = false;
};

Http1ServerConnection::Response& Http1ServerConnection::response() {
  if (!response_) response_ = std::make_unique<Response>();
  return *response_;
}

uint64_t Http1ServerConnection::response_bytes() const { return response_ ? response_->bytes : 0; }

bool Http1ServerConnection::send_response_head(const MessageHead& head, const ResponseMeta& meta) {
  Response& r = response();
  const bool http11 = !http10_;
  std::optional<std::string> coded = response_transfer_codings(head.headers);
  if (!coded) {
    spdlog::info("listener {}: response Transfer-Encoding applies chunked twice or not last", listener_->name());
    return false;
  }
  const std::string& codings = *coded;
  if (!codings.empty() && !meta.no_body && !http11) {
    // An HTTP/1.0 client cannot be told of a transfer coding: refuse rather
    // than hand it coded bytes marked as plain.
    spdlog::info("listener {}: response Transfer-Encoding {} cannot reach an HTTP/1.0 client", listener_->name(),
                 codings);
    return false;
  }
  // The head waits in pending_head until the first body bytes (or the end of
  // this read): head and body then leave in one write.
  std::string& out = r.pending_head;
  out.clear();
  size_t head_bytes = 64 + head.reason.size();
  for (const Header& h : head.headers) head_bytes += h.name.size() + h.value.size() + 4;
  out.reserve(head_bytes + 128);  // one allocation for the whole head
  out += "HTTP/1.1 ";
  append_decimal(out, static_cast<uint64_t>(head.status));
  out += ' ';
  // A reason phrase with a control byte (an escape sequence for the client's
  // terminal, a NUL) or an empty one (HTTP/2 has none) is replaced by the
  // standard one.
  out += is_clean_reason_phrase(head.reason) ? std::string_view(head.reason) : std::string_view(status_text(head.status));
  out += "\r\n";
  if (size_t invalid = append_rewritten_response_headers(head.headers, meta.via, out, head.checked_by_codec)) {
    spdlog::info("listener {}: {} response header(s) with invalid name or value dropped", listener_->name(), invalid);
  }
  // Without a length the body is re-framed as chunked (the upstream's
  // codings in front), or, for an HTTP/1.0 client, ends with the connection.
  // A response to HEAD and a 304 keep the length they announce.
  r.body.set_framing(response_framing(head.has_content_length, meta.no_body, http11));
  r.body.append_head_lines(out, head.content_length, codings,
                           head.has_content_length && (meta.head_request || head.status == 304));
  if (meta.extra) append_serialized(*meta.extra, out);
  if (r.body.framing() == BodyFraming::close_delimited || host_->draining()) close_after_ = true;
  if (!close_after_) out += keep_alive_header();
  out += close_after_ ? "Connection: close\r\n\r\n" : "\r\n";
  return true;
}

bool Http1ServerConnection::send_response_body(std::string_view bytes) {
  Response& r = response();
  uv_buf_t parts[4];
  unsigned n = 0;
  if (!r.pending_head.empty())
    parts[n++] = uv_buf_init(r.pending_head.data(), static_cast<unsigned>(r.pending_head.size()));
  n += r.body.frame(bytes, parts + n);
  int rc = host_->write(this, parts, n);
  r.bytes += r.pending_head.size() + bytes.size();
  r.pending_head.clear();
  return rc >= 0;
}

// Trailers reach an HTTP/1.1 client in the last chunk; a body framed any
// other way has nowhere to carry them.
void Http1ServerConnection::send_response_trailers(const Headers& trailers) {
  Response& r = response();
  if (!r.body.chunked() || r.trailers_sent) return;
  Headers kept;
  rewrite_trailers(trailers, kept);
  r.body.append_last(r.pending_head, kept);
  r.trailers_sent = true;
}

void Http1ServerConnection::send_response_end() {
  Response& r = response();
  if (!r.trailers_sent) r.pending_head += r.body.last();
  flush();
}

void Http1ServerConnection::flush() {
  if (!response_ || response_->pending_head.empty()) return;
  std::string& p = response_->pending_head;
  response_->bytes += p.size();
  int rc = host_->write(this, p);
  p.clear();
  if (rc < 0) abort_connection();
}

void Http1ServerConnection::send_proxy_response(int status, const char* reason, const Headers& extra, bool head_request,
                                   bool request_complete) {
  if (!request_complete || host_->draining()) close_after_ = true;
  std::string lines;
  append_serialized(extra, lines);
  lines += keep_alive_header();
  std::string out;
  append_proxy_response(out, status, reason, close_after_, lines, head_request);
  response().bytes += out.size();
  host_->write(this, out);
}

void Http1ServerConnection::close_when_flushed() {
  if (closing()) return;
  pause_reading();
  if (tls_ && tls_->handshake_done()) {  // close_notify, so the client sees a clean end
    tls_->shutdown();
    host_->flush_tls(this);
  }
  if (write_queue() == 0) {
    finish_close();
  } else {
    close_pending_ = true;
  }
}

// Lingering close (as NGINX's lingering_close): closing a socket with unread
// input makes the kernel answer with a reset, and a reset can destroy what
// we wrote last before the client read it (a GOAWAY after a flood, a 400
// with Connection: close after a request body). So the write side is shut
// (FIN after the last byte), input is read and dropped until the client's
// EOF, and the socket closes then, or after kLingerMs at the latest. Not
// while the worker drains: a lingering socket would hold the drain up.
void Http1ServerConnection::finish_close() {
  constexpr uint64_t kLingerMs = 2000;
  if (closing()) return;
  // TLS ends with close_notify; after the client's EOF nothing is unread.
  const bool linger = !tls_ && !eof_ && !lingering_ && !host_->draining();
  uv_os_fd_t fd;
  if (!linger || uv_fileno(reinterpret_cast<uv_handle_t*>(stream()), &fd) != 0 || ::shutdown(fd, SHUT_WR) != 0) {
    close_handles();
    return;
  }
  lingering_ = true;
  arm_timer(kLingerMs, [](TimerList::Entry* t) { Conn::of<Http1ServerConnection>(t)->close_handles(); });
  want_read_ = true;
  resume_reading();
  if (!reading_) close_handles();
}

void Http1ServerConnection::reject(int status, const char* reason, bool close_after, const char* log_detail,
                      std::string_view extra, RouteMetrics* counted_in, const char* hint) {
  if (closing()) return;
  if (close_after) close_after_ = true;
  static const MessageHead kNoRequest{};  // refused before a request began
  const MessageHead& req = parser_ ? parser_->head() : kNoRequest;
  std::string out;
  std::string headers(extra);
  headers += keep_alive_header();
  append_proxy_response(out, status, reason, close_after_, headers, req.method == "HEAD",
                        hint ? hint : "");
  host_->write(this, out);
  spdlog::info("listener {}: {} {} from {}: {}", listener_->name(), status, reason, peer_ip_,
               log_detail ? log_detail : "");
  ServerListener* l = listener_;
  if (!counted_in && !l->unrouted()) l->unrouted() = host_->metrics().route(listener_->name(), "", "");
  auto now_ms = std::chrono::duration_cast<Millis>(Clock::now().time_since_epoch()).count();
  (counted_in ? counted_in : l->unrouted())->on_response(status, 0, 0, now_ms);
  if (server_host()->logs_access(l->name())) {
    AccessRecord r;
    r.listener = listener_->name();
    if (counted_in) r.route = counted_in->route;
    r.method = req.method;
    r.path = req.target;
    r.status = status;
    r.error = reason;
    r.unix_ms = std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch()).count();
    r.bytes_out = out.size();
    r.caller = caller();
    write_access_log(r);
  }
  if (close_after_) {
    close_when_flushed();
  } else {
    // Only no_route without a body keeps the connection: the parser goes on.
    in_exchange_ = false;
  }
}

void Http1ServerConnection::abort_connection(const char* reason) {
  if (closing()) return;
  if (h2_) h2_->on_connection_lost(reason);
  if (ex_) {
    ex_->abort(reason);
    server_host()->retire(std::move(ex_));
  }
  close_handles();
}

// A response cut after its head (the upstream reset or closed). The head
// may still be in pending_head, held for the first body bytes, when the
// reset came in the same read: closing at once would leave the client a
// connection closed on no answer at all, which it may take as never
// served and send again (RFC 9112 9.3.1). It gets the head and the bytes
// framed so far, then the close, which its framing shows as a truncation.
void Http1ServerConnection::abort_stream(const char* reason) {
  if (closing()) return;
  if (ex_) {
    ex_->abort(reason);
    server_host()->retire(std::move(ex_));
  }
  const bool held = response_ && !response_->pending_head.empty();
  flush();  // closes the connection when the write fails
  if (closing()) return;
  if (held) {
    close_when_flushed();
  } else {
    close_handles();
  }
}

void Http1ServerConnection::drain() {
  if (lingering_) {  // its answer is out: no need to wait for the client's EOF now
    close_handles();
    return;
  }
  if (h2_) {
    h2_->drain();
    return;
  }
  if (passing_through()) return;  // a tunnel runs until it ends or drain_timeout
  close_after_ = true;
  if (!ex_ && !in_request()) close_when_flushed();
}

void Http1ServerConnection::on_closed() {
  server_host()->parsers().give_back(parser_);
  server_host()->down_closed(this);
}

void Http1ServerConnection::hold_reading() {
  want_read_ = false;
  pause_reading();
}

void Http1ServerConnection::release_reading() {
  want_read_ = true;
  resume_reading();
}

}  // namespace onelayer
