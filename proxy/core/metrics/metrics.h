// Counters, gauges and histograms behind GET /metrics. Pure core: no I/O, no
// clock (callers pass `now_ms`). The request path only touches relaxed
// atomics, so every worker thread can update the same RouteMetrics without a
// lock; only get-or-create (config load) and rendering (admin) take the mutex.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/base/grpc_status.h"
#include "core/metrics/amplification_window.h"
#include "core/metrics/histogram.h"
#include "core/retry/retry_reasons.h"

namespace onelayer {

// Status codes 100..599 indexed by code - 100.
inline constexpr int kMinStatus = 100;
inline constexpr int kMaxStatus = 599;
using StatusCounters = std::array<std::atomic<uint64_t>, kMaxStatus - kMinStatus + 1>;

// Everything counted for one (listener, route, upstream). Created once by
// Metrics::route() and never destroyed, so a worker may keep the pointer.
struct RouteMetrics {
  RouteMetrics(std::string listener_name, std::string route_name, std::string upstream_name);

  const std::string listener, route, upstream;

  // A downstream response was sent: requests_total{code,protocol}, the
  // duration histogram and the amplification window. Codes outside 100..599
  // are only timed and windowed. `over_h2`: the request came over HTTP/2
  // (the `protocol` label h2, else http1).
  void on_response(int status, double seconds, uint32_t attempts, int64_t now_ms, bool over_h2 = false);
  // One attempt was sent upstream.
  void on_attempt();
  // A retry was started after `outcome` (for a response, its `status`; a
  // status outside 100..599 is ignored).
  void on_retry(AttemptOutcome outcome, int status = 0);
  // The same for any trigger: a gRPC one is counted under its status name.
  void on_retry(RetryTrigger trigger);
  // A refused stream was re-sent at once (not a retry: retry.h Decision::resend).
  void on_resend() { resends.fetch_add(1, std::memory_order_relaxed); }
  // A gRPC call was answered downstream with this grpc-status (proxied or
  // onelayer's own): onelayer_grpc_responses_total{grpc_status}.
  void on_grpc_response(GrpcStatus status);
  // A retryable failure was not retried (none and not_retryable are ignored:
  // they are not reasons).
  void on_declined(Decline reason);

  // An attempt failed (retry.h attempt_failed): `first` for the request's
  // first attempt, else a retry; for a response, a status outside 100..599
  // is ignored.
  void on_attempt_failure(bool first, RetryTrigger trigger);
  // A fault was injected into an attempt: "abort" or "delay".
  void on_fault(std::string_view kind);
  // onelayer_hedges_total{result}: a hedge's answer went to the client
  // (won), another hedge sent (lost: cancelled, failed, or another attempt
  // answered), a hedge was due and not sent (declined).
  enum class HedgeResult : uint8_t { won, lost, declined };
  void on_hedge(HedgeResult r, uint64_t n = 1) {
    hedges_by_result[static_cast<size_t>(r)].fetch_add(n, std::memory_order_relaxed);
  }
  uint64_t hedges(HedgeResult r) const { return hedges_by_result[static_cast<size_t>(r)].load(std::memory_order_relaxed); }

  // Readers (tests, rendering). requests(): both protocols together.
  uint64_t requests(int status) const;
  uint64_t requests_over_h2(int status) const;
  uint64_t requests_total() const;
  uint64_t attempts() const { return attempts_total.load(std::memory_order_relaxed); }
  uint64_t retries(AttemptOutcome outcome, int status = 0) const;
  uint64_t retries(RetryTrigger trigger) const;
  uint64_t grpc_responses(GrpcStatus status) const;
  uint64_t declined(Decline reason) const;
  uint64_t attempt_failures(bool first, RetryTrigger trigger) const;
  uint64_t faults(std::string_view kind) const;

  // One set per protocol, so each rendered series only ever grows.
  StatusCounters requests_http1_by_code{};
  StatusCounters requests_h2_by_code{};
  std::atomic<uint64_t> attempts_total{0};
  std::atomic<uint64_t> retries_connect_failure{0};
  std::atomic<uint64_t> retries_reset{0};
  std::atomic<uint64_t> retries_timeout{0};
  std::atomic<uint64_t> retries_refused{0};
  std::atomic<uint64_t> resends{0};
  StatusCounters retries_by_status{};
  using GrpcCounters = std::array<std::atomic<uint64_t>, kGrpcStatusCount>;  // by code
  GrpcCounters retries_by_grpc{};
  GrpcCounters grpc_responses_by_status{};
  std::array<std::atomic<uint64_t>, kDeclineReasonCount> declined_by_reason{};
  Histogram duration;
  AmplificationWindow amplification;
  // onelayer_attempt_failures_total, [0] first attempts, [1] retries.
  struct FailureCounters {
    std::atomic<uint64_t> connect_failure{0}, reset{0}, timeout{0}, refused{0};
    StatusCounters by_status{};
    GrpcCounters by_grpc{};
  };
  std::array<FailureCounters, 2> attempt_failures_by{};
  std::atomic<uint64_t> faults_abort{0}, faults_delay{0};
  std::array<std::atomic<uint64_t>, 3> hedges_by_result{};  // by HedgeResult
};

// One extra gauge sample supplied by the shell at render time (budget tokens,
// breaker state, pool sizes). `labels` is already escaped, without braces,
// e.g. `upstream="inventory"`; empty for none.
struct GaugeSample {
  std::string name;
  std::string labels;
  double value = 0;
  std::string help;
  const char* type = "gauge";  // or "counter" (a total the shell keeps), or "histogram"
  const char* suffix = "";     // a histogram's sample: "_bucket", "_sum" or "_count"
};

// Escapes a label value for the text format: backslash, double quote, newline.
std::string escape_label_value(std::string_view value);

class Metrics {
 public:
  // Get-or-create (takes the mutex: call at config load, not per request).
  // Pointers stay valid for the lifetime of this object, so counters survive
  // config reloads for unchanged names.
  RouteMetrics* route(std::string_view listener, std::string_view route, std::string_view upstream);

  // downstream_connections_active counts every client connection; the h2
  // gauge the share of them that speaks HTTP/2 (rendered as the `protocol`
  // label: http1 = all - h2).
  std::atomic<uint64_t> downstream_h2_connections_active{0};
  // Likewise upstream: upstream_connections_* count every connection, these
  // the HTTP/2 ones among them (h2c and h2).
  std::atomic<uint64_t> upstream_h2_connections_active{0}, upstream_h2_connections_total{0};
  std::atomic<uint64_t> downstream_connections_active{0}, downstream_connections_total{0},
      upstream_connections_active{0}, upstream_connections_total{0}, bytes_in_total{0},
      bytes_out_total{0}, config_generation{0}, config_reloads_ok{0}, config_reloads_error{0};

  // Prometheus text exposition format 0.0.4. Series of different
  // RouteMetrics that share a label set (the same route name on two
  // listeners, or a route whose upstream changed on reload) are summed so no
  // series appears twice. Extra gauges are grouped by name in order of first
  // appearance; onelayer_retry_budget_tokens and onelayer_circuit_breaker_state
  // print HELP/TYPE even without samples. Extras with an invalid metric name
  // or a name of a built-in family are skipped.
  std::string render_prometheus(int64_t now_ms, const std::vector<GaugeSample>& extra) const;

 private:
  using Key = std::tuple<std::string, std::string, std::string>;
  mutable std::mutex mutex_;
  std::map<Key, std::unique_ptr<RouteMetrics>> routes_;
};

}  // namespace onelayer
