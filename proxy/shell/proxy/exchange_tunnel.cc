// The exchange's side of an Upgrade tunnel: after the upstream's 101, the
// downstream and upstream connections become one byte tunnel, with
// backpressure each way (reading one side stops while the other's write
// queue is above 256 KiB, as for bodies; tunnel_write, shell/http1), closed
// when either side closes or after the listener's idle_timeout without a
// byte either way. Counted with code 101 when it ends. Never retried: the
// 101 went downstream first.
#include <spdlog/spdlog.h>

#include "shell/http1/http1_client_connection.h"
#include "shell/http1/http1_server_connection.h"
#include "shell/http1/http1_tunnel.h"
#include "shell/proxy/exchange.h"

namespace onelayer {

Http1ClientConnection* Exchange::tunnel_upstream() const {
  return attempt_.stream ? attempt_.stream->http1_connection() : nullptr;
}

// Whether the upstream's Upgrade names a protocol the request asked for.
static bool switched_to_requested(std::string_view answered, std::string_view requested) {
  bool ok = false;
  for_each_list_element(answered, [&](std::string_view a) {
    std::string_view name = a.substr(0, a.find('/'));
    for_each_list_element(requested, [&](std::string_view r) { ok |= iequals(name, r.substr(0, r.find('/'))); });
  });
  return ok;
}

int Exchange::on_up_switching(MessageHead& head) {
  if (finished_) return -1;
  const Header* up = find_header(head.headers, "upgrade");
  if (!up || !switched_to_requested(up->value, upgrade_)) {
    Http1ClientConnection* u = tunnel_upstream();  // the 101 came on it
    spdlog::info("upstream {}: 101 to {} for an Upgrade to {}", u ? u->endpoint_label() : "?",
                 up ? up->value : "nothing", upgrade_);
    return -1;  // bad_upstream_response
  }
  stop_timer();
  end_attempt(UpstreamEndpoints::Result::success);
  status_ = 101;
  std::string out = "HTTP/1.1 101 Switching Protocols\r\n";
  append_rewritten_response_headers(head.headers, via_member(head), out);
  out += "Connection: Upgrade\r\nUpgrade: ";
  out += up->value;
  out += "\r\n\r\n";
  bytes_out_ += out.size();
  response_started_ = true;
  tunnel_ = true;
  Http1ServerConnection* down = down_->http1_connection();
  if (down->host()->write(down, out) < 0) return -1;
  return 0;
}

void Exchange::start_tunnel(const char* data, size_t len) {
  if (finished_) return;
  Http1ServerConnection* client = down_->http1_connection();
  client->enter_tunnel();
  arm_timer(lcfg_->limits.idle_timeout, on_tunnel_idle);
  if (len > 0) pass_tunnel_bytes(client, data, len, false);
  if (finished_) return;
  // Bytes the client sent after its request (it may not wait for the 101).
  std::string early;
  client->take_pending_input(early);
  if (!early.empty()) {
    pass_tunnel_bytes(tunnel_upstream(), early.data(), early.size(), true);
    if (finished_) return;
  }
  if (client->saw_eof()) {
    end_tunnel(nullptr);  // the client had closed its side already
    return;
  }
  client->release_reading();
}

void Exchange::pass_tunnel_bytes(Conn* to, const char* data, size_t len, bool from_down) {
  if (!to) return;
  if (from_down) {
    tunnel_bytes_in_ += len;  // the access log's bytes_in
  } else {
    bytes_out_ += len;
  }
  const TunnelWrite r = tunnel_write(to, data, len);
  if (r == TunnelWrite::failed) {
    end_tunnel(from_down ? "upstream_reset" : "client_reset");
    return;
  }
  arm_timer(lcfg_->limits.idle_timeout, on_tunnel_idle);  // lazy: progress costs no timer work
  if (r == TunnelWrite::ok) return;
  if (from_down) {
    down_->hold_request_body();
  } else if (attempt_.stream) {
    attempt_.stream->pause_response();
  }
}

void Exchange::on_tunnel_down(ssize_t nread, const uv_buf_t* buf) {
  if (finished_) return;
  if (nread < 0) {
    end_tunnel(nread == UV_EOF ? nullptr : "client_reset");
    return;
  }
  pass_tunnel_bytes(tunnel_upstream(), buf->base, static_cast<size_t>(nread), true);
}

void Exchange::on_tunnel_up(ssize_t nread, const uv_buf_t* buf) {
  if (finished_ || nread == 0) return;
  if (nread < 0) {
    end_tunnel(nread == UV_EOF ? nullptr : "upstream_reset");
    return;
  }
  pass_tunnel_bytes(down_->http1_connection(), buf->base, static_cast<size_t>(nread), false);
}

void Exchange::on_tunnel_idle(TimerList::Entry* e) {
  Exchange* ex = of(e);
  if (ex->finished_) return;
  spdlog::info("route {}: tunnel idle for {} ms, closing", ex->route_->name, ex->lcfg_->limits.idle_timeout.count());
  ex->end_tunnel("tunnel_idle");
}

// Either side closed (or idled): what is queued for the other still goes
// out, then both close.
void Exchange::end_tunnel(const char* error) {
  if (finished_) return;
  if (error) error_reason_ = error;
  if (Http1ClientConnection* u = tunnel_upstream()) {
    attempt_.stream = nullptr;
    u->close_when_flushed();
  }
  finish();
}

}  // namespace onelayer
