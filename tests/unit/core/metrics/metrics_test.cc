#include "core/metrics/metrics.h"

#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace onelayer {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;  // an arbitrary epoch millisecond
constexpr RetryTrigger k503{AttemptOutcome::response, 503};

// The lines of `text` that start with `prefix` (a metric family), in order.
std::string lines_starting(const std::string& text, const std::string& prefix) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    if (line.rfind(prefix, 0) == 0) out += line + "\n";
    pos = end + 1;
  }
  return out;
}

bool contains_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

// One downstream request that took `attempts` attempts, the ones before the
// last failing with `trigger`.
void script_request(RouteMetrics& rm, uint32_t attempts, RetryTrigger trigger, int status, double seconds,
                    int64_t now_ms) {
  for (uint32_t a = 0; a < attempts; ++a) {
    rm.on_attempt();
    if (a + 1 < attempts) rm.on_retry(trigger.outcome, trigger.status);
  }
  rm.on_response(status, seconds, attempts, now_ms);
}

}  // namespace

TEST_CASE("TenRequestsWithTwoRetriesEachGiveTenRequestsThirtyAttemptsRatioThree") {
  Metrics m;
  RouteMetrics* rm = m.route("outbound", "inventory-read", "inventory");
  for (int i = 0; i < 10; ++i) script_request(*rm, 3, k503, 200, 0.003, kT0 + i * 100);

  CHECK(rm->requests(200) == 10);
  CHECK(rm->requests_total() == 10);
  CHECK(rm->attempts() == 30);
  CHECK(rm->retries(AttemptOutcome::response, 503) == 20);
  CHECK(rm->amplification.ratio(kT0 + 1000) == doctest::Approx(3.0));

  const std::string text = m.render_prometheus(kT0 + 1000, {});
  CHECK(contains_line(text, R"(onelayer_requests_total{listener="outbound",route="inventory-read",code="200",protocol="http1"} 10)"));
  CHECK(contains_line(text, R"(onelayer_upstream_attempts_total{route="inventory-read",upstream="inventory"} 30)"));
  CHECK(contains_line(text, R"(onelayer_retries_total{route="inventory-read",reason="503"} 20)"));
  CHECK(contains_line(text, R"(onelayer_amplification_ratio{route="inventory-read"} 3)"));
  CHECK(contains_line(text, R"(onelayer_request_duration_seconds_count{route="inventory-read"} 10)"));
}

TEST_CASE("RenderingOfAScriptedSequenceIsExact") {
  Metrics m;
  RouteMetrics* rm = m.route("outbound", "items", "inventory");
  script_request(*rm, 2, {AttemptOutcome::connect_failure, 0}, 200, 0.004, kT0);
  script_request(*rm, 1, {}, 404, 0.2, kT0);
  script_request(*rm, 3, k503, 503, 12.0, kT0);
  rm->on_declined(Decline::attempts_exhausted);
  m.config_generation = 2;
  m.config_reloads_ok = 1;
  m.config_reloads_error = 3;
  m.downstream_connections_active = 4;
  m.downstream_connections_total = 9;
  m.upstream_connections_active = 1;
  m.upstream_connections_total = 5;
  m.upstream_h2_connections_active = 1;
  m.upstream_h2_connections_total = 2;
  m.bytes_in_total = 1234;
  m.bytes_out_total = 5678;
  std::vector<GaugeSample> extra = {
      {"onelayer_retry_budget_tokens", R"(upstream="inventory")", 10.5, ""},
      {"onelayer_circuit_breaker_state", R"(upstream="inventory")", 0, ""},
      {"onelayer_upstream_pool_idle_connections", R"(upstream="inventory")", 2, "Idle pooled connections."},
  };

  const std::string expected = std::string(R"(# HELP onelayer_requests_total Downstream requests answered, by listener, route, status code and protocol (http1 or h2).
# TYPE onelayer_requests_total counter
onelayer_requests_total{listener="outbound",route="items",code="200",protocol="http1"} 1
onelayer_requests_total{listener="outbound",route="items",code="404",protocol="http1"} 1
onelayer_requests_total{listener="outbound",route="items",code="503",protocol="http1"} 1
# HELP onelayer_upstream_attempts_total Attempts sent upstream (first attempts and retries), by route and upstream.
# TYPE onelayer_upstream_attempts_total counter
onelayer_upstream_attempts_total{route="items",upstream="inventory"} 6
# HELP onelayer_retries_total Retries made, by route and the outcome that triggered them.
# TYPE onelayer_retries_total counter
onelayer_retries_total{route="items",reason="connect-failure"} 1
onelayer_retries_total{route="items",reason="reset"} 0
onelayer_retries_total{route="items",reason="timeout"} 0
onelayer_retries_total{route="items",reason="503"} 2
# HELP onelayer_refused_resends_total Requests sent once more at once because the upstream refused their stream unprocessed (HTTP/2 REFUSED_STREAM or above its GOAWAY), by route; not retries: no budget token, no backoff.
# TYPE onelayer_refused_resends_total counter
onelayer_refused_resends_total{route="items"} 0
# HELP onelayer_retries_declined_total Retryable failures that were not retried, by route and reason.
# TYPE onelayer_retries_declined_total counter
onelayer_retries_declined_total{route="items",reason="not_idempotent"} 0
onelayer_retries_declined_total{route="items",reason="body_too_large"} 0
onelayer_retries_declined_total{route="items",reason="attempts_exhausted"} 1
onelayer_retries_declined_total{route="items",reason="budget_exhausted"} 0
onelayer_retries_declined_total{route="items",reason="deadline"} 0
onelayer_retries_declined_total{route="items",reason="retry_after_beyond_deadline"} 0
onelayer_retries_declined_total{route="items",reason="outer_owner"} 0
onelayer_retries_declined_total{route="items",reason="inner_exhausted"} 0
onelayer_retries_declined_total{route="items",reason="circuit_open"} 0
onelayer_retries_declined_total{route="items",reason="server_pushback"} 0
onelayer_retries_declined_total{route="items",reason="deadline_too_short"} 0
# HELP onelayer_hedges_total Hedged attempts, by route and result: won (its answer went to the client), lost (any other hedge sent: cancelled, failed, or another attempt answered), declined (due but not sent: no budget token, attempts, deadline, deadline_too_short).
# TYPE onelayer_hedges_total counter
onelayer_hedges_total{route="items",result="won"} 0
onelayer_hedges_total{route="items",result="lost"} 0
onelayer_hedges_total{route="items",result="declined"} 0
# HELP onelayer_attempt_failures_total Failed upstream attempts, by route, attempt (first or retry) and outcome (connect-failure, reset, timeout, refused-stream, the status code or the gRPC status name).
# TYPE onelayer_attempt_failures_total counter
# HELP onelayer_faults_injected_total Faults injected into upstream attempts (route fault blocks and admin drills), by route and kind.
# TYPE onelayer_faults_injected_total counter
onelayer_faults_injected_total{route="items",kind="abort"} 0
onelayer_faults_injected_total{route="items",kind="delay"} 0
# HELP onelayer_grpc_responses_total gRPC calls answered downstream (proxied or onelayer's own answers), by route and grpc-status code.
# TYPE onelayer_grpc_responses_total counter
# HELP onelayer_amplification_ratio Upstream attempts per downstream request over the last 60 seconds, by route (0 without requests).
# TYPE onelayer_amplification_ratio gauge
onelayer_amplification_ratio{route="items"} 2
# HELP onelayer_request_duration_seconds Downstream request duration in seconds, retries and backoff included, by route.
# TYPE onelayer_request_duration_seconds histogram
onelayer_request_duration_seconds_bucket{route="items",le="0.001"} 0
onelayer_request_duration_seconds_bucket{route="items",le="0.0025"} 0
onelayer_request_duration_seconds_bucket{route="items",le="0.005"} 1
onelayer_request_duration_seconds_bucket{route="items",le="0.01"} 1
onelayer_request_duration_seconds_bucket{route="items",le="0.025"} 1
onelayer_request_duration_seconds_bucket{route="items",le="0.05"} 1
onelayer_request_duration_seconds_bucket{route="items",le="0.1"} 1
onelayer_request_duration_seconds_bucket{route="items",le="0.25"} 2
onelayer_request_duration_seconds_bucket{route="items",le="0.5"} 2
onelayer_request_duration_seconds_bucket{route="items",le="1"} 2
onelayer_request_duration_seconds_bucket{route="items",le="2.5"} 2
onelayer_request_duration_seconds_bucket{route="items",le="5"} 2
onelayer_request_duration_seconds_bucket{route="items",le="10"} 2
onelayer_request_duration_seconds_bucket{route="items",le="+Inf"} 3
onelayer_request_duration_seconds_sum{route="items"} 12.204
onelayer_request_duration_seconds_count{route="items"} 3
# HELP onelayer_config_reloads_total Configuration reloads, by result (ok or error).
# TYPE onelayer_config_reloads_total counter
onelayer_config_reloads_total{result="error"} 3
onelayer_config_reloads_total{result="ok"} 1
# HELP onelayer_config_generation Generation of the configuration in force (1 for the first load, +1 per successful reload).
# TYPE onelayer_config_generation gauge
onelayer_config_generation 2
# HELP onelayer_downstream_connections_active Open downstream (client) connections, by protocol (http1 or h2).
# TYPE onelayer_downstream_connections_active gauge
onelayer_downstream_connections_active{protocol="http1"} 4
onelayer_downstream_connections_active{protocol="h2"} 0
# HELP onelayer_downstream_connections_total Downstream (client) connections accepted.
# TYPE onelayer_downstream_connections_total counter
onelayer_downstream_connections_total 9
# HELP onelayer_upstream_connections_active Open upstream connections, in use or idle in a pool, by protocol (http1 or h2).
# TYPE onelayer_upstream_connections_active gauge
onelayer_upstream_connections_active{protocol="http1"} 0
onelayer_upstream_connections_active{protocol="h2"} 1
# HELP onelayer_upstream_connections_total Upstream connections established, by protocol (http1 or h2).
# TYPE onelayer_upstream_connections_total counter
onelayer_upstream_connections_total{protocol="http1"} 3
onelayer_upstream_connections_total{protocol="h2"} 2
# HELP onelayer_bytes_in_total Bytes read from downstream connections.
# TYPE onelayer_bytes_in_total counter
onelayer_bytes_in_total 1234
# HELP onelayer_bytes_out_total Bytes written to downstream connections.
# TYPE onelayer_bytes_out_total counter
onelayer_bytes_out_total 5678
# HELP onelayer_build_info Always 1; the version label says which onelayer is running.
# TYPE onelayer_build_info gauge
onelayer_build_info{version=")") + ONELAYER_VERSION + R"("} 1
# HELP onelayer_endpoint_ejected 1 while the endpoint is ejected (outlier detection or health checks).
# TYPE onelayer_endpoint_ejected gauge
# HELP onelayer_endpoint_ejections_total Times the endpoint was ejected.
# TYPE onelayer_endpoint_ejections_total counter
# HELP onelayer_shed_total Requests shed with 503 overloaded (max_concurrent_requests), by listener.
# TYPE onelayer_shed_total counter
# HELP onelayer_hidden_retries_total Requests owned by an outer layer that a hop in between had already sent (a hidden retry), by route and owner.
# TYPE onelayer_hidden_retries_total counter
# HELP onelayer_retry_budget_tokens Retry budget tokens currently available, by upstream.
# TYPE onelayer_retry_budget_tokens gauge
onelayer_retry_budget_tokens{upstream="inventory"} 10.5
# HELP onelayer_circuit_breaker_state Circuit breaker state by upstream: 0 closed, 1 open, 2 half-open.
# TYPE onelayer_circuit_breaker_state gauge
onelayer_circuit_breaker_state{upstream="inventory"} 0
# HELP onelayer_upstream_pool_idle_connections Idle pooled connections.
# TYPE onelayer_upstream_pool_idle_connections gauge
onelayer_upstream_pool_idle_connections{upstream="inventory"} 2
)";
  CHECK(m.render_prometheus(kT0 + 500, extra) == expected);
}

TEST_CASE("EmptyMetricsStillPrintHelpAndTypeForEveryFamily") {
  Metrics m;
  const std::string text = m.render_prometheus(kT0, {});
  for (const char* family :
       {"onelayer_requests_total", "onelayer_upstream_attempts_total", "onelayer_retries_total",
        "onelayer_retries_declined_total", "onelayer_amplification_ratio", "onelayer_request_duration_seconds",
        "onelayer_config_reloads_total", "onelayer_retry_budget_tokens", "onelayer_circuit_breaker_state",
        "onelayer_config_generation", "onelayer_downstream_connections_active", "onelayer_bytes_in_total"}) {
    CAPTURE(family);
    CHECK(text.find(std::string("# HELP ") + family + " ") != std::string::npos);
    CHECK(text.find(std::string("# TYPE ") + family + " ") != std::string::npos);
  }
  CHECK(lines_starting(text, "onelayer_requests_total").empty());
  CHECK(contains_line(text, R"(onelayer_config_reloads_total{result="ok"} 0)"));
}

TEST_CASE("HistogramBucketsAreCumulativeWithInclusiveUpperBounds") {
  Metrics m;
  RouteMetrics* rm = m.route("l", "r", "u");
  rm->on_response(200, 0.001, 1, kT0);   // exactly on a bound: le="0.001"
  rm->on_response(200, 0.0011, 1, kT0);  // next bucket
  rm->on_response(200, 10.0, 1, kT0);
  rm->on_response(200, 10.5, 1, kT0);    // only +Inf
  rm->on_response(200, -3, 1, kT0);      // clock went backwards: counts as 0
  auto snap = rm->duration.snapshot();
  CHECK(snap.count() == 5);

  const std::string text = m.render_prometheus(kT0, {});
  CHECK(contains_line(text, R"(onelayer_request_duration_seconds_bucket{route="r",le="0.001"} 2)"));
  CHECK(contains_line(text, R"(onelayer_request_duration_seconds_bucket{route="r",le="0.0025"} 3)"));
  CHECK(contains_line(text, R"(onelayer_request_duration_seconds_bucket{route="r",le="5"} 3)"));
  CHECK(contains_line(text, R"(onelayer_request_duration_seconds_bucket{route="r",le="10"} 4)"));
  CHECK(contains_line(text, R"(onelayer_request_duration_seconds_bucket{route="r",le="+Inf"} 5)"));
  CHECK(contains_line(text, R"(onelayer_request_duration_seconds_count{route="r"} 5)"));
  CHECK(contains_line(text, R"(onelayer_request_duration_seconds_sum{route="r"} 20.5021)"));
}

TEST_CASE("LabelValuesAreEscaped") {
  CHECK(escape_label_value("a\\b\"c\nd") == "a\\\\b\\\"c\\nd");
  Metrics m;
  m.route("li\"st", "ro\\ute", "up\nstream")->on_attempt();
  const std::string text = m.render_prometheus(kT0, {});
  CHECK(contains_line(text, R"(onelayer_upstream_attempts_total{route="ro\\ute",upstream="up\nstream"} 1)"));
}

TEST_CASE("UnknownRetryTriggersAndDeclineReasonsAreIgnored") {
  Metrics m;
  RouteMetrics* rm = m.route("l", "r", "u");
  rm->on_retry(AttemptOutcome::response, 5033);
  rm->on_retry(AttemptOutcome::response, 99);
  rm->on_retry(AttemptOutcome::response, 0);
  rm->on_declined(Decline::none);  // not reasons: never counted
  rm->on_declined(Decline::not_retryable);
  rm->on_declined(Decline::budget_exhausted);
  rm->on_retry(AttemptOutcome::timeout);
  rm->on_retry(AttemptOutcome::reset);
  const std::string text = m.render_prometheus(kT0, {});
  CHECK(lines_starting(text, "onelayer_retries_total") ==
        "onelayer_retries_total{route=\"r\",reason=\"connect-failure\"} 0\n"
        "onelayer_retries_total{route=\"r\",reason=\"reset\"} 1\n"
        "onelayer_retries_total{route=\"r\",reason=\"timeout\"} 1\n");
  CHECK(rm->declined(Decline::budget_exhausted) == 1);
  CHECK(lines_starting(text, "onelayer_retries_declined_total").find("not_retryable") == std::string::npos);
  CHECK(lines_starting(text, "onelayer_retries_declined_total").find("\"none\"") == std::string::npos);
}

TEST_CASE("RouteGetOrCreateReturnsTheSameCountersForTheSameNames") {
  Metrics m;
  RouteMetrics* a = m.route("l", "r", "u");
  a->on_attempt();
  CHECK(m.route("l", "r", "u") == a);  // a reload with unchanged names keeps counting
  CHECK(m.route("l", "r", "u")->attempts() == 1);
  CHECK(m.route("l", "r", "v") != a);
}

TEST_CASE("SameRouteNameOnTwoListenersIsSummedIntoOneSeries") {
  Metrics m;
  RouteMetrics* a = m.route("inbound", "api", "svc");
  RouteMetrics* b = m.route("outbound", "api", "svc");
  script_request(*a, 2, {AttemptOutcome::reset, 0}, 200, 0.01, kT0);
  script_request(*b, 1, {}, 200, 0.01, kT0);
  const std::string text = m.render_prometheus(kT0, {});
  CHECK(lines_starting(text, "onelayer_upstream_attempts_total{") ==
        "onelayer_upstream_attempts_total{route=\"api\",upstream=\"svc\"} 3\n");
  CHECK(lines_starting(text, "onelayer_amplification_ratio{") == "onelayer_amplification_ratio{route=\"api\"} 1.5\n");
  CHECK(lines_starting(text, "onelayer_requests_total{") ==
        "onelayer_requests_total{listener=\"inbound\",route=\"api\",code=\"200\",protocol=\"http1\"} 1\n"
        "onelayer_requests_total{listener=\"outbound\",route=\"api\",code=\"200\",protocol=\"http1\"} 1\n");
  CHECK(contains_line(text, R"(onelayer_request_duration_seconds_count{route="api"} 2)"));
}

TEST_CASE("ExtraGaugesWithBadOrBuiltinNamesOrRepeatedLabelsAreSkipped") {
  Metrics m;
  std::vector<GaugeSample> extra = {
      {"9bad", "", 1, ""},
      {"onelayer_requests_total", "", 1, ""},
      {"onelayer_retry_budget_tokens", R"(upstream="a")", 1, ""},
      {"onelayer_retry_budget_tokens", R"(upstream="a")", 2, ""},
      {"onelayer_x", "", std::numeric_limits<double>::infinity(), "help with \\ and\nnewline"},
  };
  const std::string text = m.render_prometheus(kT0, extra);
  CHECK(text.find("9bad") == std::string::npos);
  CHECK(lines_starting(text, "onelayer_requests_total").empty());
  CHECK(lines_starting(text, "onelayer_retry_budget_tokens") == "onelayer_retry_budget_tokens{upstream=\"a\"} 1\n");
  CHECK(contains_line(text, "# HELP onelayer_x help with \\\\ and\\nnewline"));
  CHECK(contains_line(text, "onelayer_x +Inf"));
}

TEST_CASE("ConcurrentUpdatesFromManyThreadsAreAllCounted") {
  Metrics m;
  RouteMetrics* rm = m.route("l", "r", "u");
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        // Spread over several seconds so slots are reset while other threads add.
        const int64_t now = kT0 + (i / 5000) * 1000 + t;
        rm->on_attempt();
        rm->on_attempt();
        rm->on_retry(AttemptOutcome::response, 503);
        rm->on_declined(Decline::deadline);
        rm->on_response(200, 0.002, 2, now);
      }
    });
  }
  std::string rendered;
  threads.emplace_back([&] {
    for (int i = 0; i < 20; ++i) rendered = m.render_prometheus(kT0, {});  // readers run alongside writers
  });
  for (auto& th : threads) th.join();

  constexpr uint64_t kTotal = uint64_t{kThreads} * kPerThread;
  CHECK(rm->requests(200) == kTotal);
  CHECK(rm->attempts() == 2 * kTotal);
  CHECK(rm->retries(AttemptOutcome::response, 503) == kTotal);
  CHECK(rm->declined(Decline::deadline) == kTotal);
  CHECK(rm->duration.snapshot().count() == kTotal);
  const auto totals = rm->amplification.totals(kT0 + 10'000);
  CHECK(totals.requests == kTotal);
  CHECK(totals.attempts == 2 * kTotal);
  CHECK(!rendered.empty());
}

TEST_CASE("ExtraCounterSamplesRenderWithTypeCounter") {
  Metrics m;
  std::vector<GaugeSample> extra = {
      {"onelayer_endpoint_ejections_total", "upstream=\"u\",endpoint=\"127.0.0.1:1\"", 3, "", "counter"},
      {"onelayer_endpoint_ejected", "upstream=\"u\",endpoint=\"127.0.0.1:1\"", 1, ""}};
  std::string text = m.render_prometheus(0, extra);
  CHECK(text.find("# TYPE onelayer_endpoint_ejections_total counter\n"
                  "onelayer_endpoint_ejections_total{upstream=\"u\",endpoint=\"127.0.0.1:1\"} 3\n") !=
        std::string::npos);
  CHECK(text.find("# TYPE onelayer_endpoint_ejected gauge\n"
                  "onelayer_endpoint_ejected{upstream=\"u\",endpoint=\"127.0.0.1:1\"} 1\n") != std::string::npos);
}

TEST_CASE("metrics: attempt failures by first/retry and outcome, and injected faults") {
  Metrics m;
  RouteMetrics* rm = m.route("l", "r", "u");
  const RetryTrigger s503{AttemptOutcome::response, 503, {}};
  rm->on_attempt_failure(true, s503);
  rm->on_attempt_failure(true, s503);
  rm->on_attempt_failure(true, RetryTrigger{AttemptOutcome::reset, 0, {}});
  rm->on_attempt_failure(false, s503);
  rm->on_attempt_failure(false, RetryTrigger{AttemptOutcome::response, 700, {}});  // outside 100..599: ignored
  rm->on_fault("abort");
  rm->on_fault("delay");
  rm->on_fault("delay");
  CHECK(rm->attempt_failures(true, s503) == 2);
  CHECK(rm->attempt_failures(false, s503) == 1);
  CHECK(rm->attempt_failures(false, RetryTrigger{AttemptOutcome::response, 700, {}}) == 0);
  std::string text = m.render_prometheus(0, {});
  CHECK(text.find("onelayer_attempt_failures_total{route=\"r\",attempt=\"first\",outcome=\"503\"} 2\n") != std::string::npos);
  CHECK(text.find("onelayer_attempt_failures_total{route=\"r\",attempt=\"first\",outcome=\"reset\"} 1\n") != std::string::npos);
  CHECK(text.find("onelayer_attempt_failures_total{route=\"r\",attempt=\"retry\",outcome=\"503\"} 1\n") != std::string::npos);
  CHECK(text.find("onelayer_faults_injected_total{route=\"r\",kind=\"abort\"} 1\n") != std::string::npos);
  CHECK(text.find("onelayer_faults_injected_total{route=\"r\",kind=\"delay\"} 2\n") != std::string::npos);
  CHECK(text.find("# TYPE onelayer_shed_total counter\n") != std::string::npos);
  CHECK(text.find("# TYPE onelayer_hidden_retries_total counter\n") != std::string::npos);
}

TEST_CASE("GrpcTriggersCountUnderTheirStatusNameAndRefusedStreamsApart") {
  Metrics m;
  RouteMetrics* rm = m.route("l", "calls", "u");
  const RetryTrigger unavailable{AttemptOutcome::response, 200, GrpcStatus::unavailable};
  rm->on_retry(unavailable);
  rm->on_retry(unavailable);
  rm->on_retry(RetryTrigger{AttemptOutcome::refused, 0, {}});
  rm->on_retry(AttemptOutcome::response, 200);  // an HTTP 200 is a status trigger, not a gRPC one
  rm->on_attempt_failure(true, unavailable);
  rm->on_attempt_failure(false, RetryTrigger{AttemptOutcome::refused, 0, {}});
  CHECK(rm->retries(unavailable) == 2);
  CHECK(rm->retries(AttemptOutcome::response, 200) == 1);
  CHECK(rm->retries(RetryTrigger{AttemptOutcome::refused, 0, {}}) == 1);
  CHECK(rm->retries(RetryTrigger{AttemptOutcome::response, 200, GrpcStatus::internal}) == 0);
  const std::string text = m.render_prometheus(0, {});
  CHECK(text.find("onelayer_retries_total{route=\"calls\",reason=\"unavailable\"} 2\n") != std::string::npos);
  CHECK(text.find("onelayer_retries_total{route=\"calls\",reason=\"refused-stream\"} 1\n") != std::string::npos);
  CHECK(text.find("onelayer_retries_total{route=\"calls\",reason=\"200\"} 1\n") != std::string::npos);
  CHECK(text.find("reason=\"internal\"") == std::string::npos);  // only counted statuses appear
  CHECK(text.find("onelayer_attempt_failures_total{route=\"calls\",attempt=\"first\",outcome=\"unavailable\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("onelayer_attempt_failures_total{route=\"calls\",attempt=\"retry\",outcome=\"refused-stream\"} 1\n") !=
        std::string::npos);
}

TEST_CASE("RefusedStreamResendsAreCountedApartFromRetries") {
  Metrics m;
  RouteMetrics* rm = m.route("l", "calls", "u");
  rm->on_resend();
  rm->on_resend();
  const std::string text = m.render_prometheus(0, {});
  CHECK(text.find("onelayer_refused_resends_total{route=\"calls\"} 2\n") != std::string::npos);
  CHECK(text.find("reason=\"refused-stream\"") == std::string::npos);  // no retry was counted
}

TEST_CASE("GrpcResponsesAreCountedByStatusNumberAndSummedAcrossListeners") {
  Metrics m;
  RouteMetrics* a = m.route("one", "calls", "u");
  RouteMetrics* b = m.route("two", "calls", "u");
  a->on_grpc_response(GrpcStatus::ok);
  a->on_grpc_response(GrpcStatus::unavailable);
  b->on_grpc_response(GrpcStatus::unavailable);
  b->on_grpc_response(GrpcStatus::unauthenticated);
  CHECK(a->grpc_responses(GrpcStatus::unavailable) == 1);
  CHECK(a->grpc_responses(GrpcStatus::internal) == 0);
  const std::string text = m.render_prometheus(0, {});
  CHECK(text.find("# TYPE onelayer_grpc_responses_total counter\n"
                  "onelayer_grpc_responses_total{route=\"calls\",grpc_status=\"0\"} 1\n"
                  "onelayer_grpc_responses_total{route=\"calls\",grpc_status=\"14\"} 2\n"
                  "onelayer_grpc_responses_total{route=\"calls\",grpc_status=\"16\"} 1\n") != std::string::npos);
  // A shell-supplied sample cannot shadow the built-in family.
  const std::string shadowed = m.render_prometheus(0, {{"onelayer_grpc_responses_total", "", 9, ""}});
  CHECK(shadowed.find("onelayer_grpc_responses_total 9") == std::string::npos);
}

TEST_CASE("ServerPushbackIsACountedDeclineReason") {
  Metrics m;
  RouteMetrics* rm = m.route("l", "calls", "u");
  rm->on_declined(Decline::server_pushback);
  CHECK(rm->declined(Decline::server_pushback) == 1);
  CHECK(m.render_prometheus(0, {}).find(
            "onelayer_retries_declined_total{route=\"calls\",reason=\"server_pushback\"} 1\n") != std::string::npos);
}

TEST_CASE("RequestsOverHttp2AreTheirOwnSeriesWithProtocolH2") {
  Metrics m;
  RouteMetrics* rm = m.route("edge", "api", "svc");
  rm->on_response(200, 0.01, 1, kT0);
  rm->on_response(200, 0.01, 1, kT0, true);
  rm->on_response(200, 0.01, 1, kT0, true);
  rm->on_response(503, 0.01, 1, kT0, true);
  CHECK(rm->requests(200) == 3);
  CHECK(rm->requests_over_h2(200) == 2);
  CHECK(rm->requests_total() == 4);
  m.downstream_connections_active = 5;
  m.downstream_h2_connections_active = 2;
  const std::string text = m.render_prometheus(kT0, {});
  CHECK(lines_starting(text, "onelayer_requests_total{") ==
        "onelayer_requests_total{listener=\"edge\",route=\"api\",code=\"200\",protocol=\"h2\"} 2\n"
        "onelayer_requests_total{listener=\"edge\",route=\"api\",code=\"200\",protocol=\"http1\"} 1\n"
        "onelayer_requests_total{listener=\"edge\",route=\"api\",code=\"503\",protocol=\"h2\"} 1\n");
  CHECK(contains_line(text, R"(onelayer_downstream_connections_active{protocol="http1"} 3)"));
  CHECK(contains_line(text, R"(onelayer_downstream_connections_active{protocol="h2"} 2)"));
}

}  // namespace onelayer
