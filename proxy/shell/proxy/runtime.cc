#include "shell/proxy/runtime.h"

namespace onelayer {

int Generation::listener_index(std::string_view name) const {
  for (size_t i = 0; i < config->listeners.size(); ++i)
    if (config->listeners[i].name == name) return static_cast<int>(i);
  return -1;
}

bool Generation::logs_access(std::string_view listener_name) const {
  int i = listener_index(listener_name);
  return i < 0 || config->listeners[static_cast<size_t>(i)].access_log;
}

GenerationPtr Runtime::install(ConfigPtr cfg, TlsContexts tls) {
  auto gen = std::make_shared<Generation>();
  gen->config = cfg;
  tls.upstreams.resize(cfg->upstreams.size());
  tls.listeners.resize(cfg->listeners.size());
  gen->tls = std::move(tls);
  TimePoint now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  std::unordered_map<std::string, std::shared_ptr<UpstreamShared>> next;
  std::unordered_map<std::string, std::shared_ptr<UpstreamEndpoints>> next_endpoints;
  for (const Upstream& u : cfg->upstreams) {
    auto ep = endpoint_state_.find(u.name);
    std::shared_ptr<UpstreamEndpoints> eps;
    if (ep != endpoint_state_.end() && ep->second->same_members(u)) {
      eps = ep->second;
      eps->reconfigure(u);
    } else {
      eps = std::make_shared<UpstreamEndpoints>(u);
    }
    next_endpoints[u.name] = eps;
    gen->endpoints.push_back(eps);
    auto it = upstream_state_.find(u.name);
    std::shared_ptr<UpstreamShared> s;
    if (it != upstream_state_.end()) {
      s = it->second;
      s->budget.reconfigure(u.retry_budget);
      s->breaker.reconfigure(u.circuit_breaker);
    } else {
      s = std::make_shared<UpstreamShared>(u, now);
    }
    next[u.name] = s;
    gen->upstreams.push_back(s);
  }
  upstream_state_ = std::move(next);
  endpoint_state_ = std::move(next_endpoints);
  // Shedding: a listener keeps its in-flight count and rate across reloads.
  std::unordered_map<std::string, std::shared_ptr<LoadShedder>> next_shedders;
  for (const Listener& l : cfg->listeners) {
    std::shared_ptr<LoadShedder> shed;
    auto it = shedder_state_.find(l.name);
    if (it != shedder_state_.end()) {
      shed = it->second;
      shed->set_limit(l.max_concurrent_requests);
    } else if (l.max_concurrent_requests > 0) {
      shed = std::make_shared<LoadShedder>(l.max_concurrent_requests, now);
    }
    if (shed) next_shedders[l.name] = shed;
    gen->shedders.push_back(l.max_concurrent_requests > 0 ? shed : nullptr);
  }
  shedder_state_ = std::move(next_shedders);
  std::unordered_map<std::string, std::shared_ptr<std::atomic<int64_t>>> next_other;
  for (const Listener& l : cfg->listeners) {
    std::shared_ptr<std::atomic<int64_t>> other;
    if (!l.fleet_service.empty()) {
      auto it = fleet_other_state_.find(l.fleet_service);
      other = it != fleet_other_state_.end() ? it->second : std::make_shared<std::atomic<int64_t>>(0);
      next_other[l.fleet_service] = other;
    }
    gen->fleet_other.push_back(other);
  }
  fleet_other_state_ = std::move(next_other);
  for (const Listener& l : cfg->listeners) {
    std::vector<RouteMetrics*> rms;
    for (const Route& r : l.routes) rms.push_back(metrics.route(l.name, r.name, r.upstream));
    gen->route_metrics.push_back(std::move(rms));
  }
  gen->id = generation_id_.load() + 1;
  current_ = gen;
  generation_id_.store(gen->id, std::memory_order_release);
  metrics.config_generation.store(gen->id, std::memory_order_relaxed);
  return gen;
}

std::vector<GaugeSample> Runtime::gauges() const {
  std::vector<GaugeSample> out;
  std::lock_guard<std::mutex> lock(mu_);
  TimePoint now = Clock::now();
  for (const auto& [name, s] : upstream_state_) {
    std::string label = "upstream=\"" + name + "\"";
    out.push_back({"onelayer_retry_budget_tokens", label, s->budget.tokens(now),
                   "Retry budget tokens available per upstream"});
    out.push_back({"onelayer_circuit_breaker_state", label,
                   static_cast<double>(static_cast<int>(s->breaker.state(now))),
                   "Circuit breaker state per upstream: 0 closed, 1 open, 2 half-open"});
  }
  for (const auto& [name, eps] : endpoint_state_) {
    for (const UpstreamEndpoints::MemberView& m : eps->members()) {
      std::string label = "upstream=\"" + escape_label_value(name) + "\",endpoint=\"" +
                          escape_label_value(m.label) + "\"";
      out.push_back({"onelayer_endpoint_ejected", label, m.ejected ? 1.0 : 0.0,
                     "1 while the endpoint is ejected (outlier detection or health checks)"});
      out.push_back({"onelayer_endpoint_ejections_total", label, static_cast<double>(m.ejections_total),
                     "Times the endpoint was ejected", "counter"});
    }
  }
  for (const auto& [name, shed] : shedder_state_) {
    out.push_back({"onelayer_shed_total", "listener=\"" + escape_label_value(name) + "\"",
                   static_cast<double>(shed->shed_total()),
                   "Requests shed with 503 overloaded (max_concurrent_requests), by listener", "counter"});
  }
  for (const HiddenRetryDetector::Series& s : hidden_retries.series()) {
    out.push_back({"onelayer_hidden_retries_total",
                   "route=\"" + escape_label_value(s.route) + "\",owner=\"" + escape_label_value(s.owner) + "\"",
                   static_cast<double>(s.count),
                   "Requests owned by an outer layer that a hop in between had already sent (a hidden retry)",
                   "counter"});
  }
  out.push_back({"onelayer_draining", "", draining.load() ? 1.0 : 0.0, "1 while the process drains"});
  transparent.append_samples(out);
  return out;
}

}  // namespace onelayer
