// A transparent listener's side of Http1ServerConnection (http1_server_connection.h): the original
// destination read at accept, the loop guard, protocol detection from the
// first bytes, and the hand-over to a passthrough tunnel.
#include <spdlog/spdlog.h>

#include "core/transparent/first_bytes.h"
#include "shell/http1/http1_server_connection.h"
#include "shell/transparent/original_destination.h"
#include "shell/transparent/passthrough.h"
#include "shell/transparent/transparent_conn.h"
#include "shell/transparent/transparent_host.h"

namespace onelayer {

// The worker that runs this thread's connections.
static TransparentHost& transparent_host() { return *TransparentHost::for_this_thread(); }

TransparentConn* Http1ServerConnection::transparent_state() const {
  return transparent_ ? transparent_host().transparent_state(this) : nullptr;
}

const Destination* Http1ServerConnection::original_destination() const {
  TransparentConn* t = transparent_state();
  return t ? &t->dst : nullptr;
}

int Http1ServerConnection::start_transparent() {
  const GenerationPtr& g = transparent_host().generation();
  int li = g->listener_index(listener_name());
  if (li < 0) return 0;
  const Listener& l = g->config->listeners[static_cast<size_t>(li)];
  if (l.mode != ListenerMode::transparent) return 0;
  TransparentCounters& counters = transparent_host().transparent_counters();
  Destination dst, local;
  int rc = read_original_destination(&tcp_, &dst);
  if (rc != 0) {
    spdlog::warn("listener {}: connection from {} has no original destination ({}): refused", l.name, peer_ip_,
                 uv_strerror(rc));
    counters.refused(l.name, "no_original_destination");
    close_handles(true);
    return -1;
  }
  // The loop guard: a connection made to the listener itself (not
  // redirected, or redirected back to it) has nowhere else to go.
  if (read_local_address(&tcp_, &local) && local == dst) {
    spdlog::warn("listener {}: connection from {} to {} is to the listener itself: refused (loop guard)", l.name,
                 peer_ip_, dst.to_string());
    counters.refused(l.name, "loop");
    close_handles(true);
    return -1;
  }
  TransparentConn& t = transparent_host().add_transparent(this);
  transparent_ = true;
  t.dst = dst;
  t.idle_ms = static_cast<uint64_t>(l.limits.idle_timeout.count());
  arm_timer(static_cast<uint64_t>(l.detect_timeout.count()), on_detect_timeout);
  return 1;
}

void Http1ServerConnection::detect_first_bytes(const char* data, size_t len) {
  std::string joined;
  std::string_view seen(data, len);
  if (pending_in_ && !pending_in_->empty()) {
    joined = *pending_in_;
    joined.append(data, len);
    seen = joined;
  }
  FirstBytes kind = classify_first_bytes(seen);
  if (kind == FirstBytes::need_more) {
    buffer_pipelined(data, len);
    return;
  }
  if (kind == FirstBytes::http1 || kind == FirstBytes::h2c) {
    transparent_state()->detecting = false;
    arm_header_timer();
    take_first_bytes(data, len);  // joins what waits in pending_in_
    return;
  }
  buffer_pipelined(data, len);
  start_passthrough(passthrough_reason(kind));
}

void Http1ServerConnection::on_detect_timeout(TimerList::Entry* t) {
  auto* d = Conn::of<Http1ServerConnection>(t);
  if (!d->detecting_protocol()) return;
  // No byte: the app waits for the server to speak first. Some bytes but
  // not enough to tell: not HTTP as far as onelayer can see.
  d->start_passthrough(d->pending_in_ && !d->pending_in_->empty() ? "unknown" : "server_first");
}

void Http1ServerConnection::start_passthrough(const char* reason) {
  TransparentConn& t = *transparent_state();
  t.detecting = false;
  protocol_known_ = true;
  disarm_timer();  // the tunnel keeps its own idle timer
  transparent_host().transparent_counters().passthrough(listener_name(), reason);
  spdlog::debug("listener {}: {} from {} passes through to {}", listener_name(), reason, peer_ip_,
                t.dst.to_string());
  std::string early;
  take_pending_input(early);
  pending_in_.reset();
  t.tunnel = std::make_unique<Passthrough>(this, host(), t.dst, t.idle_ms);
  t.tunnel->start(std::move(early), eof_);
}

bool Http1ServerConnection::detecting_protocol() const {
  TransparentConn* t = transparent_state();
  return t && t->detecting;
}

bool Http1ServerConnection::passing_through() const {
  TransparentConn* t = transparent_state();
  return t && t->tunnel;
}

void Http1ServerConnection::pass_through(ssize_t nread, const uv_buf_t* buf) {
  if (nread > 0) account_in(static_cast<size_t>(nread));
  transparent_state()->tunnel->from_client(nread, buf);
}

void Http1ServerConnection::passthrough_drained() { transparent_state()->tunnel->client_drained(); }

}  // namespace onelayer
