#include <doctest/doctest.h>

#include <string>

#include "../config_test_util.h"
#include "core/config/config_loader.h"

using namespace onelayer;
using namespace std::chrono_literals;
using onelayer::test::errors_of;
using onelayer::test::load_ok;
using onelayer::test::with_retry;

namespace {

const RetryPolicy& policy(const ConfigPtr& c) { return c->listeners[0].routes[0].retry; }

}  // namespace

TEST_CASE("HedgeIsOffUnlessAHedgeBlockIsGiven") {
  ConfigPtr c = load_ok(with_retry("          max_attempts: 3\n"));
  CHECK_FALSE(policy(c).hedge.enabled);
  CHECK_FALSE(policy(c).min_time_left.has_value());
  const std::string yaml = config_to_yaml(*c);
  CHECK(yaml.find("hedge: ~") != std::string::npos);
  CHECK(yaml.find("min_time_left: ~") != std::string::npos);
  test::check_round_trip(*c);
}

TEST_CASE("HedgeAfterTakesAPercentileOrADuration") {
  ConfigPtr c = load_ok(with_retry("          hedge: { after: p99, max: 2 }\n          min_time_left: p50\n"));
  CHECK(policy(c).hedge.enabled);
  CHECK(policy(c).hedge.after == LatencyThreshold{Millis{0}, 99});
  CHECK(policy(c).hedge.max == 2);
  CHECK(policy(c).min_time_left == LatencyThreshold{Millis{0}, 50});
  test::check_round_trip(*c);

  ConfigPtr d = load_ok(with_retry("          hedge: { after: 50ms }\n          min_time_left: 200ms\n"));
  CHECK(policy(d).hedge.after == LatencyThreshold{Millis{50}, 0});
  CHECK(policy(d).hedge.max == 1);
  CHECK(policy(d).min_time_left == LatencyThreshold{Millis{200}, 0});
  test::check_round_trip(*d);

  // An empty block: the defaults, p95 and one hedge.
  ConfigPtr e = load_ok(with_retry("          hedge: {}\n"));
  CHECK(policy(e).hedge.enabled);
  CHECK(policy(e).hedge.after == LatencyThreshold{Millis{0}, 95});
  CHECK(config_to_yaml(*e).find("hedge: {after: p95, max: 1}") != std::string::npos);
}

TEST_CASE("HedgeConfigErrorsNameTheKey") {
  auto one = [](const std::string& retry) {
    std::vector<std::string> errs = errors_of(with_retry(retry));
    REQUIRE(errs.size() == 1);
    return errs[0];
  };
  CHECK(one("          hedge: { after: p97 }\n").find("retry.hedge.after: invalid percentile \"p97\"") !=
        std::string::npos);
  CHECK(one("          hedge: { after: 0ms }\n").find("retry.hedge.after: must be greater than 0") !=
        std::string::npos);
  CHECK(one("          hedge: { max: 0 }\n").find("retry.hedge.max") != std::string::npos);
  CHECK(one("          hedge: { after: 10ms, extra: 1 }\n").find("retry.hedge.extra") != std::string::npos);
  CHECK(one("          max_attempts: 1\n          hedge: { after: 10ms }\n").find("max_attempts") !=
        std::string::npos);
  CHECK(one("          min_time_left: soon\n").find("retry.min_time_left: invalid duration") != std::string::npos);
}
