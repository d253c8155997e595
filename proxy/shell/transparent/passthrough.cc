#include "shell/transparent/passthrough.h"

#include <spdlog/spdlog.h>

#include "shell/http1/http1_server_connection.h"
#include "shell/io/socket_address.h"
#include "shell/http1/http1_tunnel.h"

namespace onelayer {

// The destination side: a plain TCP connection, freed once its handle has
// closed; it tells its Passthrough (while there is one) what happens.
class Passthrough::Dest final : public Conn {
 public:
  Dest(ConnectionHost* host, Passthrough* owner) : Conn(host), owner_(owner) {
    connect_req_.data = this;
    shutdown_req_.data = this;
  }
  int connect(const sockaddr* sa) {
    connecting_ = true;
    return uv_tcp_connect(&connect_req_, &tcp_, sa, [](uv_connect_t* req, int status) {
      auto* d = static_cast<Dest*>(req->data);
      d->connecting_ = false;
      if (d->owner_) d->owner_->on_connected(status);
    });
  }
  void start_reading() { uv_read_start(stream(), Conn::no_read_buffer, Conn::on_readable<Dest>); }
  void stop_reading() { uv_read_stop(stream()); }
  void shutdown() {
    uv_shutdown(&shutdown_req_, stream(), [](uv_shutdown_t* req, int) {
      auto* d = static_cast<Dest*>(req->data);
      if (!d->owner_) return;
      d->owner_->dest_shut_ = true;
      d->owner_->maybe_done();
    });
  }
  void on_read(ssize_t nread, const uv_buf_t* buf) {
    if (owner_) owner_->from_dest(nread, buf);
  }
  void on_write_done(int status) override {
    if (owner_) owner_->dest_drained(status);
  }
  void on_closed() override {
    if (owner_) owner_->dest_closed();
  }
  // Conn::on_readable's TLS path (never taken: no TLS here).
  void on_tls_handshake(bool) {}
  void on_tls_error() {}

  Passthrough* owner_;

 private:
  uv_connect_t connect_req_;
  uv_shutdown_t shutdown_req_;
};

Passthrough::Passthrough(Http1ServerConnection* client, ConnectionHost* host, const Destination& dst, uint64_t idle_ms)
    : client_(client), host_(host), dst_(dst), idle_ms_(idle_ms) {
  client_shutdown_.data = this;
}

Passthrough::~Passthrough() {
  if (!dest_) return;
  dest_->owner_ = nullptr;
  dest_->close_handles();
}

void Passthrough::start(std::string early, bool client_eof) {
  early_ = std::move(early);
  client_eof_ = client_eof;
  client_->hold_reading();
  dest_ = new Dest(host_, this);
  sockaddr_storage ss{};
  int rc = ip_literal_address(dst_.ip(), dst_.port, &ss) ? dest_->connect(reinterpret_cast<const sockaddr*>(&ss))
                                                           : UV_EINVAL;
  if (rc != 0) {
    spdlog::info("listener {}: passthrough to {}: {}", client_->listener_name(), dst_.to_string(),
                 uv_strerror(rc));
    end("connect");
    return;
  }
  rearm_idle();  // also bounds the connect
}

void Passthrough::rearm_idle() {
  if (!dest_) return;
  dest_->arm_timer(idle_ms_, [](TimerList::Entry* t) {
    Dest* d = Conn::of<Dest>(t);
    if (d->owner_) d->owner_->end("idle");
  });
}

void Passthrough::on_connected(int status) {
  if (status != 0) {
    spdlog::info("listener {}: passthrough to {}: {}", client_->listener_name(), dst_.to_string(),
                 uv_strerror(status));
    end("connect");
    return;
  }
  connected_ = true;
  dest_->start_reading();
  if (!early_.empty()) {
    std::string early;
    early.swap(early_);
    if (tunnel_write(dest_, early.data(), early.size()) == TunnelWrite::failed) {
      end("dest_write");
      return;
    }
  }
  if (client_eof_) {
    dest_->shutdown();
    return;
  }
  client_->release_reading();
}

void Passthrough::from_client(ssize_t nread, const uv_buf_t* buf) {
  if (nread == 0 || !dest_) return;
  if (nread == UV_EOF) {
    client_eof_ = true;
    client_->hold_reading();
    dest_->shutdown();  // after what is queued for it
    return;
  }
  if (nread < 0) {
    end("client_reset");
    return;
  }
  TunnelWrite r = tunnel_write(dest_, buf->base, static_cast<size_t>(nread));
  if (r == TunnelWrite::failed) {
    end("dest_write");
    return;
  }
  if (r == TunnelWrite::full) client_->hold_reading();
  rearm_idle();
}

void Passthrough::from_dest(ssize_t nread, const uv_buf_t* buf) {
  if (nread == 0) return;
  if (nread == UV_EOF) {
    dest_eof_ = true;
    dest_->stop_reading();
    uv_shutdown(&client_shutdown_, client_->stream(), [](uv_shutdown_t* req, int) {
      auto* p = static_cast<Passthrough*>(req->data);
      p->client_shut_ = true;
      p->maybe_done();
    });
    return;
  }
  if (nread < 0) {
    end("dest_reset");
    return;
  }
  TunnelWrite r = tunnel_write(client_, buf->base, static_cast<size_t>(nread));
  if (r == TunnelWrite::failed) {
    end("client_write");
    return;
  }
  if (r == TunnelWrite::full) {
    dest_->stop_reading();
    dest_paused_ = true;
  }
  rearm_idle();
}

void Passthrough::client_drained() {
  if (dest_paused_ && dest_ && client_->write_queue() <= kTunnelLowWater) {
    dest_paused_ = false;
    dest_->start_reading();
  }
}

void Passthrough::dest_drained(int status) {
  if (status < 0) {
    if (status != UV_ECANCELED) end("dest_write");
    return;
  }
  if (connected_ && !client_eof_ && dest_ && dest_->write_queue() <= kTunnelLowWater) client_->release_reading();
}

void Passthrough::maybe_done() {
  if (client_shut_ && dest_shut_) end(nullptr);
}

void Passthrough::dest_closed() {
  dest_ = nullptr;
  end(nullptr);
}

// Closes the client (which frees this, and so closes the destination side).
void Passthrough::end(const char* why) {
  if (why) spdlog::debug("listener {}: passthrough to {} ended: {}", client_->listener_name(), dst_.to_string(), why);
  client_->close_handles(why != nullptr && std::string_view(why) != "idle");
}

}  // namespace onelayer
