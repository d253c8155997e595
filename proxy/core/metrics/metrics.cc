#include "core/metrics/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>

#include "core/config/units.h"

#ifndef ONELAYER_VERSION
#define ONELAYER_VERSION "unknown"
#endif

namespace onelayer {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

std::string escape_help(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

bool valid_metric_name(std::string_view name) {
  if (name.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'; };
  if (!alpha(name[0])) return false;
  return std::all_of(name.begin() + 1, name.end(), [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

// Writes the text format; every family goes through family() first so HELP
// and TYPE are never forgotten.
class Writer {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += escape_help(help);
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  void sample(std::string_view name, std::string_view labels, std::string_view value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      out_ += labels;
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  void sample(std::string_view name, std::string_view labels, uint64_t value) {
    sample(name, labels, std::to_string(value));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string label(std::string_view key, std::string_view value) {
  std::string out(key);
  out += "=\"";
  out += escape_label_value(value);
  out += '"';
  return out;
}

std::string join_labels(std::initializer_list<std::string> parts) {
  std::string out;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += ',';
    out += p;
  }
  return out;
}

// Sums of every RouteMetrics that shares a route name.
struct RouteAccum {
  uint64_t retries_connect_failure = 0, retries_reset = 0, retries_timeout = 0, retries_refused = 0, resends = 0;
  std::map<int, uint64_t> retries_by_status;
  std::map<int, uint64_t> retries_by_grpc;   // gRPC code -> count
  std::map<int, uint64_t> grpc_responses;    // gRPC code -> count
  std::array<uint64_t, kDeclineReasonCount> declined{};
  Histogram::Snapshot duration;
  AmplificationWindow::Totals window;
  // attempt failures, [0] first, [1] retry: outcome name -> count
  std::array<std::map<std::string, uint64_t>, 2> failures;
  uint64_t faults_abort = 0, faults_delay = 0;
  std::array<uint64_t, 3> hedges{};  // won, lost, declined
};

struct Aggregate {
  std::map<std::string, uint64_t> requests;  // rendered labels -> count
  std::map<std::string, uint64_t> attempts;  // rendered labels -> count
  std::map<std::string, RouteAccum> routes;  // route name -> sums
};

void accumulate(Aggregate& agg, const RouteMetrics& rm, int64_t now_ms) {
  const std::string route_label = label("route", rm.route);
  for (int code = kMinStatus; code <= kMaxStatus; ++code) {
    uint64_t http1 = rm.requests_http1_by_code[code - kMinStatus].load(kRelaxed);
    uint64_t h2 = rm.requests_h2_by_code[code - kMinStatus].load(kRelaxed);
    if (http1 == 0 && h2 == 0) continue;
    const std::string listener_label = label("listener", rm.listener);
    const std::string code_label = label("code", std::to_string(code));
    if (http1 > 0) agg.requests[join_labels({listener_label, route_label, code_label, label("protocol", "http1")})] += http1;
    if (h2 > 0) agg.requests[join_labels({listener_label, route_label, code_label, label("protocol", "h2")})] += h2;
  }
  agg.attempts[join_labels({route_label, label("upstream", rm.upstream)})] += rm.attempts();

  RouteAccum& acc = agg.routes[rm.route];
  acc.retries_connect_failure += rm.retries_connect_failure.load(kRelaxed);
  acc.retries_reset += rm.retries_reset.load(kRelaxed);
  acc.retries_timeout += rm.retries_timeout.load(kRelaxed);
  acc.retries_refused += rm.retries_refused.load(kRelaxed);
  acc.resends += rm.resends.load(kRelaxed);
  for (int code = kMinStatus; code <= kMaxStatus; ++code) {
    uint64_t n = rm.retries_by_status[code - kMinStatus].load(kRelaxed);
    if (n != 0) acc.retries_by_status[code] += n;
  }
  for (int code = 0; code < kGrpcStatusCount; ++code) {
    const auto i = static_cast<size_t>(code);
    if (uint64_t n = rm.retries_by_grpc[i].load(kRelaxed); n != 0) acc.retries_by_grpc[code] += n;
    if (uint64_t n = rm.grpc_responses_by_status[i].load(kRelaxed); n != 0) acc.grpc_responses[code] += n;
  }
  for (size_t i = 0; i < kDeclineReasonCount; ++i) acc.declined[i] += rm.declined_by_reason[i].load(kRelaxed);
  for (size_t i = 0; i < acc.hedges.size(); ++i) acc.hedges[i] += rm.hedges_by_result[i].load(kRelaxed);
  acc.duration += rm.duration.snapshot();
  for (size_t k = 0; k < 2; ++k) {
    const RouteMetrics::FailureCounters& f = rm.attempt_failures_by[k];
    auto add = [&](const std::string& name, uint64_t n) {
      if (n != 0) acc.failures[k][name] += n;
    };
    add("connect-failure", f.connect_failure.load(kRelaxed));
    add("reset", f.reset.load(kRelaxed));
    add("timeout", f.timeout.load(kRelaxed));
    add("refused-stream", f.refused.load(kRelaxed));
    for (int code = kMinStatus; code <= kMaxStatus; ++code) {
      uint64_t n = f.by_status[code - kMinStatus].load(kRelaxed);
      if (n != 0) add(std::to_string(code), n);
    }
    for (size_t code = 0; code < f.by_grpc.size(); ++code) {
      add(grpc_status_name(static_cast<GrpcStatus>(code)), f.by_grpc[code].load(kRelaxed));
    }
  }
  acc.faults_abort += rm.faults_abort.load(kRelaxed);
  acc.faults_delay += rm.faults_delay.load(kRelaxed);
  auto totals = rm.amplification.totals(now_ms);
  acc.window.requests += totals.requests;
  acc.window.attempts += totals.attempts;
}

void render_routes(Writer& w, const Aggregate& agg) {
  w.family("onelayer_requests_total", "counter",
           "Downstream requests answered, by listener, route, status code and protocol (http1 or h2).");
  for (const auto& [labels, n] : agg.requests) w.sample("onelayer_requests_total", labels, n);

  w.family("onelayer_upstream_attempts_total", "counter",
           "Attempts sent upstream (first attempts and retries), by route and upstream.");
  for (const auto& [labels, n] : agg.attempts) w.sample("onelayer_upstream_attempts_total", labels, n);

  w.family("onelayer_retries_total", "counter",
           "Retries made, by route and the outcome that triggered them.");
  for (const auto& [route, acc] : agg.routes) {
    const std::string rl = label("route", route);
    w.sample("onelayer_retries_total", join_labels({rl, label("reason", "connect-failure")}), acc.retries_connect_failure);
    w.sample("onelayer_retries_total", join_labels({rl, label("reason", "reset")}), acc.retries_reset);
    w.sample("onelayer_retries_total", join_labels({rl, label("reason", "timeout")}), acc.retries_timeout);
    // Refused streams and gRPC statuses only once counted: most routes see
    // neither.
    if (acc.retries_refused != 0)
      w.sample("onelayer_retries_total", join_labels({rl, label("reason", "refused-stream")}), acc.retries_refused);
    for (const auto& [code, n] : acc.retries_by_status) {
      w.sample("onelayer_retries_total", join_labels({rl, label("reason", std::to_string(code))}), n);
    }
    for (const auto& [code, n] : acc.retries_by_grpc) {
      w.sample("onelayer_retries_total",
               join_labels({rl, label("reason", grpc_status_name(static_cast<GrpcStatus>(code)))}), n);
    }
  }

  w.family("onelayer_refused_resends_total", "counter",
           "Requests sent once more at once because the upstream refused their stream unprocessed (HTTP/2 "
           "REFUSED_STREAM or above its GOAWAY), by route; not retries: no budget token, no backoff.");
  for (const auto& [route, acc] : agg.routes) w.sample("onelayer_refused_resends_total", label("route", route), acc.resends);

  w.family("onelayer_retries_declined_total", "counter",
           "Retryable failures that were not retried, by route and reason.");
  for (const auto& [route, acc] : agg.routes) {
    const std::string rl = label("route", route);
    for (size_t i = 0; i < kDeclineReasonCount; ++i) {
      w.sample("onelayer_retries_declined_total", join_labels({rl, label("reason", decline_name(static_cast<Decline>(i)))}),
               acc.declined[i]);
    }
  }

  w.family("onelayer_hedges_total", "counter",
           "Hedged attempts, by route and result: won (its answer went to the client), lost (any other hedge "
           "sent: cancelled, failed, or another attempt answered), declined (due but not sent: no budget token, attempts, "
           "deadline, deadline_too_short).");
  for (const auto& [route, acc] : agg.routes) {
    const std::string rl = label("route", route);
    const char* results[] = {"won", "lost", "declined"};
    for (size_t i = 0; i < acc.hedges.size(); ++i)
      w.sample("onelayer_hedges_total", join_labels({rl, label("result", results[i])}), acc.hedges[i]);
  }

  w.family("onelayer_attempt_failures_total", "counter",
           "Failed upstream attempts, by route, attempt (first or retry) and outcome (connect-failure, reset, "
           "timeout, refused-stream, the status code or the gRPC status name).");
  for (const auto& [route, acc] : agg.routes) {
    const std::string rl = label("route", route);
    for (size_t k = 0; k < 2; ++k) {
      for (const auto& [outcome, n] : acc.failures[k]) {
        w.sample("onelayer_attempt_failures_total",
                 join_labels({rl, label("attempt", k == 0 ? "first" : "retry"), label("outcome", outcome)}), n);
      }
    }
  }

  w.family("onelayer_faults_injected_total", "counter",
           "Faults injected into upstream attempts (route fault blocks and admin drills), by route and kind.");
  for (const auto& [route, acc] : agg.routes) {
    const std::string rl = label("route", route);
    w.sample("onelayer_faults_injected_total", join_labels({rl, label("kind", "abort")}), acc.faults_abort);
    w.sample("onelayer_faults_injected_total", join_labels({rl, label("kind", "delay")}), acc.faults_delay);
  }

  w.family("onelayer_grpc_responses_total", "counter",
           "gRPC calls answered downstream (proxied or onelayer's own answers), by route and grpc-status code.");
  for (const auto& [route, acc] : agg.routes) {
    const std::string rl = label("route", route);
    for (const auto& [code, n] : acc.grpc_responses) {
      w.sample("onelayer_grpc_responses_total", join_labels({rl, label("grpc_status", std::to_string(code))}), n);
    }
  }

  w.family("onelayer_amplification_ratio", "gauge",
           "Upstream attempts per downstream request over the last 60 seconds, by route (0 without requests).");
  for (const auto& [route, acc] : agg.routes) {
    double ratio = acc.window.requests == 0
                       ? 0.0
                       : static_cast<double>(acc.window.attempts) / static_cast<double>(acc.window.requests);
    w.sample("onelayer_amplification_ratio", label("route", route), format_double(ratio));
  }

  w.family("onelayer_request_duration_seconds", "histogram",
           "Downstream request duration in seconds, retries and backoff included, by route.");
  for (const auto& [route, acc] : agg.routes) {
    const std::string rl = label("route", route);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < Histogram::kBuckets; ++i) {
      cumulative += acc.duration.counts[i];
      w.sample("onelayer_request_duration_seconds_bucket", join_labels({rl, label("le", Histogram::kLeLabels[i])}),
               cumulative);
    }
    w.sample("onelayer_request_duration_seconds_sum", rl, format_double(acc.duration.sum_seconds()));
    w.sample("onelayer_request_duration_seconds_count", rl, cumulative);
  }
}

void render_process(Writer& w, const Metrics& m) {
  auto load = [](const std::atomic<uint64_t>& a) { return a.load(kRelaxed); };
  w.family("onelayer_config_reloads_total", "counter", "Configuration reloads, by result (ok or error).");
  w.sample("onelayer_config_reloads_total", "result=\"error\"", load(m.config_reloads_error));
  w.sample("onelayer_config_reloads_total", "result=\"ok\"", load(m.config_reloads_ok));

  w.family("onelayer_config_generation", "gauge",
           "Generation of the configuration in force (1 for the first load, +1 per successful reload).");
  w.sample("onelayer_config_generation", "", load(m.config_generation));

  // Connection gauges by protocol: the h2 share of all, http1 the rest.
  auto by_protocol = [&](const char* name, const std::atomic<uint64_t>& all_count,
                         const std::atomic<uint64_t>& h2_count) {
    uint64_t all = all_count.load(kRelaxed);
    uint64_t h2 = std::min(all, h2_count.load(kRelaxed));
    w.sample(name, label("protocol", "http1"), all - h2);
    w.sample(name, label("protocol", "h2"), h2);
  };
  w.family("onelayer_downstream_connections_active", "gauge",
           "Open downstream (client) connections, by protocol (http1 or h2).");
  by_protocol("onelayer_downstream_connections_active", m.downstream_connections_active,
              m.downstream_h2_connections_active);
  w.family("onelayer_downstream_connections_total", "counter", "Downstream (client) connections accepted.");
  w.sample("onelayer_downstream_connections_total", "", load(m.downstream_connections_total));
  w.family("onelayer_upstream_connections_active", "gauge",
           "Open upstream connections, in use or idle in a pool, by protocol (http1 or h2).");
  by_protocol("onelayer_upstream_connections_active", m.upstream_connections_active,
              m.upstream_h2_connections_active);
  w.family("onelayer_upstream_connections_total", "counter",
           "Upstream connections established, by protocol (http1 or h2).");
  by_protocol("onelayer_upstream_connections_total", m.upstream_connections_total, m.upstream_h2_connections_total);

  w.family("onelayer_bytes_in_total", "counter", "Bytes read from downstream connections.");
  w.sample("onelayer_bytes_in_total", "", load(m.bytes_in_total));
  w.family("onelayer_bytes_out_total", "counter", "Bytes written to downstream connections.");
  w.sample("onelayer_bytes_out_total", "", load(m.bytes_out_total));

  w.family("onelayer_build_info", "gauge", "Always 1; the version label says which onelayer is running.");
  w.sample("onelayer_build_info", label("version", ONELAYER_VERSION), "1");
}

bool is_builtin_name(std::string_view name) {
  static const std::set<std::string, std::less<>> names = {
      "onelayer_requests_total", "onelayer_upstream_attempts_total", "onelayer_retries_total",
      "onelayer_retries_declined_total", "onelayer_amplification_ratio", "onelayer_request_duration_seconds",
      "onelayer_request_duration_seconds_bucket", "onelayer_request_duration_seconds_sum",
      "onelayer_request_duration_seconds_count", "onelayer_config_reloads_total", "onelayer_config_generation",
      "onelayer_downstream_connections_active", "onelayer_downstream_connections_total",
      "onelayer_upstream_connections_active", "onelayer_upstream_connections_total", "onelayer_bytes_in_total",
      "onelayer_bytes_out_total", "onelayer_build_info", "onelayer_attempt_failures_total",
      "onelayer_faults_injected_total", "onelayer_grpc_responses_total", "onelayer_hedges_total"};
  return names.find(name) != names.end();
}

// Gauges the shell always supplies per upstream; their HELP/TYPE print even
// before any upstream exists so dashboards and checkers see the family.
struct KnownGauge {
  const char* name;
  const char* help;
  const char* type = "gauge";
};
constexpr KnownGauge kKnownGauges[] = {
    {"onelayer_retry_budget_tokens", "Retry budget tokens currently available, by upstream."},
    {"onelayer_circuit_breaker_state", "Circuit breaker state by upstream: 0 closed, 1 open, 2 half-open."},
    {"onelayer_endpoint_ejected", "1 while the endpoint is ejected (outlier detection or health checks)."},
    {"onelayer_endpoint_ejections_total", "Times the endpoint was ejected.", "counter"},
    {"onelayer_shed_total", "Requests shed with 503 overloaded (max_concurrent_requests), by listener.", "counter"},
    {"onelayer_hidden_retries_total",
     "Requests owned by an outer layer that a hop in between had already sent (a hidden retry), by route and owner.",
     "counter"},
};

void render_extra(Writer& w, const std::vector<GaugeSample>& extra) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const GaugeSample*>> by_name;
  for (const auto& g : extra) {
    if (!valid_metric_name(g.name) || is_builtin_name(g.name)) continue;
    auto [it, inserted] = by_name.try_emplace(g.name);
    if (inserted) order.push_back(g.name);
    it->second.push_back(&g);
  }
  for (const auto& known : kKnownGauges) {
    if (by_name.find(known.name) == by_name.end()) w.family(known.name, known.type, known.help);
  }
  for (const auto& name : order) {
    const auto& samples = by_name[name];
    std::string help;
    for (const auto* g : samples) {
      if (!g->help.empty()) {
        help = g->help;
        break;
      }
    }
    if (help.empty()) {
      for (const auto& known : kKnownGauges) {
        if (name == known.name) help = known.help;
      }
    }
    if (help.empty()) help = "Gauge reported by onelayer.";
    w.family(name, samples.front()->type, help);
    std::set<std::string> seen;  // a repeated label set would make the exposition invalid
    for (const auto* g : samples) {
      if (seen.insert(g->suffix + g->labels).second) w.sample(name + g->suffix, g->labels, format_double(g->value));
    }
  }
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

// ---- RouteMetrics ----

RouteMetrics::RouteMetrics(std::string listener_name, std::string route_name, std::string upstream_name)
    : listener(std::move(listener_name)), route(std::move(route_name)), upstream(std::move(upstream_name)) {}

void RouteMetrics::on_response(int status, double seconds, uint32_t attempts, int64_t now_ms, bool over_h2) {
  if (status >= kMinStatus && status <= kMaxStatus) {
    (over_h2 ? requests_h2_by_code : requests_http1_by_code)[status - kMinStatus].fetch_add(1, kRelaxed);
  }
  duration.observe(seconds);
  amplification.add_request(now_ms, attempts);
}

void RouteMetrics::on_attempt() { attempts_total.fetch_add(1, kRelaxed); }

namespace {

// The onelayer_retries_total counter of a trigger; nullptr for a status
// outside 100..599. RM is RouteMetrics or const RouteMetrics.
template <class RM>
auto* retry_counter(RM& rm, RetryTrigger t) {
  decltype(&rm.retries_reset) none = nullptr;
  switch (t.outcome) {
    case AttemptOutcome::connect_failure: return &rm.retries_connect_failure;
    case AttemptOutcome::reset: return &rm.retries_reset;
    case AttemptOutcome::timeout: return &rm.retries_timeout;
    case AttemptOutcome::refused: return &rm.retries_refused;
    case AttemptOutcome::response:
      if (t.grpc) return static_cast<size_t>(*t.grpc) < rm.retries_by_grpc.size()
                             ? &rm.retries_by_grpc[static_cast<size_t>(*t.grpc)]
                             : none;
      if (t.status < kMinStatus || t.status > kMaxStatus) return none;
      return &rm.retries_by_status[static_cast<size_t>(t.status - kMinStatus)];
  }
  return none;
}

// The onelayer_attempt_failures_total counter of a first attempt or a
// retry, by what ended it; nullptr for a status outside 100..599.
template <class RM>
auto* failure_counter(RM& rm, bool first, RetryTrigger trigger) {
  auto& f = rm.attempt_failures_by[first ? 0 : 1];
  decltype(&f.reset) none = nullptr;
  switch (trigger.outcome) {
    case AttemptOutcome::connect_failure: return &f.connect_failure;
    case AttemptOutcome::reset: return &f.reset;
    case AttemptOutcome::timeout: return &f.timeout;
    case AttemptOutcome::refused: return &f.refused;
    case AttemptOutcome::response:
      if (trigger.grpc) return static_cast<size_t>(*trigger.grpc) < f.by_grpc.size()
                                   ? &f.by_grpc[static_cast<size_t>(*trigger.grpc)]
                                   : none;
      if (trigger.status < kMinStatus || trigger.status > kMaxStatus) return none;
      return &f.by_status[static_cast<size_t>(trigger.status - kMinStatus)];
  }
  return none;
}

}  // namespace

void RouteMetrics::on_retry(AttemptOutcome outcome, int status) { on_retry(RetryTrigger{outcome, status, {}}); }

void RouteMetrics::on_retry(RetryTrigger trigger) {
  if (auto* c = retry_counter(*this, trigger)) c->fetch_add(1, kRelaxed);
}

void RouteMetrics::on_grpc_response(GrpcStatus status) {
  const auto i = static_cast<size_t>(status);
  if (i < grpc_responses_by_status.size()) grpc_responses_by_status[i].fetch_add(1, kRelaxed);
}

uint64_t RouteMetrics::grpc_responses(GrpcStatus status) const {
  const auto i = static_cast<size_t>(status);
  return i < grpc_responses_by_status.size() ? grpc_responses_by_status[i].load(kRelaxed) : 0;
}

void RouteMetrics::on_declined(Decline reason) {
  if (is_counted_decline(reason)) declined_by_reason[static_cast<size_t>(reason)].fetch_add(1, kRelaxed);
}

void RouteMetrics::on_attempt_failure(bool first, RetryTrigger trigger) {
  if (auto* c = failure_counter(*this, first, trigger)) c->fetch_add(1, kRelaxed);
}

void RouteMetrics::on_fault(std::string_view kind) {
  if (kind == "abort") faults_abort.fetch_add(1, kRelaxed);
  if (kind == "delay") faults_delay.fetch_add(1, kRelaxed);
}

uint64_t RouteMetrics::attempt_failures(bool first, RetryTrigger trigger) const {
  auto* c = failure_counter(*this, first, trigger);
  return c ? c->load(kRelaxed) : 0;
}

uint64_t RouteMetrics::faults(std::string_view kind) const {
  if (kind == "abort") return faults_abort.load(kRelaxed);
  if (kind == "delay") return faults_delay.load(kRelaxed);
  return 0;
}

uint64_t RouteMetrics::requests(int status) const {
  if (status < kMinStatus || status > kMaxStatus) return 0;
  return requests_http1_by_code[status - kMinStatus].load(kRelaxed) +
         requests_h2_by_code[status - kMinStatus].load(kRelaxed);
}

uint64_t RouteMetrics::requests_over_h2(int status) const {
  if (status < kMinStatus || status > kMaxStatus) return 0;
  return requests_h2_by_code[status - kMinStatus].load(kRelaxed);
}

uint64_t RouteMetrics::requests_total() const {
  uint64_t n = 0;
  for (const auto& c : requests_http1_by_code) n += c.load(kRelaxed);
  for (const auto& c : requests_h2_by_code) n += c.load(kRelaxed);
  return n;
}

uint64_t RouteMetrics::retries(AttemptOutcome outcome, int status) const {
  return retries(RetryTrigger{outcome, status, {}});
}

uint64_t RouteMetrics::retries(RetryTrigger trigger) const {
  auto* c = retry_counter(*this, trigger);
  return c ? c->load(kRelaxed) : 0;
}

uint64_t RouteMetrics::declined(Decline reason) const {
  return is_counted_decline(reason) ? declined_by_reason[static_cast<size_t>(reason)].load(kRelaxed) : 0;
}

// ---- Metrics ----

RouteMetrics* Metrics::route(std::string_view listener, std::string_view route, std::string_view upstream) {
  std::lock_guard lock(mutex_);
  Key key{std::string(listener), std::string(route), std::string(upstream)};
  auto it = routes_.find(key);
  if (it == routes_.end()) {
    auto rm = std::make_unique<RouteMetrics>(std::get<0>(key), std::get<1>(key), std::get<2>(key));
    it = routes_.emplace(std::move(key), std::move(rm)).first;
  }
  return it->second.get();
}

std::string Metrics::render_prometheus(int64_t now_ms, const std::vector<GaugeSample>& extra) const {
  Aggregate agg;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, rm] : routes_) accumulate(agg, *rm, now_ms);
  }
  Writer w;
  render_routes(w, agg);
  render_process(w, *this);
  render_extra(w, extra);
  return w.take();
}

}  // namespace onelayer
