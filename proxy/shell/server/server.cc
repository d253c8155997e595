#include "shell/server/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <malloc.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>

#include "core/config/config_loader.h"
#include "core/config/units.h"
#include "shell/admin/admin_server.h"
#include "shell/fleet/fleet_sync.h"
#include "shell/health/health_checker.h"
#include "shell/io/logging.h"
#include "shell/proxy/runtime.h"
#include "shell/io/socket_address.h"
#include "shell/tls/cert_watcher.h"
#include "shell/tls/tls_contexts.h"
#include "shell/server/worker.h"

namespace onelayer {

namespace {

// Creates a bound, listening, non-blocking socket. port 0 binds an ephemeral
// port; `port` returns what was bound.
int make_listen_socket(const HostPort& hp, uint16_t& port, std::string& err) {
  sockaddr_storage ss{};
  err = resolve_address_blocking(hp.host, port, &ss);
  if (!err.empty()) return -1;
  const socklen_t len = address_length(ss);
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(fd, 1024) != 0) {
    err = "bind " + hp.to_string() + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen);
  port = address_port(bound);
  return fd;
}

class Server {
 public:
  explicit Server(const ServerOptions& o) : opts_(o) {}
  int run();

 private:
  bool bind_listener(const Listener& l, std::vector<std::vector<ListenSocket>>& per_worker, uint16_t& port);
  std::pair<bool, std::string> reload();
  // GET/POST/DELETE /fault on the admin listener (docs/storm.md).
  std::pair<int, std::string> fault_drill(std::string_view method, std::string_view query);
  void start_drain(const char* why);
  void write_ports_file();
  void worker_finished();

  ServerOptions opts_;
  Runtime rt_;
  uv_loop_t loop_;
  uv_signal_t sighup_, sigterm_, sigint_;
  uv_timer_t drain_timer_;
  uv_timer_t flush_timer_;
  uv_async_t worker_done_;
  std::atomic<int> workers_done_{0};
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<AdminServer> admin_;
  std::unique_ptr<HealthChecker> health_;
  std::unique_ptr<fleet::FleetSync> fleet_;  // the fleet budgets' Redis link, on this loop
  std::unique_ptr<CertWatcher> certs_;  // certificate rotation (docs/tls.md)
  std::map<std::string, std::string> bound_addr_;  // listener -> configured address
  std::map<std::string, uint16_t> bound_port_;
  bool draining_ = false;
  bool forced_ = false;
};

// Binds one socket per worker into `per_worker`; records nothing else, so a
// failed reload can close what it bound and leave the running state alone.
bool Server::bind_listener(const Listener& l, std::vector<std::vector<ListenSocket>>& per_worker, uint16_t& port) {
  port = l.listen.port;
  for (size_t w = 0; w < per_worker.size(); ++w) {
    std::string err;
    int fd = make_listen_socket(l.listen, port, err);
    if (fd < 0) {
      spdlog::error("listener {}: {}", l.name, err);
      for (auto& v : per_worker)
        for (auto& s : v)
          if (s.listener == l.name) ::close(s.fd);
      return false;
    }
    per_worker[w].push_back({l.name, fd});
  }
  spdlog::info("listener {} on {}:{} ({} worker socket{})", l.name, l.listen.host, port, per_worker.size(),
               per_worker.size() == 1 ? "" : "s");
  return true;
}

void Server::write_ports_file() {
  if (opts_.ports_file.empty()) return;
  std::string tmp = opts_.ports_file + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    for (auto& [name, port] : bound_port_) f << name << ' ' << port << '\n';
    f << "admin " << (admin_ ? admin_->port() : 0) << '\n';
  }
  std::rename(tmp.c_str(), opts_.ports_file.c_str());
}

std::pair<int, std::string> Server::fault_drill(std::string_view method, std::string_view query) {
  TimePoint now = Clock::now();
  auto describe = [](const FaultInjector::Drill& d, TimePoint at) {
    auto left = std::chrono::duration_cast<Millis>(d.until - at);
    return "upstream=" + d.upstream + " status=" + std::to_string(d.status) + " percent=" +
           fmt::format("{}", d.percent) + " left=" + format_duration(std::max(Millis{0}, left)) + "\n";
  };
  if (method == "DELETE") {
    size_t n = rt_.faults.stop_all();
    spdlog::warn("admin: fault drills ended ({} running)", n);
    return {200, "ended " + std::to_string(n) + " drill(s)\n"};
  }
  if (method == "GET") {
    std::string out;
    for (const FaultInjector::Drill& d : rt_.faults.drills(now)) out += describe(d, now);
    return {200, out.empty() ? "no drill running\n" : out};
  }
  std::string error;
  std::optional<FaultInjector::Drill> d = FaultInjector::parse_drill_query(query, &error);
  if (!d) return {400, error + "\nusage: POST /fault?upstream=NAME&status=503&for=30s[&percent=100]\n"};
  if (!rt_.current()->config->find_upstream(d->upstream)) return {404, "no upstream named " + d->upstream + "\n"};
  d->until = now + d->duration;
  std::string text = describe(*d, now);
  rt_.faults.start_drill(*d, now);
  spdlog::warn("admin: fault drill started: {}", text.substr(0, text.size() - 1));
  return {200, "drill started: " + text};
}

std::pair<bool, std::string> Server::reload() {
  if (draining_) return {false, "draining"};
  LoadResult lr = load_config_file(opts_.config_path);
  TlsContexts tls;
  if (lr.ok()) lr.errors = build_tls_contexts(*lr.config, tls);  // certificates load, or the reload fails
  AdminServer::Guard guard;
  if (lr.ok()) guard = admin_guard_for(*lr.config, lr.errors);
  if (!lr.errors.empty()) {
    rt_.metrics.config_reloads_error.fetch_add(1);
    for (const ConfigError& e : lr.errors) spdlog::error("reload rejected: {}", e.to_string());
    return {false, format_errors(lr.errors)};
  }
  const Config& next = *lr.config;
  GenerationPtr cur = rt_.current();
  if (next.workers != cur->config->workers)
    spdlog::warn("reload: workers changes from {} to {} take effect on restart only", cur->config->workers,
                 next.workers);
  std::vector<std::string> remove;
  std::vector<const Listener*> to_bind;
  for (const Listener& l : next.listeners) {
    auto it = bound_addr_.find(l.name);
    if (it != bound_addr_.end() && it->second == l.listen.to_string()) continue;
    if (it != bound_addr_.end()) remove.push_back(l.name);  // address changed: close, open anew
    to_bind.push_back(&l);
  }
  for (auto& [name, addr] : bound_addr_) {
    bool keep = false;
    for (const Listener& l : next.listeners) keep |= l.name == name;
    if (!keep) remove.push_back(name);
  }
  // Bind everything first; any failure closes what was bound and changes nothing.
  std::vector<std::vector<ListenSocket>> add(workers_.size());
  std::map<std::string, uint16_t> new_ports;
  for (const Listener* l : to_bind) {
    uint16_t port = 0;
    if (!bind_listener(*l, add, port)) {
      for (auto& v : add)
        for (auto& s : v) ::close(s.fd);
      rt_.metrics.config_reloads_error.fetch_add(1);
      spdlog::error("reload rejected: listener {} could not be bound to {}", l->name, l->listen.to_string());
      return {false, "listener " + l->name + " could not be bound to " + l->listen.to_string() + "\n"};
    }
    new_ports[l->name] = port;
  }
  for (const std::string& name : remove) {
    bound_addr_.erase(name);
    bound_port_.erase(name);
  }
  for (const Listener* l : to_bind) {
    bound_addr_[l->name] = l->listen.to_string();
    bound_port_[l->name] = new_ports[l->name];
  }
  rt_.install(lr.config, std::move(tls));
  if (fleet_) fleet_->configure(rt_.current());
  admin_->set_guard(std::move(guard));
  certs_->watch(*lr.config, rt_.current()->tls);
  for (size_t i = 0; i < workers_.size(); ++i) workers_[i]->post_listeners(add[i], remove);
  rt_.metrics.config_reloads_ok.fetch_add(1);
  write_ports_file();
  spdlog::info("config reloaded from {} (generation {})", opts_.config_path, rt_.current()->id);
  return {true, "reloaded\n"};
}

void Server::start_drain(const char* why) {
  if (draining_) return;
  draining_ = true;
  rt_.draining = true;
  spdlog::info("{}: draining (up to {} ms)", why, rt_.current()->config->drain_timeout.count());
  for (auto& w : workers_) w->post_drain();
  uv_timer_start(&drain_timer_, [](uv_timer_t* t) {
    auto* s = static_cast<Server*>(t->data);
    spdlog::warn("drain_timeout reached: closing what is still open");
    s->forced_ = true;
    for (auto& w : s->workers_) w->post_force_close();
  }, static_cast<uint64_t>(rt_.current()->config->drain_timeout.count()), 0);
}

void Server::worker_finished() {
  if (workers_done_.load() < static_cast<int>(workers_.size())) return;
  uv_timer_stop(&drain_timer_);
  uv_close(reinterpret_cast<uv_handle_t*>(&drain_timer_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&flush_timer_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&sighup_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&sigterm_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&sigint_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&worker_done_), nullptr);
  health_->close();
  fleet_->close();
  certs_->close();
  admin_->close(nullptr);
}

int Server::run() {
  LoadResult lr = load_config_file(opts_.config_path);
  TlsContexts tls;
  if (lr.ok()) lr.errors = build_tls_contexts(*lr.config, tls);
  AdminServer::Guard guard;
  if (lr.ok()) guard = admin_guard_for(*lr.config, lr.errors);
  if (!lr.errors.empty()) {
    for (const ConfigError& e : lr.errors) spdlog::error("{}", e.to_string());
    return 1;
  }
  ConfigPtr cfg = lr.config;
  rt_.install(cfg, std::move(tls));
  std::signal(SIGPIPE, SIG_IGN);

  size_t nworkers = cfg->workers;
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
    size_t soft = static_cast<size_t>(nofile.rlim_cur);
    size_t reserve = std::max<size_t>(32, soft / 8);
    rt_.max_open_connections = soft > reserve + 8 ? soft - reserve : 8;
    spdlog::info("descriptor limit {}: at most {} client and upstream connections", soft,
                 rt_.max_open_connections);
  }
  std::vector<std::vector<ListenSocket>> sockets(nworkers);
  for (const Listener& l : cfg->listeners) {
    uint16_t port = 0;
    if (!bind_listener(l, sockets, port)) return 1;
    bound_addr_[l.name] = l.listen.to_string();
    bound_port_[l.name] = port;
  }

  uv_loop_init(&loop_);
  admin_ = std::make_unique<AdminServer>(&loop_, AdminServer::Hooks{
      [this] { return rt_.ready.load() && !rt_.draining.load(); },
      [this] { return config_to_yaml(*rt_.current()->config); },
      [this] { return reload(); },
      [this] {
        auto now_ms = std::chrono::duration_cast<Millis>(Clock::now().time_since_epoch()).count();
        std::vector<GaugeSample> gauges = rt_.gauges();
        if (fleet_) {
          std::vector<GaugeSample> f = fleet_->gauges();
          gauges.insert(gauges.end(), std::make_move_iterator(f.begin()), std::make_move_iterator(f.end()));
        }
        return rt_.metrics.render_prometheus(now_ms, gauges);
      },
      [this](std::string_view method, std::string_view query) { return fault_drill(method, query); },
      [this] { return fleet_ ? fleet_->view() : std::string("fleet: starting\n"); }});
  admin_->set_guard(std::move(guard));
  int rc = admin_->listen(cfg->admin_listen);
  if (rc != 0) {
    spdlog::error("admin listener {}: {}", cfg->admin_listen.to_string(), uv_strerror(rc));
    for (auto& v : sockets)
      for (auto& s : v) ::close(s.fd);
    admin_.reset();
    uv_run(&loop_, UV_RUN_NOWAIT);
    uv_loop_close(&loop_);
    return 1;
  }
  spdlog::info("admin on {}:{}", cfg->admin_listen.host, admin_->port());

  uv_signal_init(&loop_, &sighup_);
  uv_signal_init(&loop_, &sigterm_);
  uv_signal_init(&loop_, &sigint_);
  sighup_.data = sigterm_.data = sigint_.data = this;
  uv_signal_start(&sighup_, [](uv_signal_t* s, int) { static_cast<Server*>(s->data)->reload(); }, SIGHUP);
  uv_signal_start(&sigterm_, [](uv_signal_t* s, int) { static_cast<Server*>(s->data)->start_drain("SIGTERM"); }, SIGTERM);
  uv_signal_start(&sigint_, [](uv_signal_t* s, int) { static_cast<Server*>(s->data)->start_drain("SIGINT"); }, SIGINT);
  uv_timer_init(&loop_, &drain_timer_);
  drain_timer_.data = this;
  uv_timer_init(&loop_, &flush_timer_);
  uv_timer_start(&flush_timer_, [](uv_timer_t*) {
    flush_access_log();
    // Hand memory freed after bursts back to the kernel, so the resident
    // size follows the connections actually open.
    static int ticks = 0;
    if (++ticks % 25 == 0) malloc_trim(0);
  }, 200, 200);
  uv_async_init(&loop_, &worker_done_, [](uv_async_t* a) { static_cast<Server*>(a->data)->worker_finished(); });
  worker_done_.data = this;

  for (size_t i = 0; i < nworkers; ++i) {
    workers_.push_back(std::make_unique<Worker>(rt_, static_cast<int>(i)));
    workers_.back()->on_stopped = [this] {
      workers_done_.fetch_add(1);
      uv_async_send(&worker_done_);
    };
  }
  for (size_t i = 0; i < nworkers; ++i) workers_[i]->start(sockets[i]);
  health_ = std::make_unique<HealthChecker>(&loop_, rt_);
  health_->start();
  fleet_ = std::make_unique<fleet::FleetSync>(&loop_, rt_);
  fleet_->configure(rt_.current());
  certs_ = std::make_unique<CertWatcher>(&loop_);
  certs_->watch(*cfg, rt_.current()->tls);
  rt_.ready = true;
  write_ports_file();
  spdlog::info("onelayer {} ready: layer_id {}, {} listener(s), {} worker(s)", ONELAYER_VERSION, cfg->layer_id,
               cfg->listeners.size(), nworkers);

  uv_run(&loop_, UV_RUN_DEFAULT);
  for (auto& w : workers_) w->join();
  workers_.clear();
  admin_.reset();
  uv_run(&loop_, UV_RUN_NOWAIT);
  health_.reset();
  fleet_.reset();
  certs_.reset();
  if (uv_loop_close(&loop_) != 0) spdlog::warn("main loop closed with open handles");
  flush_access_log();
  spdlog::info("stopped{}", forced_ ? " (drain_timeout cut connections)" : "");
  return forced_ ? 3 : 0;
}

}  // namespace

int run_server(const ServerOptions& opts) {
  Server s(opts);
  return s.run();
}

}  // namespace onelayer
