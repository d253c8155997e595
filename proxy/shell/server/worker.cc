#include "shell/server/worker.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "shell/io/conn.h"
#include "shell/http1/http1_server_connection.h"
#include "shell/proxy/endpoint_state.h"
#include "shell/proxy/exchange.h"
#include "shell/http2/h2_client_connection.h"
#include "shell/http2/h2_server_connection.h"
#include "shell/io/logging.h"
#include "shell/http1/http1_client_connection.h"
#include "shell/io/socket_address.h"

namespace onelayer {

Worker::Worker(Runtime& rt, int index)
    : Http1ServerHost(rt.metrics), ProxyHost(*this, rt, random_), TransparentHost(rt.transparent), rt_(rt),
      index_(index) {
  loop_.data = this;
  uv_async_init(&loop_, &async_, [](uv_async_t* a) { static_cast<Worker*>(a->data)->on_async(); });
  async_.data = this;
  uv_check_init(&loop_, &reaper_);
  reaper_.data = this;
  uv_check_start(&reaper_, [](uv_check_t* c) { static_cast<Worker*>(c->data)->on_check(); });
  uv_unref(reinterpret_cast<uv_handle_t*>(&reaper_));
  uv_idle_init(&loop_, &second_poll_);
  uv_unref(reinterpret_cast<uv_handle_t*>(&second_poll_));
  parked_.emplace(this);
}

Worker::~Worker() {
  if (thread_.joinable()) thread_.join();
  retired_.clear();
  for (WorkerListener* l : listeners_) delete l;
  int rc = uv_loop_close(&loop_);
  if (rc != 0) spdlog::warn("worker {}: loop closed with open handles ({})", index_, uv_strerror(rc));
}

void Worker::start(std::vector<ListenSocket> sockets) {
  for (const ListenSocket& s : sockets) open_listener(s);
  thread_ = std::thread([this] { run(); });
}

void Worker::join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::run() {
  batch_access_log();
  H2MemoryPool::set_for_this_thread(&h2_memory_);
  TransparentHost::set_for_this_thread(this);
  uv_run(&loop_, UV_RUN_DEFAULT);
  TransparentHost::set_for_this_thread(nullptr);
  H2MemoryPool::set_for_this_thread(nullptr);
  hand_over_access_log();
  spdlog::debug("worker {} stopped", index_);
  if (on_stopped) on_stopped();
}

void Worker::post_listeners(std::vector<ListenSocket> add, std::vector<std::string> remove) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.push_back([this, add = std::move(add), remove = std::move(remove)] {
      for (const std::string& name : remove) {
        for (WorkerListener* l : listeners_)
          if (l->name() == name && l->listening()) close_listener(l);
      }
      for (const ListenSocket& s : add) open_listener(s);
    });
  }
  uv_async_send(&async_);
}

void Worker::post_drain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.push_back([this] {
      draining_ = true;
      for (WorkerListener* l : listeners_)
        if (l->listening()) close_listener(l);
      // Copy: drain() may close connections and unlink them.
      for (Http1ServerConnection* d : connections()) d->drain();
      parked_->close_all();  // idle: closed as drain closes idle connections
      maybe_finish_drain();
    });
  }
  uv_async_send(&async_);
}

void Worker::post_force_close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.push_back([this] {
      draining_ = true;
      for (WorkerListener* l : listeners_)
        if (l->listening()) close_listener(l);
      for (Http1ServerConnection* d : connections()) d->abort_connection("drain_timeout");
      parked_->close_all();
      close_everything();
    });
  }
  uv_async_send(&async_);
}

void Worker::on_async() {
  std::vector<std::function<void()>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs.swap(inbox_);
  }
  for (auto& j : jobs) j();
}

void Worker::maybe_finish_drain() {
  if (draining_ && conn_count_ == 0) close_everything();
}

void Worker::close_everything() {
  if (stopped_) return;
  stopped_ = true;
  auto close_pool = [](EndpointState* ep) {
    std::vector<Http1ClientConnection*> idle = ep->idle;
    for (Http1ClientConnection* u : idle) u->detach_and_close();
    ep->idle.clear();
    ep->idle_clients.clear();
    for (H2ClientConnection* c : std::vector<H2ClientConnection*>(ep->h2)) c->close_for_shutdown();
  };
  for (auto& [key, ep] : endpoints_) close_pool(ep.get());
  destinations_.for_each([&](std::unique_ptr<EndpointState>& ep) { close_pool(ep.get()); });
  uv_check_stop(&reaper_);
  uv_close(reinterpret_cast<uv_handle_t*>(&reaper_), nullptr);
  uv_idle_stop(&second_poll_);
  uv_close(reinterpret_cast<uv_handle_t*>(&second_poll_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr);
  parked_->close();
  timers_->close();
}

static void on_connection(uv_stream_t* server, int status) {
  WorkerListener* l = WorkerListener::of(server);
  Worker* w = l->worker();
  if (status < 0) {
    spdlog::warn("listener {}: accept error: {}", l->name(), uv_strerror(status));
    return;
  }
  Http1ServerConnection* d = new Http1ServerConnection(w, l);
  if (uv_accept(server, d->stream()) != 0) {
    d->close_handles();
    return;
  }
  w->track(d);
  d->start();
}

void Worker::track(Http1ServerConnection* d) {
  link(d);
  static_cast<WorkerListener*>(d->listener())->connection_opened();
  rt_.metrics.downstream_connections_active.fetch_add(1, std::memory_order_relaxed);
  rt_.metrics.downstream_connections_total.fetch_add(1, std::memory_order_relaxed);
}

void Worker::unpark(WorkerListener* l, int fd) {
  Http1ServerConnection* d = new Http1ServerConnection(this, l);
  if (uv_tcp_open(reinterpret_cast<uv_tcp_t*>(d->stream()), fd) != 0) {
    ::close(fd);
    d->close_handles();
    parked_closed(l);
    return;
  }
  link(d);
  d->resume_after_park();
}

void Worker::link(Http1ServerConnection* d) {
  Http1ServerConnection::Link& link = d->worker_link();
  link.next = conns_;
  if (conns_) conns_->worker_link().prev = d;
  conns_ = d;
  d->set_tracked(true);
  ++conn_count_;
}

void Worker::parked_closed(WorkerListener* l) {
  l->connection_closed();  // may free a closed listener
  rt_.metrics.downstream_connections_active.fetch_sub(1, std::memory_order_relaxed);
}

void Worker::on_check() {
  // Writes this poll queued wait for one more poll, which returns at once
  // (the idle handle): a client's requests and the upstream's responses
  // that arrive in pieces leave in fewer, fuller writes, and each write
  // spares the peer a read and a wakeup. Never twice in a row, so nothing
  // waits longer than that one poll.
  const bool held = uv_is_active(reinterpret_cast<uv_handle_t*>(&second_poll_));
  if (!held && !deferred_writes_.empty()) {
    uv_idle_start(&second_poll_, [](uv_idle_t*) {});
    return;
  }
  if (held) uv_idle_stop(&second_poll_);
  // Writing one connection can give another bytes to send: a frame that
  // ends a client's stream ends its exchange, whose upstream stream's slot
  // opens a request that waited; a WINDOW_UPDATE lets a body go on. Those
  // writes are queued too and written in the next pass, once per
  // connection, as are the ones that freeing the finished exchanges makes.
  writing_deferred_ = true;
  for (int pass = 0; pass < kDeferredWritePasses; ++pass) {
    if (deferred_writes_.empty()) {
      if (retired_.empty()) break;
      retired_.clear();
      continue;
    }
    write_deferred_writers();
  }
  writing_deferred_ = false;
  // Still more after the last pass (bodies flowing back and forth): written
  // now, each write at once as before, so nothing waits for the next poll.
  write_deferred_writers();
  retired_.clear();
  hand_over_access_log();  // this iteration's lines, in one locked write
}

void Worker::retire(std::unique_ptr<RequestExchange> ex) {
  if (ex) retired_.push_back(std::move(ex));
}

bool Worker::park(int fd, ServerListener* l, uint64_t idle_left_ms) {
  return parked_->park(fd, static_cast<WorkerListener*>(l), idle_left_ms);  // every listener is the worker's
}

const Listener* Worker::listener_config(const std::string& name) {
  const GenerationPtr& g = generation();
  const int i = g->listener_index(name);
  return i < 0 ? nullptr : &g->config->listeners[static_cast<size_t>(i)];
}

std::unique_ptr<TlsChannel> Worker::open_tls(const std::string& listener) {
  const GenerationPtr& g = generation();
  const int i = g->listener_index(listener);
  if (i < 0 || !g->tls.listeners[static_cast<size_t>(i)]) return nullptr;
  return g->tls.listeners[static_cast<size_t>(i)]->open();
}

std::unique_ptr<ClientSocketCodec> Worker::take_over_h2c(ClientSocket* c, ServerListener* l) {
  const GenerationPtr& g = generation();
  return std::make_unique<H2ServerConnection>(c, this, l, listener_config(l->name()),
                                              g->config->headers.request_timeout_ms);
}

void Worker::down_closed(Http1ServerConnection* d) {
  Http1ServerConnection::Link& link = d->worker_link();
  if (d->tracked()) {
    if (link.prev) link.prev->worker_link().next = link.next; else conns_ = link.next;
    if (link.next) link.next->worker_link().prev = link.prev;
    link = Http1ServerConnection::Link{};
    d->set_tracked(false);
    --conn_count_;
    // A parked connection lives on as its socket (counted until it closes).
    if (!d->parked()) parked_closed(static_cast<WorkerListener*>(d->listener()));
  }
  maybe_finish_drain();
}

void Worker::open_listener(const ListenSocket& s) {
  int rc = 0;
  WorkerListener* l = WorkerListener::open(this, &loop_, s.listener, s.fd, on_connection, &rc);
  if (l == nullptr) {
    spdlog::error("worker {}: listener {} failed: {}", index_, s.listener, uv_strerror(rc));
    return;
  }
  listeners_.push_back(l);
}

// Connections keep their listener's pointer: it frees itself once closed and
// without connections.
void Worker::close_listener(WorkerListener* l) {
  for (auto it = listeners_.begin(); it != listeners_.end(); ++it) {
    if (*it == l) {
      listeners_.erase(it);
      break;
    }
  }
  l->close();
}

std::vector<Http1ServerConnection*> Worker::connections() const {
  // A copy: drain() and abort_connection() unlink connections as they go.
  std::vector<Http1ServerConnection*> out;
  out.reserve(conn_count_);
  for (Http1ServerConnection* d = conns_; d; d = d->worker_link().next) out.push_back(d);
  return out;
}

EndpointState* Worker::destination_endpoint(const Destination& d, const Upstream& u) {
  std::string key = u.name;
  key += '|';
  key += d.to_string();
  std::unique_ptr<EndpointState>* found = destinations_.find(key);
  EndpointState* ep;
  if (found) {
    ep = found->get();
  } else {
    auto e = std::make_unique<EndpointState>();
    e->hp = HostPort{d.ip(), d.port};
    e->label = d.to_string();
    e->key = key;
    e->host = this;
    e->gai_req.data = e.get();
    sockaddr_storage ss{};
    e->literal = ip_literal_address(e->hp.host, d.port, &ss);
    e->addrs.push_back(ss);
    ep = e.get();
    // Evicted entries whose idle connections are closing wait here until
    // the last one is gone (each connection points at its entry).
    std::erase_if(evicted_destinations_, [](const std::unique_ptr<EndpointState>& s) { return s->connections == 0; });
    std::atomic<int64_t>& gauge = rt_.transparent.destinations;
    gauge.fetch_add(1, std::memory_order_relaxed);
    destinations_.insert(
        key, std::move(e),
        // In use: an exchange holds it, or a connection other than an idle
        // HTTP/1.1 one in its pool (those are closed on eviction).
        [](const std::unique_ptr<EndpointState>& s) {
          return s->holds > 0 || !s->h2.empty() || !s->waiting.empty() || s->connections > s->idle.size();
        },
        [&](std::unique_ptr<EndpointState>& s) {
          gauge.fetch_sub(1, std::memory_order_relaxed);
          std::vector<Http1ClientConnection*> idle = s->idle;
          for (Http1ClientConnection* u : idle) u->detach_and_close();
          s->idle.clear();
          if (s->connections > 0) evicted_destinations_.push_back(std::move(s));
        });
  }
  ep->max_idle = u.pool.max_idle;
  ep->idle_timeout = u.pool.idle_timeout;
  ep->max_concurrent_streams = u.pool.max_concurrent_streams;
  ep->max_requests_per_connection = u.pool.max_requests_per_connection;
  return ep;
}

EndpointState* Worker::endpoint(const HostPort& hp, const Upstream& u, uint64_t generation) {
  // The same endpoint as last time: its pool settings are u's already.
  if (endpoint_memo_.hp == &hp && endpoint_memo_.generation == generation) return endpoint_memo_.ep;
  // Looked up once per attempt: the key is built in a reused buffer.
  std::string& key = endpoint_key_;
  key.assign(u.name);
  key += '|';
  key += hp.host;
  key += ':';
  char port[8];
  key.append(port, static_cast<size_t>(std::to_chars(port, port + sizeof port, hp.port).ptr - port));
  auto it = endpoints_.find(key);
  EndpointState* ep;
  if (it == endpoints_.end()) {
    auto e = std::make_unique<EndpointState>();
    e->hp = hp;
    e->label = hp.to_string();
    e->key = key;
    e->host = this;
    e->gai_req.data = e.get();
    sockaddr_storage ss{};
    if (ip_literal_address(hp.host, hp.port, &ss)) {
      e->literal = true;
      e->addrs.push_back(ss);
    }
    ep = e.get();
    endpoints_.emplace(key, std::move(e));
  } else {
    ep = it->second.get();
  }
  ep->max_idle = u.pool.max_idle;
  ep->idle_timeout = u.pool.idle_timeout;
  ep->max_concurrent_streams = u.pool.max_concurrent_streams;
  ep->max_requests_per_connection = u.pool.max_requests_per_connection;
  ep->reuse_safe = u.reuse == ConnectionReuse::safe;
  endpoint_memo_ = EndpointMemo{generation, &hp, ep};
  return ep;
}

}  // namespace onelayer
