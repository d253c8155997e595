// Upstream connections: connect with a timeout, response parsing,
// keep-alive pooling with idle timeouts and detection of connections the
// upstream closed while pooled. (The DNS cache: endpoint_state.cc.)
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/request/request_validation.h"
#include "shell/stream/endpoint_pool.h"
#include "shell/http1/http1_client_connection.h"
#include "core/metrics/metrics.h"

namespace onelayer {

Http1ClientConnection::Http1ClientConnection(ConnectionHost* w, EndpointPool* ep, int addr_index, UpstreamHandover* handover,
                                             bool fresh)
    : Conn(w), ep_(ep), handover_(handover), parser_(HTTP_RESPONSE, this), addr_index_(addr_index) {
  connect_req_.data = this;
  ++ep_->connections;
  parser_.set_limits(64 * 1024, 256);
  auto& m = w->metrics();
  m.upstream_connections_active.fetch_add(1, std::memory_order_relaxed);
  if (fresh) m.upstream_connections_total.fetch_add(1, std::memory_order_relaxed);
}

Http1ClientConnection::~Http1ClientConnection() {
  tls_.reset();
  --ep_->connections;
}

Http1ClientConnection* Http1ClientConnection::take_over(UpstreamHandover::Socket s, UpstreamHandover* handover) {
  auto* u = new Http1ClientConnection(s.host, s.ep, s.addr_used, handover, false);
  u->addr_used_ = s.addr_used;
  u->connect_timeout_ = s.connect_timeout;
  u->tls_ctx_ = std::move(s.tls);
  u->tls_ = std::move(s.channel);
  int rc = uv_tcp_open(&u->tcp_, s.fd);
  if (rc != 0) {
    ::close(s.fd);
    u->open_error_ = rc;  // reported as a connect failure by start_taken_over
  }
  return u;
}

// (An HTTP/2 connection hands over before any plaintext: `early` is empty.)
void Http1ClientConnection::start_taken_over(const std::string&) {
  if (open_error_ != 0) {
    arm_timer(0, [](TimerList::Entry* t) {
      auto* u = Conn::of<Http1ClientConnection>(t);
      if (u->ex_) u->ex_->on_connect_failed(u->open_error_, false);
    });
    return;
  }
  connected_ = true;
  if (ex_) ex_->on_connected();
  resume_reading();
  if (!closing() && tls()) Conn::tls_pump(this);  // what the channel still holds
}

void Http1ClientConnection::connect(Millis timeout) {
  connect_timeout_ = timeout;
  ep_->refresh_addresses();  // stale addresses are still used while the refresh runs
  if (!ep_->literal) {
    if (ep_->addrs.empty()) {
      if (!ep_->resolving) {
        fail_dns_later(ep_->last_resolve_error ? ep_->last_resolve_error : UV_EAI_FAIL);
        return;
      }
      ep_->waiting.push_back(this);
      arm_timer(static_cast<uint64_t>(timeout.count()), [](TimerList::Entry* t) {
        auto* u = Conn::of<Http1ClientConnection>(t);
        if (u->ex_) u->ex_->on_connect_failed(UV_ETIMEDOUT, true);
      });
      return;
    }
  }
  start_connect();
}

void Http1ClientConnection::attach(UpstreamStream::Receiver* rx, bool head_request) {
  ex_ = rx;
  client_connection_ = rx ? rx->client_connection() : 0;
  expect_no_body_ = head_request;
  upgrade_asked_ = false;
}

// The request in HTTP/1.1: request line, the rewritten fields, Host when the
// request had none, Upgrade said anew (it is hop-by-hop), the body framing,
// and the body bytes given with the head, all in one write.
int Http1ClientConnection::send_request(const OutgoingRequest& req) {
  const MessageHead& head = *req.head;
  ++requests_;
  body_.set_framing(head.chunked ? BodyFraming::chunked
                    : head.has_content_length ? BodyFraming::length
                                              : BodyFraming::none);
  std::string& out = host_->scratch();
  out.clear();
  out += head.method;
  out += ' ';
  out += req.target;
  out += " HTTP/1.1\r\n";
  if (!append_rewritten_request_headers(head.headers, *req.rewrite, out)) {
    out += "Host: ";
    out += req.default_host;
    out += "\r\n";
  }
  if (!req.upgrade.empty()) {
    upgrade_asked_ = true;
    out += "Connection: Upgrade\r\nUpgrade: ";
    out += req.upgrade;
    out += "\r\n";
  }
  body_.append_head_lines(out, head.content_length);
  out += "\r\n";
  if (!req.body.empty()) body_.append(out, req.body);
  if (req.end && req.trailers) {
    body_.append_last(out, *req.trailers);  // a Content-Length body cannot carry them
  } else if (req.end) {
    out += body_.last();
  }
  return host_->write(this, out);
}

void Http1ClientConnection::send_request_body(std::string_view bytes) {
  uv_buf_t parts[3];
  host_->write(this, parts, body_.frame(bytes, parts));
}

void Http1ClientConnection::send_request_end() {
  if (body_.chunked()) host_->write(this, body_.last());
}

// In the last chunk; a body with Content-Length has nowhere to carry them.
void Http1ClientConnection::send_request_trailers(const Headers& trailers) {
  if (!body_.chunked()) return;
  std::string& out = host_->scratch();
  out.clear();
  body_.append_last(out, trailers);
  host_->write(this, out);
}

void Http1ClientConnection::release(bool reusable) {
  if (reusable) {
    release_to_pool();
  } else {
    detach_and_close();
  }
}

void Http1ClientConnection::leave_pool() {
  idle_ = false;
  disarm_timer();
}

void Http1ClientConnection::fail_dns(int err) {
  if (ex_) ex_->on_connect_failed(err, true);
}

// On the next turn: the attempt that opened this stream has not even got
// it back yet when connect() finds no address.
void Http1ClientConnection::fail_dns_later(int err) {
  dns_error_ = err;
  arm_timer(0, [](TimerList::Entry* t) {
    auto* u = Conn::of<Http1ClientConnection>(t);
    u->fail_dns(u->dns_error_);
  });
}

void Http1ClientConnection::pause_reading() {
  if (reading_) {
    uv_read_stop(stream());
    reading_ = false;
  }
}

void Http1ClientConnection::resume_reading() {
  if (closing() || reading_ || !connected_) return;
  if (uv_read_start(stream(), Conn::no_read_buffer, Conn::on_readable<Http1ClientConnection>) == 0) reading_ = true;
}

// The TCP connection is up; the handshake gets what is left of
// connect_timeout, and `connected_` waits for its end.
void Http1ClientConnection::start_tls() {
  tls_ = tls_ctx_->open(ep_->hp.host, ep_->label, http1_only_);
  uint64_t spent = uv_now(host_->loop()) - connect_started_;
  uint64_t budget = static_cast<uint64_t>(connect_timeout_.count());
  arm_timer(spent < budget ? budget - spent : 1, [](TimerList::Entry* t) {
    auto* u = Conn::of<Http1ClientConnection>(t);
    spdlog::info("upstream {}: TLS handshake not done within connect_timeout", u->ep_->label);
    if (u->ex_) u->ex_->on_connect_failed(UV_ETIMEDOUT, false);
  });
  if (uv_read_start(stream(), Conn::no_read_buffer, Conn::on_readable<Http1ClientConnection>) == 0) reading_ = true;
  Conn::tls_pump(this);  // writes the ClientHello
}

void Http1ClientConnection::on_tls_handshake(bool ok) {
  if (!ok) {
    if (ex_) ex_->on_tls_failed(tls_->error_text(), tls_->verify_failed());
    return;
  }
  disarm_timer();
  std::string alpn = tls_->alpn();
  spdlog::debug("upstream {}: TLS {} ({}), ALPN {}", ep_->label, SSL_get_version(tls_->ssl()),
                tls_->session_reused() ? "resumed" : "full handshake", alpn.empty() ? "none" : alpn);
  // `auto` (unless this connection offered http/1.1 alone): the server's
  // choice decides what the connection speaks, and the endpoint remembers it.
  const bool negotiated = tls_ctx_->negotiates() && !http1_only_;
  if (negotiated && alpn == "h2") {
    ep_->learn_alpn(EndpointPool::Alpn::h2);
    hand_over_to_h2();
    return;
  }
  if (!alpn.empty() && alpn != "http/1.1") {
    if (ex_) ex_->on_tls_failed("the upstream chose ALPN protocol " + alpn + ", which onelayer does not speak", false);
    return;
  }
  if (negotiated) ep_->learn_alpn(EndpointPool::Alpn::http1);
  connected_ = true;
  if (ex_) ex_->on_connected();
}

void Http1ClientConnection::hand_over_to_h2() {
  pause_reading();
  handing_over_ = true;
  if (write_queue() == 0) finish_h2_handover();  // else on_write_done does
}

void Http1ClientConnection::finish_h2_handover() {
  handing_over_ = false;
  if (!ex_) {
    detach_and_close();
    return;
  }
  int own = duplicate_socket();
  if (own < 0) {
    fail_handover(std::string("cannot hand the connection to HTTP/2: ") + std::strerror(errno));
    return;
  }
  uint64_t spent = uv_now(host_->loop()) - connect_started_;
  uint64_t budget = static_cast<uint64_t>(connect_timeout_.count());
  UpstreamStream* next =
      handover_->continue_as_h2({host_, ep_, addr_used_, tls_ctx_, std::move(tls_), own, connect_timeout_},
                                Millis(spent < budget ? budget - spent : 1), ex_, expect_no_body_);
  UpstreamStream::Receiver* rx = ex_;
  ex_ = nullptr;
  rx->on_stream_moved(next);
  std::string early;
  early.swap(early_);
  detach_and_close();
  next->start_taken_over(early);
}

void Http1ClientConnection::fail_handover(const std::string& why) {
  handing_over_ = false;
  if (ex_) {
    ex_->on_tls_failed(why, false);
  } else {
    detach_and_close();
  }
}

void Http1ClientConnection::on_tls_error() {
  if (handing_over_) {
    fail_handover(tls_->error_text());
    return;
  }
  if (idle_ || !ex_) {
    detach_and_close();
    return;
  }
  ex_->on_up_tls_error(tls_->error_text());
}

void Http1ClientConnection::start_connect() {
  if (ep_->addrs.empty()) {
    fail_dns_later(UV_EAI_NONAME);
    return;
  }
  // The balancer's address when it picked one (a DNS name balances per
  // address); otherwise sticky: stay on the address that works, move on
  // after a failure.
  size_t n = ep_->addrs.size();
  size_t at = addr_index_ >= 0 && static_cast<size_t>(addr_index_) < n ? static_cast<size_t>(addr_index_)
                                                                        : ep_->next_addr % n;
  const sockaddr_storage& ss = ep_->addrs[at];
  addr_used_ = static_cast<int>(at);
  connect_started_ = uv_now(host_->loop());
  int rc = uv_tcp_connect(&connect_req_, &tcp_, reinterpret_cast<const sockaddr*>(&ss), [](uv_connect_t* req, int status) {
    auto* u = static_cast<Http1ClientConnection*>(req->data);
    u->connecting_ = false;
    if (status == UV_ECANCELED || u->closing()) return;
    u->disarm_timer();
    if (status < 0) {
      u->ep_->next_addr++;  // the next attempt tries the endpoint's next address
      if (u->ex_) u->ex_->on_connect_failed(status, false);
      return;
    }
    uv_tcp_nodelay(&u->tcp_, 1);
    if (u->tls_ctx_) {
      u->start_tls();  // connected once the handshake is done
      return;
    }
    u->connected_ = true;
    u->resume_reading();
    if (u->ex_) u->ex_->on_connected();
  });
  connecting_ = rc == 0;
  if (rc != 0) {
    // Report on the next turn so the caller's stack unwinds first.
    arm_timer(0, [](TimerList::Entry* t) {
      auto* u = Conn::of<Http1ClientConnection>(t);
      if (u->ex_) u->ex_->on_connect_failed(UV_ECONNREFUSED, false);
    });
    return;
  }
  arm_timer(static_cast<uint64_t>(connect_timeout_.count()), [](TimerList::Entry* t) {
    auto* u = Conn::of<Http1ClientConnection>(t);
    if (u->ex_) u->ex_->on_connect_failed(UV_ETIMEDOUT, false);
  });
}

void Http1ClientConnection::on_read(ssize_t nread, const uv_buf_t* buf) {
  if (nread == 0) return;
  if (nread < 0 && tls_ && !tls_->handshake_done()) {  // closed mid-handshake
    if (ex_)
      ex_->on_tls_failed(std::string("the upstream closed the connection during the TLS handshake (") +
                             uv_strerror(static_cast<int>(nread)) + ")",
                         false);
    return;
  }
  if (handing_over_) {  // the HTTP/2 connection taking over reads these first
    if (nread > 0) {
      early_.append(buf->base, static_cast<size_t>(nread));
    } else {
      fail_handover(std::string("the upstream closed the connection after the TLS handshake (") +
                    uv_strerror(static_cast<int>(nread)) + ")");
    }
    return;
  }
  if (tunnel_) {  // a tunnel after a 101
    if (ex_) {
      ex_->on_tunnel_up(nread, buf);
    } else {
      detach_and_close();
    }
    return;
  }
  if (idle_ || !ex_) {
    // Data or EOF on a pooled connection: the upstream closed it (or sent
    // garbage); it must never be handed to a request.
    detach_and_close();
    return;
  }
  if (nread < 0) {
    if (nread == UV_EOF && head_seen_ && parser_.message_needs_eof()) {
      parser_.finish();
      if (message_done_) {
        message_done_ = false;
        keep_alive_ = false;
        ex_->on_up_end(false);
        return;
      }
    }
    ex_->on_up_error(static_cast<int>(nread));
    return;
  }
  size_t len = static_cast<size_t>(nread);
  size_t used = parser_.feed(buf->base, len);
  if (!ex_ || closing()) return;  // the exchange let go of this connection meanwhile
  if (message_done_ && tunnel_) {  // after a 101 head, what follows is tunnel bytes
    message_done_ = false;
    ex_->start_tunnel(buf->base + used, len - used);
    return;
  }
  if (message_done_) {
    message_done_ = false;
    bool extra = used < len;
    parser_.resume();
    ex_->on_up_end(keep_alive_ && !extra);
    return;
  }
  ex_->on_up_read_done();  // a head without body bytes in this read goes out now
  // (Writing it may have found the client gone: the exchange let go of us.)
  if (ex_ && parser_.error() != HttpParser::Error::none) {
    ex_->on_up_bad_response();
  }
}

int Http1ClientConnection::on_head(MessageHead& head) {
  // llhttp lets 0, 099 and 600-999 through; RFC 9110 15 ends at 599.
  if (head.status < 100 || head.status > 599) return -1;
  if (head.has_content_length && head.content_length > kMaxContentLength) return -1;
  if (head.status == 101 && ex_ && upgrade_asked_) {  // the switch was asked for
    head_seen_ = true;
    if (ex_->on_up_switching(head) < 0) return -1;
    tunnel_ = true;
    return 1;  // no body; the bytes after the head are the tunnel's
  }
  if (head.status >= 100 && head.status < 200) {
    if (head.status == 101) return -1;  // no Upgrade was asked for: a 101 is a broken upstream
    informational_ = true;
    return 0;
  }
  head_seen_ = true;
  keep_alive_ = head.keep_alive;
  if (!ex_) return -1;
  int rc = ex_->on_up_head(head);
  if (rc < 0) return -1;
  // llhttp reads a body after a 204/304 that carries Content-Length; RFC
  // 9110 says they never have one, nor does the answer to HEAD.
  bool no_body = expect_no_body_ || head.status == 204 || head.status == 304;
  return no_body ? 1 : rc;
}

int Http1ClientConnection::on_body(const char* data, size_t len) {
  if (!ex_) return -1;
  return ex_->on_up_body(data, len);
}

// The trailer section after a chunked response body.
void Http1ClientConnection::on_trailers(Headers& trailers) {
  if (ex_ && !informational_) ex_->on_up_trailers(trailers);
}

int Http1ClientConnection::on_message_end() {
  if (informational_) {
    informational_ = false;
    return 0;
  }
  message_done_ = true;
  return HPE_PAUSED;
}

void Http1ClientConnection::on_write_done(int status) {
  if (handing_over_) {  // nothing of the request went yet
    if (status < 0) {
      if (status != UV_ECANCELED)
        fail_handover(std::string("write failed after the TLS handshake: ") + uv_strerror(status));
    } else if (write_queue() == 0) {
      finish_h2_handover();
    }
    return;
  }
  if (close_when_flushed_ && (status < 0 || write_queue() == 0)) {  // a tunnel after a 101
    detach_and_close();
    return;
  }
  if (status < 0) {
    if (status != UV_ECANCELED && ex_) ex_->on_up_error(status);
    return;
  }
  if (ex_) ex_->on_up_drained();
}

void Http1ClientConnection::release_to_pool() {
  ex_ = nullptr;
  // reuse: safe: a full pool gives up its oldest connection (its client
  // has most likely gone) rather than this one, which its client may want.
  if (ep_->reuse_safe && !closing() && ep_->max_idle != 0 && ep_->idle.size() >= ep_->max_idle) {
    if (Http1ClientConnection* oldest = take_idle(*ep_, -1, 0, /*oldest=*/true)) oldest->detach_and_close();
  }
  if (closing() || ep_->idle.size() >= ep_->max_idle || host_->draining() ||
      (ep_->max_requests_per_connection != 0 && requests_ >= ep_->max_requests_per_connection)) {
    detach_and_close();
    return;
  }
  idle_ = true;
  head_seen_ = false;
  expect_no_body_ = false;
  parser_.reset();
  resume_reading();  // notices an upstream close while pooled
  ep_->pool(this, client_connection_);
  arm_timer(static_cast<uint64_t>(ep_->idle_timeout.count()), [](TimerList::Entry* t) {
    Conn::of<Http1ClientConnection>(t)->detach_and_close();
  });
}

void Http1ClientConnection::close_when_flushed() {
  ex_ = nullptr;
  pause_reading();
  if (closing() || write_queue() == 0) {
    detach_and_close();
    return;
  }
  close_when_flushed_ = true;
  arm_timer(10'000, [](TimerList::Entry* t) { Conn::of<Http1ClientConnection>(t)->detach_and_close(); });
}

void Http1ClientConnection::detach_and_close(bool reset) {
  if (closing()) return;
  ex_ = nullptr;
  ep_->forget(this);
  idle_ = false;
  host_->metrics().upstream_connections_active.fetch_sub(1, std::memory_order_relaxed);
  close_handles(reset);
}

const std::string& Http1ClientConnection::endpoint_label() const { return ep_->label; }

Http1ClientConnection* Http1ClientConnection::take_idle(EndpointPool& ep, int addr, uint64_t client, bool oldest) {
  // A DNS name's idle connections may lead to other addresses (members):
  // only one to `addr` will do.
  while (oldest && !ep.idle.empty()) {
    Http1ClientConnection* u = ep.idle.front();
    ep.unpool(0);
    if (u->closing()) continue;
    u->leave_pool();
    return u;
  }
  if (ep.reuse_safe && client == 0) return nullptr;
  for (size_t k = ep.idle.size(); k-- > 0;) {
    // reuse: safe compares the client first, in one array (no Http1ClientConnection read).
    if (ep.reuse_safe && ep.idle_clients[k] != client) continue;
    Http1ClientConnection* u = ep.idle[k];
    if (addr >= 0 && u->addr_used() != addr) continue;
    ep.unpool(k);
    if (u->closing()) continue;
    u->leave_pool();
    return u;
  }
  return nullptr;
}

UpstreamStream* open_http1_stream(ConnectionHost* w, EndpointPool* ep, int addr, const std::shared_ptr<TlsClientContext>& tls,
                                  UpstreamStream::Receiver* r, bool head_request, Millis connect_timeout,
                                  UpstreamHandover* handover, bool http1_only) {
  // An idle connection to the address, else a new one. One made under other
  // TLS settings (before a reload) is never reused.
  while (Http1ClientConnection* pooled = Http1ClientConnection::take_idle(*ep, addr, r->client_connection())) {
    if (pooled->tls_context() != tls.get()) {
      pooled->detach_and_close();
      continue;
    }
    pooled->attach(r, head_request);
    return pooled;
  }
  auto* u = new Http1ClientConnection(w, ep, addr, handover);
  u->use_tls(tls);  // nullptr: cleartext
  if (http1_only) u->offer_http1_only();
  u->attach(r, head_request);
  u->connect(connect_timeout);
  return u;
}

}  // namespace onelayer
