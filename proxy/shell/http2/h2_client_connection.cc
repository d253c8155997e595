// HTTP/2 upstream connections: connect (and TLS) with a timeout, the session's bytes
// in and out, stream events routed to their H2ClientStream, pooling per
// endpoint address within the peer's stream limit, GOAWAY and idle close.
#include "shell/http2/h2_client_connection.h"

#include <unistd.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "shell/stream/endpoint_pool.h"
#include "shell/http2/h2_client_stream.h"
#include "core/metrics/metrics.h"

namespace onelayer {

namespace {

// Socket bytes queued past this: the session's output waits (and its
// streams' queued_bytes() say so) until the socket drains.
constexpr size_t kMaxWriteQueue = 256 * 1024;

H2Session::Limits client_limits(const EndpointPool& ep) {
  H2Session::Limits l;
  l.max_opened_streams = ep.max_concurrent_streams;
  l.max_header_list_bytes = 64 * 1024;  // the HTTP/1 side's response head limit
  return l;
}

}  // namespace

H2ClientConnection::H2ClientConnection(ConnectionHost* w, EndpointPool* ep, int addr_index, std::shared_ptr<TlsClientContext> tls,
                                       UpstreamHandover* handover, std::string_view request_timeout_name, bool fresh)
    : Conn(w),
      ep_(ep),
      tls_ctx_(std::move(tls)),
      handover_(handover),
      session_(H2Session::Role::client, this, client_limits(*ep)),
      serial_(++ep->h2_opened),
      addr_index_(addr_index) {
  connect_req_.data = this;
  ++ep_->connections;
  ep_->h2.push_back(this);
  session_.set_request_timeout_name(request_timeout_name);
  auto& m = w->metrics();
  m.upstream_connections_active.fetch_add(1, std::memory_order_relaxed);
  // A connection taken over from HTTP/1 (ALPN chose h2) was counted in the
  // total when it opened; it counts as an HTTP/2 one from now on.
  if (fresh) m.upstream_connections_total.fetch_add(1, std::memory_order_relaxed);
  m.upstream_h2_connections_active.fetch_add(1, std::memory_order_relaxed);
  m.upstream_h2_connections_total.fetch_add(1, std::memory_order_relaxed);
}

H2ClientConnection* H2ClientConnection::take_over(UpstreamHandover::Socket s, Millis time_left,
                                                  UpstreamHandover* handover, std::string_view request_timeout_name) {
  auto* c = new H2ClientConnection(s.host, s.ep, s.addr_used, std::move(s.tls), handover, request_timeout_name, false);
  c->addr_used_ = s.addr_used;
  c->connect_timeout_ = s.connect_timeout;
  c->settings_wait_ = time_left;
  c->tls_ = std::move(s.channel);
  int rc = uv_tcp_open(&c->tcp_, s.fd);
  if (rc != 0) {
    ::close(s.fd);
    c->pending_error_ = rc;
  }
  return c;
}

void H2ClientConnection::start_taken_over(const std::string& early) {
  if (pending_error_ != 0) {  // reported on the next turn, as connect failures are
    arm_timer(0, [](TimerList::Entry* t) {
      auto* c = Conn::of<H2ClientConnection>(t);
      c->fail_connect(c->pending_error_, false);
    });
    return;
  }
  arm_timer(static_cast<uint64_t>(settings_wait_.count()),
            [](TimerList::Entry* t) { Conn::of<H2ClientConnection>(t)->fail_connect(UV_ETIMEDOUT, false); });
  if (uv_read_start(stream(), Conn::no_read_buffer, Conn::on_readable<H2ClientConnection>) == 0) reading_ = true;
  tcp_up_ = true;
  flush();  // the preface and our SETTINGS go first
  if (!early.empty() && !closing()) {
    host_->enter_read();
    read_input(early.data(), early.size());
    host_->leave_read();
  }
  if (!closing() && tls()) Conn::tls_pump(this);  // what the channel still holds
}

UpstreamStream* H2ClientConnection::new_stream(UpstreamStream::Receiver* r, bool head_request) {
  auto* s = new H2ClientStream(this, r, head_request);
  attach(s);
  return s;
}

// The TLS channel goes before its context.
H2ClientConnection::~H2ClientConnection() {
  host_->forget_write(this);
  tls_.reset();
  --ep_->connections;
}

void H2ClientConnection::write_deferred() { flush(); }

bool H2ClientConnection::has_free_slot() const {
  // The stream count before want_close() (in takes_streams), which asks
  // nghttp2 twice: a busy endpoint's full connections are passed over for
  // the count alone.
  return streams_.size() < session_.stream_limit() && takes_streams();
}

bool H2ClientConnection::takes_streams() const {
  return !closing() && !no_new_streams_ && !spent_ && !session_.want_close();
}

bool H2ClientConnection::serves_address(int addr) const {
  return addr < 0 || addr_index_ == addr || addr_used_ == addr;
}

bool H2ClientConnection::attached(const H2ClientStream* s) const {
  return std::find(streams_.begin(), streams_.end(), s) != streams_.end();
}

// Each stream's H2ClientStream is its owner pointer in the session (set when
// the stream opens, cleared when it detaches): no walk over streams_ for
// every event of every stream.
H2ClientStream* H2ClientConnection::find(int32_t id) const { return static_cast<H2ClientStream*>(session_.stream_owner(id)); }

void H2ClientConnection::connect(Millis timeout) {
  connect_timeout_ = timeout;
  ep_->refresh_addresses();  // stale addresses are still used while the refresh runs
  if (!ep_->literal && ep_->addrs.empty()) {
    if (!ep_->resolving) {
      pending_error_ = ep_->last_resolve_error ? ep_->last_resolve_error : UV_EAI_FAIL;
      pending_dns_ = true;
      arm_timer(0, [](TimerList::Entry* t) {
        auto* c = Conn::of<H2ClientConnection>(t);
        c->fail_connect(c->pending_error_, c->pending_dns_);
      });
      return;
    }
    waiting_dns_ = true;
    arm_timer(static_cast<uint64_t>(timeout.count()),
              [](TimerList::Entry* t) { Conn::of<H2ClientConnection>(t)->fail_connect(UV_ETIMEDOUT, true); });
    return;
  }
  start_connect();
}

void H2ClientConnection::on_addresses_resolved(int status) {
  if (!waiting_dns_ || closing()) return;
  waiting_dns_ = false;
  if (ep_->addrs.empty()) {
    fail_connect(status ? status : UV_EAI_NONAME, true);
    return;
  }
  start_connect();
}

void H2ClientConnection::start_connect() {
  // The balancer's address when it picked one, else the endpoint's sticky
  // one (it moves on after a failure), as for HTTP/1 connections.
  size_t n = ep_->addrs.size();
  size_t at = addr_index_ >= 0 && static_cast<size_t>(addr_index_) < n ? static_cast<size_t>(addr_index_)
                                                                        : ep_->next_addr % n;
  addr_used_ = static_cast<int>(at);
  int rc = uv_tcp_connect(&connect_req_, &tcp_, reinterpret_cast<const sockaddr*>(&ep_->addrs[at]),
                          [](uv_connect_t* req, int status) {
                            auto* c = static_cast<H2ClientConnection*>(req->data);
                            c->connecting_ = false;
                            if (status == UV_ECANCELED || c->closing()) return;
                            if (status < 0) {
                              c->disarm_timer();
                              c->ep_->next_addr++;
                              c->fail_connect(status, false);
                              return;
                            }
                            c->on_tcp_connected();
                          });
  connecting_ = rc == 0;
  if (rc != 0) {
    pending_error_ = UV_ECONNREFUSED;
    pending_dns_ = false;
    arm_timer(0, [](TimerList::Entry* t) {
      auto* c = Conn::of<H2ClientConnection>(t);
      c->fail_connect(c->pending_error_, c->pending_dns_);
    });
    return;
  }
  arm_timer(static_cast<uint64_t>(connect_timeout_.count()),
            [](TimerList::Entry* t) { Conn::of<H2ClientConnection>(t)->fail_connect(UV_ETIMEDOUT, false); });
}

namespace {

// Tells each stream taken from a connection (take_streams()) with `tell`,
// all of them held meanwhile: one told may release another (see
// H2ClientStream::hold()), which is then not told and freed at the end.
template <class Tell>
void tell_each(const std::vector<H2ClientStream*>& taken, Tell&& tell) {
  for (H2ClientStream* s : taken) s->hold();
  for (H2ClientStream* s : taken)
    if (!s->released()) tell(s);
  for (H2ClientStream* s : taken) s->unhold();
}

}  // namespace

std::vector<H2ClientStream*> H2ClientConnection::take_streams() {
  std::vector<H2ClientStream*> all;
  all.swap(streams_);
  if (!all.empty()) ++detaches_;
  queued_.clear();
  for (H2ClientStream* s : touched_)
    if (s) s->set_touched_slot(H2ClientStream::kNotTouched);
  touched_.clear();
  return all;
}

void H2ClientConnection::fail_connect(int err, bool dns) {
  if (closing()) return;
  close_now();
  tell_each(take_streams(), [&](H2ClientStream* s) { s->on_connect_failed(err, dns); });
}

// Usable once the TLS handshake (h2) is done and the peer's SETTINGS arrive
// (its stream limit), all within the connect timeout armed at the start.
void H2ClientConnection::on_tcp_connected() {
  uv_tcp_nodelay(&tcp_, 1);
  if (uv_read_start(stream(), Conn::no_read_buffer, Conn::on_readable<H2ClientConnection>) == 0) reading_ = true;
  if (tls_ctx_) {
    tls_ = tls_ctx_->open(ep_->hp.host, ep_->label);
    Conn::tls_pump(this);  // writes the ClientHello
    return;
  }
  tcp_up_ = true;
  flush();  // the preface and our SETTINGS
}

void H2ClientConnection::on_tls_handshake(bool ok) {
  if (!ok) {
    fail_tls(tls_->error_text(), tls_->verify_failed());
    return;
  }
  std::string alpn = tls_->alpn();
  if (alpn != "h2" && tls_ctx_->negotiates()) {
    ep_->learn_alpn(EndpointPool::Alpn::http1);
    hand_over_to_http1();
    return;
  }
  if (alpn != "h2") {
    fail_tls("the upstream chose ALPN " + (alpn.empty() ? std::string("nothing") : alpn) + ", not h2", false);
    return;
  }
  spdlog::debug("upstream {}: TLS {} ({}), ALPN h2", ep_->label, SSL_get_version(tls_->ssl()),
                tls_->session_reused() ? "resumed" : "full handshake");
  tcp_up_ = true;
  flush();
}

// An `auto` endpoint that spoke HTTP/2 before chose http/1.1 now: nothing
// of the waiting streams was sent. The first goes on over this socket and
// TLS channel as an HTTP/1.1 connection, the others over HTTP/1.1
// connections of their own (a pooled one, or a new one). When the
// handshake's last bytes have not left yet, none takes this socket over.
void H2ClientConnection::hand_over_to_http1() {
  std::vector<H2ClientStream*> waiting = take_streams();
  spdlog::info("upstream {}: a new HTTP/2 connection negotiated http/1.1: {} waiting attempt(s) go over HTTP/1.1",
               ep_->label, waiting.size());
  int fd = waiting.empty() || write_queue() > 0 ? -1 : duplicate_socket();
  UpstreamStream* first = nullptr;
  if (fd >= 0) {
    H2ClientStream* s = waiting.front();
    first = handover_->continue_as_http1({host_, ep_, addr_used_, tls_ctx_, std::move(tls_), fd, connect_timeout_},
                                         s->receiver(), s->head_request());
  }
  close_now();
  tell_each(waiting, [&](H2ClientStream* s) {
    UpstreamStream::Receiver* r = s->receiver();
    UpstreamStream* next;
    if (first && s == waiting.front()) {
      next = first;
    } else {
      next = handover_->open_http1(host_, ep_, addr_index_, tls_ctx_, r, s->head_request(), connect_timeout_);
    }
    s->move_attempt_to(next);
    if (next != first && next->ready()) r->on_connected();  // a pooled connection: the request goes now
  });
  if (first) first->start_taken_over(std::string());
}

void H2ClientConnection::fail_tls(const std::string& why, bool verify) {
  if (closing()) return;
  close_now();
  tell_each(take_streams(), [&](H2ClientStream* s) { s->on_tls_failed(why, verify); });
}

// The peer's SETTINGS came: streams beyond its limit move to another
// connection (they have sent nothing yet), the rest may send now.
void H2ClientConnection::become_ready() {
  connected_ = true;
  disarm_timer();
  size_t limit = session_.stream_limit();
  ep_->h2_peer_stream_limit = static_cast<uint32_t>(limit);  // stream_limit() is a uint32_t
  if (limit == 0) {
    // The peer takes no streams now: its waiting streams are refused (they
    // go elsewhere after the retry backoff) rather than moved from one new
    // connection to the next.
    no_new_streams_ = true;
    for (H2ClientStream* s : std::vector<H2ClientStream*>(streams_))
      if (attached(s)) s->on_refused();
    if (streams_.empty()) arm_idle();
    return;
  }
  // A stream that moves to a connection already connected (one whose own
  // streams ended while this one was connecting) may send at once, as
  // those here may; one that moves to a connecting one waits for its
  // SETTINGS there.
  std::vector<std::pair<H2ClientStream*, H2ClientConnection*>> go_now;
  if (streams_.size() > limit) {
    // A stream that re-sends a refused request stays, to wait for a slot
    // here: the others were opened before the refusal (for_new_stream).
    std::vector<H2ClientStream*> excess;
    auto kept = streams_.begin() + static_cast<std::ptrdiff_t>(limit);
    for (auto it = kept; it != streams_.end(); ++it) {
      if ((*it)->receiver()->follows_refusal()) *kept++ = *it;
      else excess.push_back(*it);
    }
    streams_.erase(kept, streams_.end());
    ++detaches_;
    for (H2ClientStream* s : excess) {
      H2ClientConnection* other = for_new_stream(host_, ep_, addr_index_, tls_ctx_, connect_timeout_, handover_, *s->receiver());
      s->move_to(other);
      other->attach(s);
      if (other->connected()) go_now.emplace_back(s, other);
    }
  }
  for (H2ClientStream* s : std::vector<H2ClientStream*>(streams_))
    if (attached(s)) s->on_connected();
  for (auto [s, other] : go_now)
    if (other->attached(s)) s->on_connected();
  if (streams_.empty()) arm_idle();
}

H2ClientConnection* H2ClientConnection::for_new_stream(ConnectionHost* w, EndpointPool* ep, int addr,
                                   const std::shared_ptr<TlsClientContext>& tls, Millis connect_timeout,
                                   UpstreamHandover* handover, const UpstreamStream::Receiver& r,
                                   bool follows_refusal) {
  // An idle connection made under another TLS context (before a reload)
  // will not serve again.
  std::vector<H2ClientConnection*> stale;
  for (H2ClientConnection* c : ep->h2)
    if (c->tls_ctx_ != tls && c->connected_ && c->streams_.empty()) stale.push_back(c);
  for (H2ClientConnection* c : stale) c->close_now();
  // A connected connection with a free slot first, then a connecting one.
  H2ClientConnection* pick = nullptr;
  // After a refusal, only a connection opened since the endpoint's latest
  // one: a peer that closes its connections after so many requests (NGINX's
  // keepalive_requests) closes those opened with the refusing one at about
  // the same time, refusing whatever was sent to them meanwhile. One still
  // connecting takes the stream even when full (before the peer's SETTINGS
  // its stream limit is a guess, and the stream waits there for a slot)
  // up to the limit the endpoint's last SETTINGS gave: one refusing
  // connection is replaced by one new connection, however many streams it
  // refused, and connections refusing at the same moment by as many.
  const uint64_t opened_after = follows_refusal ? ep->h2_refusal_mark : 0;
  H2ClientConnection* connecting_full = nullptr;
  for (H2ClientConnection* c : ep->h2) {
    if (c->serial_ <= opened_after || c->tls_ctx_ != tls || !c->serves_address(addr)) continue;
    if (!c->has_free_slot()) {
      if (follows_refusal && !connecting_full && !c->connected() && c->takes_streams() &&
          (ep->h2_peer_stream_limit == 0 || c->streams_.size() < ep->h2_peer_stream_limit))
        connecting_full = c;
      continue;
    }
    if (c->connected()) return c;
    if (!pick) pick = c;
  }
  if (pick) return pick;
  if (connecting_full) return connecting_full;
  pick = new H2ClientConnection(w, ep, addr, tls, handover, r.request_timeout_header());
  pick->connect(connect_timeout);
  return pick;
}

void H2ClientConnection::lose(int err) {
  if (closing()) return;
  if (!connected_) {  // before its SETTINGS: the peer does not speak HTTP/2 (or went away)
    spdlog::info("upstream {}: connection ended before HTTP/2 SETTINGS: {}", ep_->label, uv_strerror(err));
    fail_connect(err, false);
    return;
  }
  spdlog::debug("upstream {}: HTTP/2 connection lost with {} streams: {}", ep_->label, streams_.size(),
                uv_strerror(err));
  close_now();
  tell_each(take_streams(), [&](H2ClientStream* s) { s->on_lost(err); });
}

void H2ClientConnection::close_now() {
  if (closing()) return;
  auto it = std::find(ep_->h2.begin(), ep_->h2.end(), this);
  if (it != ep_->h2.end()) ep_->h2.erase(it);
  if (counted_) {
    counted_ = false;
    host_->metrics().upstream_connections_active.fetch_sub(1, std::memory_order_relaxed);
    host_->metrics().upstream_h2_connections_active.fetch_sub(1, std::memory_order_relaxed);
  }
  if (reading_) uv_read_stop(stream());
  reading_ = false;
  close_handles();
}

void H2ClientConnection::arm_idle() {
  if (closing()) return;
  if (in_flush_) {
    // The last stream left from inside the session's flush (its attempt
    // ended as the frame closing it went out): closing here would drop the
    // output still being gathered, a GOAWAY of ours among it. flush()
    // decides once that is written.
    idle_after_flush_ = true;
    return;
  }
  if (no_new_streams_ || spent_ || host_->draining() || session_.want_close()) {
    close_now();
    return;
  }
  arm_timer(static_cast<uint64_t>(ep_->idle_timeout.count()),
            [](TimerList::Entry* t) { Conn::of<H2ClientConnection>(t)->close_now(); });
}

void H2ClientConnection::attach(H2ClientStream* s) {
  s->set_attach_seq(next_attach_seq_++);
  // pool.max_requests_per_connection: no stream after the last one allowed;
  // the connection closes once its streams end.
  const uint32_t most = ep_->max_requests_per_connection;
  if (most != 0 && next_attach_seq_ >= most) spent_ = true;
  streams_.push_back(s);
  if (connected_) disarm_timer();  // no longer idle
}

void H2ClientConnection::detach(H2ClientStream* s) {
  // The list is in attach order: found by halving, not by a walk.
  auto it = std::lower_bound(streams_.begin(), streams_.end(), s->attach_seq(),
                             [](const H2ClientStream* x, uint64_t seq) { return x->attach_seq() < seq; });
  if (it == streams_.end() || *it != s) return;
  streams_.erase(it);
  ++detaches_;
  if (s->id() != 0 && session_.stream_owner(s->id()) == s) session_.set_stream_owner(s->id(), nullptr);
  auto q = std::find(queued_.begin(), queued_.end(), s);
  if (q != queued_.end()) queued_.erase(q);
  if (size_t slot = s->touched_slot(); slot != H2ClientStream::kNotTouched) {
    if (slot < touched_.size() && touched_[slot] == s) touched_[slot] = nullptr;
    s->set_touched_slot(H2ClientStream::kNotTouched);
  }
  open_queued();
  flush();
  if (streams_.empty() && connected_) arm_idle();
}

int32_t H2ClientConnection::open_stream(H2ClientStream* s, H2Request& request, bool end_stream) {
  // Streams queued first go first.
  if (queued_.empty() || queued_.front() == s) {
    int32_t id = session_.submit_request(request.line(), std::move(request.fields), end_stream);
    if (id > 0) {
      session_.set_stream_owner(id, s);
      if (!queued_.empty()) queued_.erase(queued_.begin());
      return id;
    }
  }
  if (std::find(queued_.begin(), queued_.end(), s) == queued_.end()) queued_.push_back(s);
  if (no_new_streams_ || session_.want_close()) {
    // Nothing will free a slot here: refused on the next turn (not from
    // inside the caller's send).
    arm_timer(0, [](TimerList::Entry* t) { Conn::of<H2ClientConnection>(t)->refuse_queued(); });
  }
  return 0;
}

void H2ClientConnection::open_queued() {
  while (!queued_.empty() && session_.can_submit_request()) {
    H2ClientStream* s = queued_.front();
    size_t before = queued_.size();
    s->open_queued();
    if (queued_.size() == before && !queued_.empty() && queued_.front() == s) break;  // still waiting
  }
}

void H2ClientConnection::refuse_queued() {
  std::vector<H2ClientStream*> q;
  q.swap(queued_);
  for (H2ClientStream* s : q)
    if (attached(s)) s->on_refused();
}

void H2ClientConnection::flush() {
  if (closing() || !tcp_up_) return;
  if (in_read_) return;  // on_read flushes once the read is done
  if (host_->defer_write(this)) return;  // after the poll, once for all streams
  if (in_flush_) {
    // Called back from inside the session's flush below (a stream closed
    // as its RST_STREAM or refused HEADERS left, and its attempt ended):
    // a second nghttp2_session_mem_send there is not allowed, and this
    // one's out_.clear() would drop what the first has gathered while
    // that one writes the second's bytes again.
    flush_again_ = true;
    return;
  }
  if (write_queue() > kMaxWriteQueue) return;  // on_write_done flushes again
  in_flush_ = true;
  do {
    flush_again_ = false;
    out_.clear();
    session_.flush(out_);
    for (H2ClientStream* s : streams_) s->mark_sent();
    if (!out_.empty()) {
      int rc = host_->write(this, out_);
      if (rc < 0) {
        in_flush_ = false;
        lose(rc);
        return;
      }
    }
  } while (flush_again_ && !closing() && write_queue() <= kMaxWriteQueue);
  in_flush_ = false;
  if (closing()) return;
  if (idle_after_flush_) {
    idle_after_flush_ = false;
    if (streams_.empty() && connected_ && !session_.want_close()) arm_idle();
    if (closing()) return;
  }
  if (session_.want_close()) {
    // A GOAWAY we sent (the peer misbehaved) or the session's end: close
    // once it is written.
    if (session_.take_error_end()) {
      spdlog::warn("upstream {}: HTTP/2 connection ended by onelayer: GOAWAY code {} ({}); its streams fail as resets",
                   ep_->label, session_.goaway_code(), session_.close_reason());
    }
    if (write_queue() == 0) {
      lose(UV_ECONNRESET);
    } else {
      close_when_flushed_ = true;
    }
    return;
  }
  notify_drained();
}

void H2ClientConnection::notify_drained() {
  // A stream may leave (and be freed) inside another's on_drained: while
  // none has, the copy holds only attached streams; once one has, each is
  // looked up before it is told.
  const uint64_t before = detaches_;
  for (H2ClientStream* s : std::vector<H2ClientStream*>(streams_))
    if (detaches_ == before || attached(s)) s->on_drained();
}

void H2ClientConnection::on_write_done(int status) {
  if (closing()) return;
  if (status < 0) {
    if (status != UV_ECANCELED) lose(status);
    return;
  }
  if (close_when_flushed_) {
    if (write_queue() == 0) lose(UV_ECONNRESET);
    return;
  }
  flush();
}

void H2ClientConnection::on_read(ssize_t nread, const uv_buf_t* buf) {
  if (nread == 0 || closing()) return;
  if (nread < 0) {
    lose(static_cast<int>(nread));
    return;
  }
  // The downstreams this input answers write after the poll, once each.
  host_->enter_read();
  read_input(buf->base, static_cast<size_t>(nread));
  host_->leave_read();
}

void H2ClientConnection::read_input(const char* data, size_t len) {
  in_read_ = true;
  session_.recv(reinterpret_cast<const uint8_t*>(data), len, uv_now(host_->loop()));
  in_read_ = false;
  if (closing()) return;
  if (!connected_ && session_.peer_settings_received()) become_ready();
  flush();  // WINDOW_UPDATEs, SETTINGS ACK, a GOAWAY of ours
  // Each stream with events in this read, once. One that leaves meanwhile
  // (its exchange ended inside another's call) is nulled by detach().
  for (size_t i = 0; i < touched_.size(); ++i) {
    H2ClientStream* s = touched_[i];
    if (!s) continue;
    touched_[i] = nullptr;
    s->set_touched_slot(H2ClientStream::kNotTouched);
    s->on_read_done();
  }
  touched_.clear();
  if (!closing() && no_new_streams_ && streams_.empty()) close_now();
}

void H2ClientConnection::touch(H2ClientStream* s) {
  if (s->touched_slot() != H2ClientStream::kNotTouched) return;
  s->set_touched_slot(touched_.size());
  touched_.push_back(s);
}

void H2ClientConnection::on_head(int32_t stream, H2Session::Head& head, bool end_stream) {
  if (H2ClientStream* s = find(stream)) {
    touch(s);
    s->on_head(head, end_stream);
  }
}

void H2ClientConnection::on_data(int32_t stream, const uint8_t* data, size_t len) {
  H2ClientStream* s = find(stream);
  if (!s) {
    session_.consume(stream, len);  // nobody wants these: keep the window open
    return;
  }
  touch(s);
  s->on_data(data, len);
}

void H2ClientConnection::on_trailers(int32_t stream, Headers& trailers) {
  if (H2ClientStream* s = find(stream)) s->on_trailers(trailers);
}

void H2ClientConnection::on_end(int32_t stream) {
  if (H2ClientStream* s = find(stream)) s->on_end();
}

void H2ClientConnection::on_reset(int32_t stream, uint32_t error_code) {
  // A peer that refuses streams gets no new ones here: they go to another
  // connection, and this one closes once its streams are done.
  if (error_code == H2Session::kRefusedStream) stop_new_streams();
  if (H2ClientStream* s = find(stream)) s->on_reset(error_code);
  open_queued();
}

void H2ClientConnection::on_closed(int32_t stream) {
  if (H2ClientStream* s = find(stream)) s->on_closed();
  open_queued();
}

void H2ClientConnection::stop_new_streams() {
  // Once per connection: the streams it refuses next (a GOAWAY refuses every
  // one above it) are re-sent on the connection opened for the first one.
  if (no_new_streams_) return;
  no_new_streams_ = true;
  ep_->h2_refusal_mark = ep_->h2_opened;
}

void H2ClientConnection::on_goaway(int32_t last_stream_id, uint32_t error_code) {
  spdlog::debug("upstream {}: GOAWAY last-stream-id {} code {}", ep_->label, last_stream_id, error_code);
  stop_new_streams();
  // Streams above last_stream_id hear REFUSED_STREAM from the session;
  // the ones still waiting for a slot were never sent.
  refuse_queued();
}

UpstreamStream* open_h2_upstream_stream(ConnectionHost* w, EndpointPool* ep, int addr,
                                        const std::shared_ptr<TlsClientContext>& tls, UpstreamStream::Receiver* r,
                                        bool head_request, Millis connect_timeout, UpstreamHandover* handover) {
  return H2ClientConnection::for_new_stream(w, ep, addr, tls, connect_timeout, handover, *r, r->follows_refusal())
      ->new_stream(r, head_request);
}

}  // namespace onelayer
