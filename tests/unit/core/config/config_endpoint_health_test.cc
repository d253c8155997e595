// The endpoint-health keys of an upstream (balance, outlier_detection,
// health_check): defaults, values as written, errors, round trip.
#include <doctest/doctest.h>

#include <string>

#include "core/config/config_loader.h"
#include "config_test_util.h"

using namespace onelayer;

namespace {

constexpr const char* kFile = R"(listeners:
  - name: out
    listen: 127.0.0.1:0
    routes:
      - name: r
        upstream: up
upstreams:
  - name: up
    endpoints: [127.0.0.1:8081, 127.0.0.1:8082]
)";

LoadResult load_with(const std::string& extra) { return load_config_string(kFile + extra, "t.yaml"); }

std::string first_error(const LoadResult& r) { return r.errors.empty() ? "" : r.errors.front().to_string(); }

}  // namespace

TEST_CASE("config endpoint health: defaults are p2c, detection on, checks off") {
  LoadResult r = load_with("");
  REQUIRE(r.ok());
  const Upstream& u = r.config->upstreams.at(0);
  CHECK(u.balance == Balance::p2c);
  CHECK(u.outlier_detection.enabled);
  CHECK(u.outlier_detection.consecutive_failures == 5);
  CHECK(u.outlier_detection.base_ejection == Millis{10'000});
  CHECK(u.outlier_detection.max_ejection == Millis{300'000});
  CHECK(u.outlier_detection.max_ejected_percent == 50);
  CHECK_FALSE(u.health_check.enabled);
  CHECK(u.health_check.path == "/healthz");
  CHECK(u.health_check.interval == Millis{5'000});
  CHECK(u.health_check.timeout == Millis{1'000});
  CHECK(u.health_check.unhealthy == 3);
  CHECK(u.health_check.healthy == 2);
}

TEST_CASE("config endpoint health: every key as written") {
  LoadResult r = load_with(
      "    balance: round_robin\n"
      "    outlier_detection: { consecutive_failures: 3, base_ejection: 2s, max_ejection: 1m,"
      " max_ejected_percent: 100 }\n"
      "    health_check: { path: /ready, interval: 500ms, timeout: 200ms, unhealthy: 2, healthy: 1 }\n");
  INFO(format_errors(r.errors));
  REQUIRE(r.ok());
  const Upstream& u = r.config->upstreams.at(0);
  CHECK(u.balance == Balance::round_robin);
  CHECK(u.outlier_detection == OutlierDetectionConfig{true, 3, Millis{2000}, Millis{60'000}, 100});
  CHECK(u.health_check.enabled);
  CHECK(u.health_check.path == "/ready");
  CHECK(u.health_check.interval == Millis{500});
  CHECK(u.health_check.timeout == Millis{200});
  CHECK(u.health_check.unhealthy == 2);
  CHECK(u.health_check.healthy == 1);
  // The round trip keeps all of it.
  test::check_round_trip(*r.config);
}

TEST_CASE("config endpoint health: detection can be turned off, an empty check block turns checks on") {
  LoadResult r = load_with("    outlier_detection: { enabled: false }\n    health_check: {}\n");
  REQUIRE(r.ok());
  CHECK_FALSE(r.config->upstreams[0].outlier_detection.enabled);
  CHECK(r.config->upstreams[0].health_check.enabled);
}

TEST_CASE("config endpoint health: bad values name the key") {
  CHECK(first_error(load_with("    balance: random\n")) ==
        "t.yaml:10:14: upstreams[0].balance: must be one of p2c, round_robin");
  CHECK(first_error(load_with("    outlier_detection: { base_ejection: 10s, max_ejection: 5s }\n")) ==
        "t.yaml:10:60: upstreams[0].outlier_detection.max_ejection: must be >= base_ejection (10s)");
  CHECK(first_error(load_with("    outlier_detection: { max_ejected_percent: 101 }\n")).find(
            "upstreams[0].outlier_detection.max_ejected_percent: must be between 0 and 100") !=
        std::string::npos);
  CHECK(first_error(load_with("    outlier_detection: { consecutive_failures: 0 }\n")).find(
            "consecutive_failures: must be between 1") != std::string::npos);
  CHECK(first_error(load_with("    health_check: { path: healthz }\n")).find(
            "upstreams[0].health_check.path: must start with /") != std::string::npos);
  CHECK(first_error(load_with("    health_check: { interval: 1s, timeout: 2s }\n")).find(
            "upstreams[0].health_check.timeout: must be <= interval (1s)") != std::string::npos);
  CHECK(first_error(load_with("    health_check: { intervl: 1s }\n")).find("did you mean \"interval\"") !=
        std::string::npos);
}

TEST_CASE("config endpoint health: at most 64 endpoints per upstream") {
  std::string many = "[";
  for (int i = 0; i < 65; ++i) many += (i ? ", 127.0.0.1:" : "127.0.0.1:") + std::to_string(1000 + i);
  many += "]";
  std::string yaml = kFile;
  yaml.replace(yaml.find("[127.0.0.1:8081, 127.0.0.1:8082]"), 32, many);
  LoadResult r = load_config_string(yaml, "t.yaml");
  CHECK(first_error(r) == "t.yaml:9:16: upstreams[0].endpoints: at most 64 endpoints per upstream");
}
