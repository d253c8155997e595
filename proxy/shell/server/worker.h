// One event loop thread: its own listeners (SO_REUSEPORT sockets handed in by
// the server), downstream connections, and per-endpoint upstream pools.
#pragma once

#include <uv.h>

#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/base/clock.h"
#include "core/transparent/destination_table.h"
#include "shell/io/conn.h"
#include "shell/io/deferred_writer.h"
#include "shell/memory/h2_memory_pool.h"
#include "shell/http1/http_parser_pool.h"
#include "shell/server/parked_connections.h"
#include "shell/proxy/runtime.h"
#include "shell/io/timer_list.h"
#include "shell/tls/tls_channel.h"
#include "shell/proxy/upstream_stream_factory.h"
#include "shell/server/worker_listener.h"

namespace onelayer {

class Conn;
class Http1ServerConnection;
class Exchange;
class Http1ClientConnection;
struct EndpointState;
struct TransparentConn;

struct ListenSocket {
  std::string listener;  // listener name
  int fd = -1;
};

// A write that libuv could not complete at once: owns its bytes.
struct PendingWrite {
  uv_write_t req;
  std::string data;
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
  // The worker's timers (connections, exchanges): one libuv timer for all.
  TimerList& timers() { return *timers_; }
  // Parsers lent to connections while a message is in progress.
  HttpParserPool& parsers() { return parsers_; }
  // Idle keep-alive connections held as their sockets alone.
  ParkedConnections& parked() { return *parked_; }
  // A parked socket became readable: a Http1ServerConnection again (counted already).
  void unpark(WorkerListener* l, int fd);
  // A parked socket was closed: its connection is gone.
  void parked_closed(WorkerListener* l);
  Runtime& runtime() { return rt_; }
  const GenerationPtr& generation() {
    rt_.refresh(gen_);
    return gen_;
  }
  // `hp` (one of `u`'s endpoints) as this worker's EndpointState. `generation`:
  // the id of the generation whose config holds `u`; a repeated lookup of
  // the same endpoint within it skips building the key.
  EndpointState* endpoint(const HostPort& hp, const Upstream& u, uint64_t generation);
  // An original destination (an `original_destination` upstream's attempt)
  // as this worker's EndpointState, from a table bounded by
  // DestinationTable::kDefaultCap entries beyond those in use.
  EndpointState* destination_endpoint(const Destination& d, const Upstream& u);
  size_t destinations_held() const { return destinations_.size(); }
  // A transparent listener's connection's own state (null for others).
  TransparentConn* transparent_state(const Http1ServerConnection* d);
  TransparentConn& add_transparent(const Http1ServerConnection* d);
  void forget_transparent(const Http1ServerConnection* d);
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

  // Read callbacks of HTTP/2 connections run between enter_read() and
  // leave_read(). Inside them defer_write() queues `w` (true) for one
  // write_deferred() after the poll, and so it does for every writer but
  // the one writing during on_check's passes; elsewhere it returns false
  // and the caller writes at once. A writer going away calls forget_write().
  // What a poll queues is written after the poll that follows it, one that
  // returns at once: the bytes that reached the worker meanwhile (the rest
  // of a client's burst, responses on the other upstream connections) leave
  // in the same writes instead of one write each (docs/http2.md, "Writes").
  void enter_read() { ++reading_; }
  void leave_read() { --reading_; }
  bool defer_write(DeferredWriter* w);
  void forget_write(DeferredWriter* w);

  void down_closed(Http1ServerConnection* d);
  // Frees a finished exchange after the current callback chain (a check
  // handle runs after every poll): never inside one of its own callbacks.
  void retire(std::unique_ptr<Exchange> ex);
  void track(Http1ServerConnection* d);
  bool draining() const { return draining_; }
  std::string& scratch() { return scratch_; }
  // Where the exchanges' attempts get their upstream streams (null: real
  // connections, UpstreamCodecs).
  UpstreamStreamFactory* upstream_streams() const { return upstream_streams_; }
  void set_upstream_streams(UpstreamStreamFactory* f) { upstream_streams_ = f; }
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
  void link(Http1ServerConnection* d);  // into the list of connections (not counted)
  // After every poll: deferred writes, then retired exchanges; or, when
  // the poll queued writes and the one before did not, nothing yet (the
  // writes wait for one more poll, which does not block).
  void on_check();
  // Each writer queued now writes once; while writing_deferred_, what that
  // queues for another writer waits for the next pass.
  void write_deferred_writers();
  static constexpr int kDeferredWritePasses = 8;

  Runtime& rt_;
  int index_;
  // Before everything that holds an HTTP/2 session (connections, upstream
  // pools, exchanges): destroyed after them, as they free into it.
  H2MemoryPool h2_memory_;
  uv_loop_t loop_;
  uv_async_t async_;
  uv_check_t reaper_;
  // Active exactly while writes are held past a poll: an active idle
  // handle makes the next poll return at once (timeout 0) instead of waiting.
  uv_idle_t second_poll_;
  std::optional<TimerList> timers_;  // made once loop_ is initialised
  HttpParserPool parsers_;
  std::optional<ParkedConnections> parked_;  // after timers_: its records hold entries
  std::vector<std::unique_ptr<Exchange>> retired_;
  std::vector<DeferredWriter*> deferred_writes_;
  std::vector<DeferredWriter*> writing_now_;  // deferred_writes_ being written (reused)
  int reading_ = 0;
  bool writing_deferred_ = false;          // inside on_check's passes
  DeferredWriter* writing_turn_ = nullptr;  // the writer whose write_deferred() runs
  std::thread thread_;
  GenerationPtr gen_;
  std::unique_ptr<char[]> read_buf_;
  // Multi-part writes up to this size are copied together and leave as one
  // send(2); past it, the copy would cost more than sendmsg(2) saves.
  static constexpr size_t kGatherSize = 2048;
  std::unique_ptr<char[]> gather_buf_{new char[kGatherSize]};
  std::string scratch_;
  UpstreamStreamFactory* upstream_streams_ = nullptr;
  std::string tls_out_;  // ciphertext on its way to write_raw
  DefaultRandom random_;

  std::mutex mu_;
  std::vector<std::function<void()>> inbox_;

  std::vector<WorkerListener*> listeners_;
  Http1ServerConnection* conns_ = nullptr;  // intrusive list (Http1ServerConnection::Link)
  size_t conn_count_ = 0;
  std::vector<Http1ServerConnection*> connections() const;
  std::unordered_map<std::string, std::unique_ptr<EndpointState>> endpoints_;
  DestinationTable<std::unique_ptr<EndpointState>> destinations_;
  std::vector<std::unique_ptr<EndpointState>> evicted_destinations_;  // until their connections have closed
  std::unordered_map<const Http1ServerConnection*, std::unique_ptr<TransparentConn>> transparent_conns_;
  std::string endpoint_key_;  // Worker::endpoint's lookup key, reused
  // The last endpoint() answer. Within one generation a HostPort's address
  // names one endpoint of one upstream (another config may reuse the address).
  struct EndpointMemo {
    uint64_t generation = 0;
    const HostPort* hp = nullptr;
    EndpointState* ep = nullptr;
  };
  EndpointMemo endpoint_memo_;
  bool draining_ = false;
  bool stopped_ = false;
};

template <class C>
void Conn::tls_pump(C* c) {
  TlsChannel& t = *c->tls();
  Worker* w = c->worker();
  if (!t.handshake_done()) {
    TlsChannel::Status st = t.handshake();
    if (w->flush_tls(c) < 0 && st == TlsChannel::Status::want_more) st = TlsChannel::Status::error;
    if (st == TlsChannel::Status::want_more) return;
    c->on_tls_handshake(st == TlsChannel::Status::ok);
    if (st != TlsChannel::Status::ok || c->closing() || !c->tls()) return;
  }
  char* plain = w->read_buffer();
  while (!c->closing() && c->tls()) {
    TlsChannel::Status st;
    size_t n = t.read(plain, Worker::kReadBufferSize, &st);
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
