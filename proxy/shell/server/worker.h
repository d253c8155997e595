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

#include "core/base/default_random.h"
#include "core/transparent/destination_table.h"
#include "shell/io/conn.h"
#include "shell/io/connection_host.h"
#include "shell/memory/h2_memory_pool.h"
#include "shell/http1/http1_server_host.h"
#include "shell/http1/http_parser_pool.h"
#include "shell/server/parked_connections.h"
#include "shell/proxy/proxy_exchange_starter.h"
#include "shell/proxy/proxy_host.h"
#include "shell/proxy/runtime.h"
#include "shell/tls/tls_channel.h"
#include "shell/transparent/transparent_host.h"
#include "shell/proxy/upstream_stream_factory.h"
#include "shell/server/worker_listener.h"

namespace onelayer {

class Conn;
class Http1ServerConnection;
class Exchange;
class Http1ClientConnection;
struct EndpointState;

struct ListenSocket {
  std::string listener;  // listener name
  int fd = -1;
};

// The I/O its connections need (loop, timers, writes) is its ConnectionHost
// base; what its exchanges need beyond that (endpoints, random generator,
// runtime, upstream stream factory) its ProxyHost base; the state of its
// transparent listeners' connections its TransparentHost base; what the
// server codecs need besides I/O its Http1ServerHost base (over
// ConnectionHost); the rest (config generations, listeners) is its own.
class Worker final : public Http1ServerHost, public ProxyHost, public TransparentHost {
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
  // Parsers lent to connections while a message is in progress.
  HttpParserPool& parsers() override { return parsers_; }
  // Idle keep-alive connections held as their sockets alone.
  ParkedConnections& parked() { return *parked_; }
  // A parked socket became readable: a Http1ServerConnection again (counted already).
  void unpark(WorkerListener* l, int fd);
  // A parked socket was closed: its connection is gone.
  void parked_closed(WorkerListener* l);
  const GenerationPtr& generation() override {
    rt_.refresh(gen_);
    return gen_;
  }
  // ProxyHost. A repeated lookup of the same endpoint within a generation
  // skips building the key. Original destinations come from a table
  // bounded by DestinationTable::kDefaultCap entries beyond those in use.
  EndpointState* endpoint(const HostPort& hp, const Upstream& u, uint64_t generation) override;
  EndpointState* destination_endpoint(const Destination& d, const Upstream& u) override;
  size_t destinations_held() const { return destinations_.size(); }
  // The connection's transparent state goes (TransparentHost's).
  void forget_transparent(const Http1ServerConnection* d) override { TransparentHost::forget_transparent(d); }
  void down_closed(Http1ServerConnection* d) override;
  // Frees a finished exchange after the current callback chain (a check
  // handle runs after every poll): never inside one of its own callbacks.
  void retire(std::unique_ptr<RequestExchange> ex) override;
  // The rest of Http1ServerHost (and ServerCodecHost).
  ExchangeStarter& exchanges() override { return exchanges_; }
  bool logs_access(const std::string& listener) override { return generation()->logs_access(listener); }
  bool park(int fd, ServerListener* l, uint64_t idle_left_ms) override;
  const Listener* listener_config(const std::string& name) override;
  std::unique_ptr<TlsChannel> open_tls(const std::string& listener) override;
  size_t max_open_connections() override { return rt_.max_open_connections; }
  std::unique_ptr<ClientSocketCodec> take_over_h2c(ClientSocket* c, ServerListener* l) override;
  void track(Http1ServerConnection* d);
  int index() const { return index_; }
  std::function<void()> on_stopped;  // called on the worker thread when its loop ends

 private:
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
  static constexpr int kDeferredWritePasses = 8;

  Runtime& rt_;
  int index_;
  // Before everything that holds an HTTP/2 session (connections, upstream
  // pools, exchanges): destroyed after them, as they free into it.
  H2MemoryPool h2_memory_;
  uv_async_t async_;
  uv_check_t reaper_;
  // Active exactly while writes are held past a poll: an active idle
  // handle makes the next poll return at once (timeout 0) instead of waiting.
  uv_idle_t second_poll_;
  HttpParserPool parsers_;
  std::optional<ParkedConnections> parked_;  // its records hold entries of the base's timers_
  std::vector<std::unique_ptr<RequestExchange>> retired_;
  std::thread thread_;
  GenerationPtr gen_;
  DefaultRandom random_;  // ProxyHost::random()
  ProxyExchangeStarter exchanges_{this, rt_, gen_, random_};

  std::mutex mu_;
  std::vector<std::function<void()>> inbox_;

  std::vector<WorkerListener*> listeners_;
  Http1ServerConnection* conns_ = nullptr;  // intrusive list (Http1ServerConnection::Link)
  size_t conn_count_ = 0;
  std::vector<Http1ServerConnection*> connections() const;
  std::unordered_map<std::string, std::unique_ptr<EndpointState>> endpoints_;
  DestinationTable<std::unique_ptr<EndpointState>> destinations_;
  std::vector<std::unique_ptr<EndpointState>> evicted_destinations_;  // until their connections have closed
  std::string endpoint_key_;  // Worker::endpoint's lookup key, reused
  // The last endpoint() answer. Within one generation a HostPort's address
  // names one endpoint of one upstream (another config may reuse the address).
  struct EndpointMemo {
    uint64_t generation = 0;
    const HostPort* hp = nullptr;
    EndpointState* ep = nullptr;
  };
  EndpointMemo endpoint_memo_;
  bool stopped_ = false;
};

inline Worker* Conn::worker() const { return static_cast<Worker*>(host_); }

}  // namespace onelayer
