// State shared by every worker thread: the config generation in force, the
// per-upstream retry budgets and circuit breakers (kept across reloads for
// upstreams that keep their name), metrics, and the drain flag.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/retry/circuit_breaker.h"
#include "core/base/clock.h"
#include "core/config/config.h"
#include "core/request/fault_injector.h"
#include "core/hedging/latency_window.h"
#include "core/http/hidden_retry_detector.h"
#include "core/retry/load_shedder.h"
#include "core/metrics/metrics.h"
#include "core/retry/retry_budget.h"
#include "core/transparent/passthrough_counters.h"
#include "core/upstream/upstream_endpoints.h"
#include "shell/tls/tls_contexts.h"

namespace onelayer {

struct UpstreamShared {
  UpstreamShared(const Upstream& u, TimePoint now)
      : name(u.name), budget(u.retry_budget, now), breaker(u.circuit_breaker) {}
  std::string name;
  RetryBudget budget;
  CircuitBreaker breaker;
  UpstreamLatency latency;  // recent attempt latencies: retry.hedge.after, retry.min_time_left
};

struct Generation {
  uint64_t id = 0;
  ConfigPtr config;
  std::vector<std::shared_ptr<UpstreamShared>> upstreams;  // by Config::upstreams index
  // Balancing and endpoint health, by Config::upstreams index: kept across
  // reloads while the upstream's endpoints and balance stay the same.
  std::vector<std::shared_ptr<UpstreamEndpoints>> endpoints;
  std::vector<std::vector<RouteMetrics*>> route_metrics;    // [listener][route]
  // By listener index: the shedder of a listener with max_concurrent_requests,
  // else nullptr (kept across reloads for a listener that keeps its name).
  std::vector<std::shared_ptr<LoadShedder>> shedders;
  TlsContexts tls;  // by Config index: upstreams' and listeners' TLS (nullptr: none)
  // By listener index: arrivals some layer already retried, for the fleet
  // service the listener fronts (nullptr: no fleet_service). Kept across
  // reloads by service name; the fleet sync takes them (shell/fleet/).
  std::vector<std::shared_ptr<std::atomic<int64_t>>> fleet_other;

  int listener_index(std::string_view name) const;
  // Whether the listener named writes access-log lines (a listener a reload
  // removed keeps writing them until its connections end).
  bool logs_access(std::string_view listener_name) const;
};
using GenerationPtr = std::shared_ptr<const Generation>;

class Runtime {
 public:
  Metrics metrics;
  std::atomic<bool> draining{false};
  std::atomic<bool> ready{false};
  // Client plus upstream connections the process may hold: the descriptor
  // limit minus a reserve for listeners, the admin listener, DNS and logs,
  // so the process never runs out of descriptors (see Server::run).
  size_t max_open_connections = SIZE_MAX;
  // Admin fault drills and route fault blocks (docs/storm.md).
  FaultInjector faults;
  // Repeated (request id, attempt) pairs on owned requests, all workers.
  HiddenRetryDetector hidden_retries;
  TransparentCounters transparent;  // transparent listeners (docs/transparent.md)

  // Builds and publishes a generation for `cfg`; budgets and breakers of
  // upstreams with an unchanged name carry over.
  GenerationPtr install(ConfigPtr cfg, TlsContexts tls = {});

  // Workers call this per request; it only takes the lock when the
  // generation changed since the caller's cached copy.
  void refresh(GenerationPtr& cached) const {
    if (!cached || cached->id != generation_id_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(mu_);
      cached = current_;
    }
  }
  GenerationPtr current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }

  // Extra gauges for /metrics: budget tokens, breaker state, endpoint ejections.
  std::vector<GaugeSample> gauges() const;

 private:
  mutable std::mutex mu_;
  GenerationPtr current_;
  std::atomic<uint64_t> generation_id_{0};
  std::unordered_map<std::string, std::shared_ptr<UpstreamShared>> upstream_state_;
  std::unordered_map<std::string, std::shared_ptr<UpstreamEndpoints>> endpoint_state_;
  std::unordered_map<std::string, std::shared_ptr<LoadShedder>> shedder_state_;  // by listener name
  std::unordered_map<std::string, std::shared_ptr<std::atomic<int64_t>>> fleet_other_state_;  // by service
};

}  // namespace onelayer
