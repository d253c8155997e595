#include <doctest/doctest.h>

#include "../config_test_util.h"

using namespace onelayer;
using namespace onelayer::test;

namespace {

const char* kBase = R"(
listeners:
  - name: out
    listen: 127.0.0.1:0
    fleet_service: orders
    routes:
      - name: all
        upstream: inventory
upstreams:
  - name: inventory
    endpoints: [127.0.0.1:9]
    retry_budget: { ratio: 0.1, min_per_second: 10, scope: fleet }
)";

std::string with(const std::string& fleet_block) { return fleet_block + kBase; }

}  // namespace

TEST_CASE("config fleet: the block loads with every value and round-trips without a password") {
  ConfigPtr c = load_ok(with(R"(
fleet:
  redis: 10.0.0.7:6379
  password_file: /etc/onelayer/redis
  key_prefix: ol:prod
  sync_interval: 500ms
  timeout: 100ms
  stale_after: 2s
)"));
  REQUIRE(c->fleet);
  CHECK(c->fleet->redis.to_string() == "10.0.0.7:6379");
  CHECK(c->fleet->password_file == "/etc/onelayer/redis");
  CHECK(c->fleet->key_prefix == "ol:prod");
  CHECK(c->fleet->sync_interval == Millis(500));
  CHECK(c->fleet->timeout == Millis(100));
  CHECK(c->fleet->stale_after == Millis(2000));
  CHECK(c->upstreams[0].retry_budget.scope == BudgetScope::fleet);
  CHECK(c->upstreams[0].retry_budget.service == "inventory");  // the upstream's name by default
  CHECK(c->listeners[0].fleet_service == "orders");
  check_round_trip(*c);
  std::string yaml = config_to_yaml(*c);
  CHECK(yaml.find("password_file: /etc/onelayer/redis") != std::string::npos);
}

TEST_CASE("config fleet: defaults and sentinels") {
  ConfigPtr c = load_ok(with("fleet:\n  redis: { sentinels: [127.0.0.1:26379, \"[::1]:26380\"], master: main }\n"));
  CHECK(c->fleet->sentinels.size() == 2);
  CHECK(c->fleet->master == "main");
  CHECK(c->fleet->redis.host.empty());
  CHECK(c->fleet->key_prefix == "onelayer");
  CHECK(c->fleet->sync_interval == Millis(1000));
  CHECK(c->fleet->timeout == Millis(200));
  CHECK(c->fleet->stale_after == Millis(3000));
  check_round_trip(*c);
}

TEST_CASE("config fleet: scope fleet and fleet_service need the block") {
  std::vector<std::string> e = errors_of(kBase);
  REQUIRE(e.size() == 2);
  CHECK(e[0] == "t.yaml:5:20: listeners[0].fleet_service: needs a top-level fleet: block (where the fleet's Redis is)");
  CHECK(e[1].find("upstreams[0].retry_budget.scope: needs a top-level fleet: block") != std::string::npos);
}

TEST_CASE("config fleet: clear errors for bad values") {
  CHECK(errors_of(with("fleet:\n  redis: nowhere\n"))[0].find("fleet.redis: invalid address") != std::string::npos);
  CHECK(errors_of(with("fleet: { password_file: /x }\n"))[0].find("fleet.redis: is required") !=
        std::string::npos);
  CHECK(errors_of(with("fleet: { redis: { master: m } }\n"))[0].find("sentinels") != std::string::npos);
  CHECK(errors_of(with("fleet: { redis: 127.0.0.1:6379, key_prefix: \"a{b}\" }\n"))[0].find("invalid key_prefix") !=
        std::string::npos);
  CHECK(errors_of(with("fleet: { redis: 127.0.0.1:6379, sync_interval: 10ms, timeout: 5ms, stale_after: 1s }\n"))[0]
            .find("fleet.sync_interval: sync_interval must be between 100ms and 60s") != std::string::npos);
  CHECK(errors_of(with("fleet: { redis: 127.0.0.1:6379, timeout: 2s }\n"))[0].find(
            "timeout (2s) must not be longer than sync_interval (1s)") != std::string::npos);
  CHECK(errors_of(with("fleet: { redis: 127.0.0.1:6379, stale_after: 1s }\n"))[0].find(
            "stale_after (1s) must be longer than sync_interval (1s)") != std::string::npos);
  CHECK(errors_of(with("fleet: { redis: 127.0.0.1:6379, color: red }\n"))[0].find("color") != std::string::npos);
}

TEST_CASE("config fleet: one fleet budget per service, valid names") {
  std::string two = with("fleet: { redis: 127.0.0.1:6379 }\n") + R"(
  - name: inventory-b
    endpoints: [127.0.0.1:9]
    retry_budget: { scope: fleet, service: inventory }
)";
  std::vector<std::string> e = errors_of(two);
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("service \"inventory\" already has a fleet budget (upstream \"inventory\")") != std::string::npos);
  std::string bad = with("fleet: { redis: 127.0.0.1:6379 }\n") + R"(
  - name: b
    endpoints: [127.0.0.1:9]
    retry_budget: { scope: fleet, service: "a}b" }
)";
  CHECK(errors_of(bad)[0].find("invalid service name \"a}b\"") != std::string::npos);
  std::string local = with("fleet: { redis: 127.0.0.1:6379 }\n") + R"(
  - name: c
    endpoints: [127.0.0.1:9]
    retry_budget: { scope: local }
)";
  ConfigPtr c = load_ok(local);
  CHECK(c->upstreams[1].retry_budget.scope == BudgetScope::local);
  CHECK(c->upstreams[1].retry_budget.service.empty());
}
