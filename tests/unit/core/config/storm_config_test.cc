// The config keys of docs/storm.md: fault blocks, max_concurrent_requests and
// retry_budget.mode, with their defaults, errors and YAML round trip.
#include <doctest/doctest.h>

#include <string>

#include "core/config/config_loader.h"
#include "config_test_util.h"

using namespace onelayer;

namespace {

std::string with(std::string_view route_extra, std::string_view listener_extra = "",
                 std::string_view upstream_extra = "") {
  std::string y = "listeners:\n  - name: out\n    listen: 127.0.0.1:0\n";
  y += listener_extra;
  y += "    routes:\n      - name: r\n        upstream: up\n";
  y += route_extra;
  y += "upstreams:\n  - name: up\n    endpoints: [127.0.0.1:8081]\n";
  y += upstream_extra;
  return y;
}

std::string first_error(const std::string& yaml) {
  LoadResult r = load_config_string(yaml, "t.yaml");
  return r.errors.empty() ? std::string() : r.errors[0].to_string();
}

}  // namespace

TEST_CASE("storm config: defaults are off (no fault, no shedding, requests budget)") {
  LoadResult r = load_config_string(with(""), "t.yaml");
  REQUIRE(r.ok());
  const Listener& l = r.config->listeners[0];
  CHECK(l.max_concurrent_requests == 0);
  CHECK_FALSE(l.routes[0].fault.enabled);
  CHECK(r.config->upstreams[0].retry_budget.mode == BudgetMode::requests);
}

TEST_CASE("storm config: fault block, shedding limit and successes mode are read as written") {
  LoadResult r = load_config_string(
      with("        fault: { abort: { status: 503, percent: 10 }, delay: { duration: 200ms, percent: 5 } }\n",
           "    max_concurrent_requests: 100\n",
           "    retry_budget: { mode: successes, ratio: 0.1, min_per_second: 10 }\n"),
      "t.yaml");
  INFO(format_errors(r.errors));
  REQUIRE(r.ok());
  const Route& route = r.config->listeners[0].routes[0];
  CHECK(route.fault.enabled);
  CHECK(route.fault.abort_status == 503);
  CHECK(route.fault.abort_percent == 10);
  CHECK(route.fault.delay == Millis{200});
  CHECK(route.fault.delay_percent == 5);
  CHECK(r.config->listeners[0].max_concurrent_requests == 100);
  CHECK(r.config->upstreams[0].retry_budget.mode == BudgetMode::successes);

  // Round trip through GET /config's YAML.
  test::check_round_trip(*r.config);
}

TEST_CASE("storm config: a fault's percent defaults to 100") {
  LoadResult r = load_config_string(with("        fault: { abort: { status: 500 } }\n"), "t.yaml");
  REQUIRE(r.ok());
  CHECK(r.config->listeners[0].routes[0].fault.abort_percent == 100);
  CHECK(r.config->listeners[0].routes[0].fault.delay == Millis{0});
}

TEST_CASE("storm config: bad values name the key") {
  CHECK(first_error(with("        fault: { abort: { status: 99 } }\n")).find("fault.abort.status") !=
        std::string::npos);
  CHECK(first_error(with("        fault: { abort: { status: 503, percent: 101 } }\n")).find("percent") !=
        std::string::npos);
  CHECK(first_error(with("        fault: { delay: { percent: 5 } }\n")).find("duration") != std::string::npos);
  CHECK(first_error(with("        fault: { grpc_status: 14 }\n")).find("needs an abort block") != std::string::npos);
  CHECK(first_error(with("        fault: { abort: { status: 503 }, grpc_status: 17 }\n")).find("fault.grpc_status") !=
        std::string::npos);
  CHECK(first_error(with("", "", "    retry_budget: { mode: tokens }\n")).find("retry_budget.mode") !=
        std::string::npos);
  CHECK(first_error(with("", "    max_concurrent_requests: -1\n")).find("max_concurrent_requests") !=
        std::string::npos);
}

TEST_CASE("storm config: a fault's grpc_status is what its aborts answer gRPC calls with") {
  LoadResult r = load_config_string(with("        fault: { abort: { status: 503, percent: 10 }, grpc_status: 14 }\n"), "t.yaml");
  INFO(format_errors(r.errors));
  REQUIRE(r.ok());
  CHECK(r.config->listeners[0].routes[0].fault.grpc_status == 14);
  const std::string yaml = config_to_yaml(*r.config);
  CHECK(yaml.find("grpc_status: 14") != std::string::npos);
  LoadResult back = load_config_string(yaml, "back.yaml");
  REQUIRE(back.ok());
  CHECK(back.config->same_settings(*r.config));
  LoadResult plain = load_config_string(with("        fault: { abort: { status: 503 } }\n"), "t.yaml");
  REQUIRE(plain.ok());
  CHECK(plain.config->listeners[0].routes[0].fault.grpc_status == -1);
}
