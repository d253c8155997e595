// Conn, the base of both connection kinds (client and upstream): one TCP
// handle and one entry in the worker's timer list, reads with recv(2) into
// the worker's buffer, and the close path (HandleWrap: freed once the TCP
// handle has closed).
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "shell/io/connection_host.h"
#include "shell/io/handle_wrap.h"
#include "shell/io/timer_list.h"
#include "shell/tls/tls_channel.h"

namespace onelayer {

class Worker;

// Base of both connection kinds: a TCP handle plus one timer (an entry in
// the worker's TimerList, 24 bytes where a uv_timer_t is 152: what an idle
// keep-alive connection holds matters), freed once the handle is closed
// (never from inside one of its own callbacks; see HandleWrap). The entry
// is a base so that a timer callback finds its connection exactly
// (Conn::of); it comes first so HandleWrap's two bytes share a word with
// connecting_.
class Conn : private TimerList::Entry, public HandleWrap<Conn> {
 public:
  explicit Conn(ConnectionHost* host);
  virtual ~Conn() = default;
  virtual void on_write_done(int status) = 0;
  // The handle has closed; the object is deleted next.
  virtual void on_closed() {}
  // The connection of its handle, as its own kind.
  template <class C = Conn, class H>
  static C* of(const H* handle) {
    return static_cast<C*>(owner_of(handle));
  }
  // The connection whose timer this is, as its own kind.
  template <class C = Conn>
  static C* of(TimerList::Entry* timer) {
    return static_cast<C*>(static_cast<Conn*>(timer));
  }
  using TimerCallback = TimerList::Entry::Callback;
  // Closes the handle and disarms the timer; `reset` sends the peer a TCP
  // RST instead of a FIN (a request that must not look complete to it).
  void close_handles(bool reset = false);
  // Reading, for both connection kinds: libuv's alloc callback hands it no
  // buffer, so libuv calls the read callback with UV_ENOBUFS instead of
  // calling read(2), and the connection reads the socket itself with recv(2)
  // (cheaper than read(2) per call, see tests/bench/syscall_cost.c) into the
  // worker's one read buffer. Everything kept past a read callback is
  // copied, so idle connections hold no buffer.
  static void no_read_buffer(uv_handle_t*, size_t, uv_buf_t* buf) { *buf = uv_buf_init(nullptr, 0); }
  template <class C>
  static void on_readable(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
    C* c = of<C>(s);
    uv_buf_t own;
    if (nread == UV_ENOBUFS) {
      nread = c->recv_now(&own);
      if (nread == 0) return;  // nothing there after all
      buf = &own;
    }
    // TLS: ciphertext goes to the channel, plaintext to on_read.
    if (c->tls() && nread > 0) {
      c->tls()->feed(buf->base, static_cast<size_t>(nread));
      tls_pump(c);
      return;
    }
    c->on_read(nread, buf);
  }
  // Drives a TLS connection after input: the handshake (C::on_tls_handshake
  // hears how it ended), then plaintext to C::on_read while the connection
  // reads; a close_notify reads as EOF, a TLS error goes to C::on_tls_error.
  // All the plaintext of what was fed is handed on, even when on_read
  // paused reading meanwhile: at most one socket read's worth (64 KiB), and
  // nothing would wake the connection for bytes already off the socket.
  template <class C>
  static void tls_pump(C* c);
  // What the socket holds, read into the worker's buffer: bytes, 0 for
  // nothing yet, UV_EOF or a libuv error, as libuv's read callback reports.
  ssize_t recv_now(uv_buf_t* buf);
  // The connection's one timer: `cb` runs `ms` from now with this
  // connection's entry (Conn::of gives the connection back), unless re-armed
  // or disarmed first. Re-arming later (header, idle) costs no heap or libuv
  // work (see TimerList).
  void arm_timer(uint64_t ms, TimerCallback cb);
  void disarm_timer();
  size_t write_queue() const { return tcp_.write_queue_size; }
  // A connect request is in flight: writes must queue behind it.
  bool connecting() const { return connecting_; }
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&tcp_); }
  // A second descriptor of this connection's socket (close-on-exec), for
  // a connection of another kind that takes the socket over: closing this
  // handle then closes only its own descriptor (libuv drops its epoll
  // entry first). -1 with errno set on failure.
  int duplicate_socket();

  // The loop thread the connection runs on.
  ConnectionHost* host() const { return host_; }
  // The same host as the Worker it is (in the proxy every host is one),
  // for the code that needs more of it than I/O; defined in
  // shell/server/worker.h.
  Worker* worker() const;
  // The connection's TLS channel while it speaks TLS, else nullptr.
  TlsChannel* tls() const { return tls_.get(); }

 protected:
  // First: it shares a word with HandleWrap's two bytes (every idle
  // connection holds these).
  bool connecting_ = false;
  ConnectionHost* host_;
  std::unique_ptr<TlsChannel> tls_;  // set while the connection speaks TLS
  uv_tcp_t tcp_;
};

template <class C>
void Conn::tls_pump(C* c) {
  TlsChannel& t = *c->tls();
  ConnectionHost* w = c->host();
  if (!t.handshake_done()) {
    TlsChannel::Status st = t.handshake();
    if (st != TlsChannel::Status::ok) {
      if (w->flush_tls(c) < 0 && st == TlsChannel::Status::want_more) st = TlsChannel::Status::error;
      if (st == TlsChannel::Status::want_more) return;
    }
    // Done: the connection hears it before the handshake's last flight
    // leaves, so what it writes at once (a client's first request) goes in
    // the same send as its Finished: one segment, one wake-up and one
    // read fewer for the server on every new connection. A channel handed
    // to another connection takes its pending bytes along (that one's
    // first write sends them).
    c->on_tls_handshake(st == TlsChannel::Status::ok);
    if (st != TlsChannel::Status::ok || c->closing() || !c->tls()) return;
    w->flush_tls(c);  // the flight, if nothing was written with it
  }
  char* plain = w->read_buffer();
  while (!c->closing() && c->tls()) {
    TlsChannel::Status st;
    size_t n = t.read(plain, ConnectionHost::kReadBufferSize, &st);
    if (n > 0) {
      uv_buf_t b = uv_buf_init(plain, static_cast<unsigned>(n));
      c->on_read(static_cast<ssize_t>(n), &b);
      continue;
    }
    w->flush_tls(c);  // a read may have produced output (a key update's answer)
    if (st == TlsChannel::Status::closed) {
      uv_buf_t b = uv_buf_init(nullptr, 0);
      c->on_read(UV_EOF, &b);
    } else if (st == TlsChannel::Status::error) {
      c->on_tls_error();
    }
    return;
  }
}


}  // namespace onelayer
