// One event loop thread: its own listeners (SO_REUSEPORT sockets handed in by
// the server), downstream connections, and per-endpoint upstream pools.
#pragma once

#include <uv.h>

#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "shell/runtime.h"
#include "shell/tls_channel.h"

namespace onelayer {

class DownConn;
class Exchange;
class UpConn;
struct EndpointState;
class Worker;

struct ListenSocket {
  std::string listener;  // listener name
  int fd = -1;
};

struct WorkerListener {
  Worker* worker = nullptr;
  std::string name;
  uv_tcp_t tcp;
  uint32_t connections = 0;
  bool closing = false;
  RouteMetrics* unrouted = nullptr;  // requests answered before a route matched
};

// A write that libuv could not complete at once: owns its bytes.
struct PendingWrite {
  uv_write_t req;
  std::string data;
};

// Base of both connection kinds: a TCP handle plus one timer, freed once
// both handles are closed (never from inside one of its own callbacks).
class Conn {
 public:
  explicit Conn(Worker* w);
  virtual ~Conn() = default;
  virtual void on_write_done(int status) = 0;
  // Closes both handles; `reset` sends the peer a TCP RST instead of a FIN
  // (a request that must not look complete to it).
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
    C* c = static_cast<C*>(s->data);
    uv_buf_t own;
    if (nread == UV_ENOBUFS) {
      nread = c->recv_now(&own);
      if (nread == 0) return;  // nothing there after all
      buf = &own;
    }
    // TLS HOOK (read): ciphertext goes to the channel, plaintext to on_read.
    if (c->tls_ && nread > 0) {
      c->tls_->feed(buf->base, static_cast<size_t>(nread));
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
  // The connection's one timer: `cb` runs `ms` from now with &timer_ (whose
  // data is this connection), unless re-armed or disarmed first. Re-arming
  // is lazy: a deadline later than the one libuv holds (what nearly every
  // re-arm of a request's life is: header, attempt, stall guard, idle) only
  // records it, and the libuv timer, when it fires early, re-arms for the
  // rest. Only an earlier deadline touches libuv's timer heap.
  void arm_timer(uint64_t ms, uv_timer_cb cb);
  void disarm_timer() { timer_cb_ = nullptr; }
  bool closing() const { return closing_; }
  size_t write_queue() const { return tcp_.write_queue_size; }
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&tcp_); }

  Worker* worker_;
  std::unique_ptr<TlsChannel> tls_;  // TLS HOOK: set while the connection speaks TLS
  uv_tcp_t tcp_;
  uv_timer_t timer_;
  int closed_handles_ = 0;

 protected:
  bool closing_ = false;  // packed next to closed_handles_: every idle connection holds these

 private:
  static void on_timer(uv_timer_t* t);
  uv_timer_cb timer_cb_ = nullptr;
  uint64_t deadline_ = 0;  // uv_now() value at which timer_cb_ is due
};

class Worker {
 public:
  Worker(Runtime& rt, int index);
  ~Worker();

  void start(std::vector<ListenSocket> sockets);
  void join();

  // Thread-safe: queued to the worker's loop.
  void post_listeners(std::vector<ListenSocket> add, std::vector<std::string> remove);
  void post_drain();
  void post_force_close();

  // Called on the worker thread.
  uv_loop_t* loop() { return &loop_; }
  Runtime& runtime() { return rt_; }
  const GenerationPtr& generation() {
    rt_.refresh(gen_);
    return gen_;
  }
  EndpointState* endpoint(const HostPort& hp, const Upstream& u);
  char* read_buffer() { return read_buf_.get(); }
  static constexpr size_t kReadBufferSize = 64 * 1024;

  // Writes `parts` in order: tries a direct write first, queues the rest.
  // Returns 0 or a negative libuv error.
  int write(Conn* c, const uv_buf_t* parts, unsigned n);
  int write(Conn* c, std::string_view s) {
    uv_buf_t b = uv_buf_init(const_cast<char*>(s.data()), static_cast<unsigned>(s.size()));
    return write(c, &b, 1);
  }
  // Sends the ciphertext a connection's TLS channel has ready. 0 or a
  // negative libuv error.
  int flush_tls(Conn* c);

  void down_closed(DownConn* d);
  // Frees a finished exchange after the current callback chain (a check
  // handle runs after every poll): never inside one of its own callbacks.
  void retire(std::unique_ptr<Exchange> ex);
  void track(DownConn* d);
  bool draining() const { return draining_; }
  std::string& scratch() { return scratch_; }
  DefaultRandom& random() { return random_; }
  int index() const { return index_; }
  std::function<void()> on_stopped;  // called on the worker thread when its loop ends

 private:
  int write_raw(Conn* c, const uv_buf_t* parts, unsigned n);
  int write_tls(Conn* c, const uv_buf_t* parts, unsigned n);
  void run();
  void open_listener(const ListenSocket& s);
  void close_listener(WorkerListener* l);
  void on_async();
  void maybe_finish_drain();
  void close_everything();

  Runtime& rt_;
  int index_;
  uv_loop_t loop_;
  uv_async_t async_;
  uv_check_t reaper_;
  std::vector<std::unique_ptr<Exchange>> retired_;
  std::thread thread_;
  GenerationPtr gen_;
  std::unique_ptr<char[]> read_buf_;
  // Multi-part writes up to this size are copied together and leave as one
  // send(2); past it, the copy would cost more than sendmsg(2) saves.
  static constexpr size_t kGatherSize = 2048;
  std::unique_ptr<char[]> gather_buf_{new char[kGatherSize]};
  std::string scratch_;
  std::string tls_out_;  // ciphertext on its way to write_raw
  DefaultRandom random_;

  std::mutex mu_;
  std::vector<std::function<void()>> inbox_;

  std::vector<WorkerListener*> listeners_;
  DownConn* conns_ = nullptr;  // intrusive list (DownConn::prev_/next_)
  size_t conn_count_ = 0;
  std::vector<DownConn*> connections() const;
  std::unordered_map<std::string, std::unique_ptr<EndpointState>> endpoints_;
  std::string endpoint_key_;  // Worker::endpoint's lookup key, reused
  bool draining_ = false;
  bool stopped_ = false;

  friend class DownConn;
  friend class UpConn;
};

template <class C>
void Conn::tls_pump(C* c) {
  TlsChannel& t = *c->tls_;
  if (!t.handshake_done()) {
    TlsChannel::Status st = t.handshake();
    if (c->worker_->flush_tls(c) < 0 && st == TlsChannel::Status::want_more) st = TlsChannel::Status::error;
    if (st == TlsChannel::Status::want_more) return;
    c->on_tls_handshake(st == TlsChannel::Status::ok);
    if (st != TlsChannel::Status::ok || c->closing() || !c->tls_) return;
  }
  char* plain = c->worker_->read_buffer();
  while (!c->closing() && c->tls_) {
    TlsChannel::Status st;
    size_t n = t.read(plain, Worker::kReadBufferSize, &st);
    if (n > 0) {
      uv_buf_t b = uv_buf_init(plain, static_cast<unsigned>(n));
      c->on_read(static_cast<ssize_t>(n), &b);
      continue;
    }
    c->worker_->flush_tls(c);  // a read may have produced output (a key update's answer)
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
