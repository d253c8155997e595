#include "core/config/config_loader.h"
#include "config_test_util.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

using namespace onelayer;

// Shows each error on its own line when a comparison fails.
template <>
struct doctest::StringMaker<std::vector<std::string>> {
  static doctest::String convert(const std::vector<std::string>& v) {
    std::string out = "\n";
    for (const std::string& s : v) out += "  " + s + "\n";
    return out.c_str();
  }
};

namespace {

using test::errors_of;

using Lines = std::vector<std::string>;

using test::load_ok;

// The smallest valid file; tests append to or edit it.
constexpr const char* kMinimal = R"(listeners:
  - name: out
    listen: 127.0.0.1:0
    routes:
      - name: r
        upstream: up
upstreams:
  - name: up
    endpoints: [127.0.0.1:8081]
)";

}  // namespace

// ------------------------------------------------------------------ valid files

TEST_CASE("config: the documented example loads with every value as written") {
  LoadResult r = load_config_file(ONELAYER_TEST_DATA "/config/product_example.yaml");
  INFO(format_errors(r.errors));
  REQUIRE(r.ok());
  const Config& c = *r.config;
  CHECK(c.layer_id == "orders");
  CHECK(c.admin_listen == HostPort{"127.0.0.1", 9901});
  CHECK(c.workers == 1);
  CHECK(c.drain_timeout == Millis{10'000});
  CHECK(c.propagate_baggage);
  CHECK(c.source_path == ONELAYER_TEST_DATA "/config/product_example.yaml");
  CHECK(c.source_text.find("layer_id: orders") != std::string::npos);

  REQUIRE(c.listeners.size() == 1);
  const Listener& l = c.listeners[0];
  CHECK(l.name == "outbound");
  CHECK(l.listen == HostPort{"127.0.0.1", 15001});
  CHECK(l.limits.max_header_bytes == 16 * 1024);
  CHECK(l.limits.max_body_bytes == 16 * 1024 * 1024);
  CHECK(l.limits.header_timeout == Millis{10'000});
  CHECK(l.limits.idle_timeout == Millis{60'000});
  CHECK(l.limits.max_connections == 10'000);

  REQUIRE(l.routes.size() == 1);
  const Route& route = l.routes[0];
  CHECK(route.name == "inventory-read");
  CHECK(route.match.host == "inventory");
  CHECK(route.match.path_prefix == "/items");
  CHECK(route.match.methods == std::vector<std::string>{"GET", "HEAD"});
  CHECK(route.upstream == "inventory");
  CHECK(route.upstream_index == 0);
  CHECK(route.timeout == Millis{1500});
  CHECK(route.inner_hops == InnerHops::forbid);
  CHECK(route.has_retry);
  CHECK(route.retry.max_attempts == 3);
  CHECK(route.retry.per_try_timeout == Millis{500});
  CHECK(route.retry.retry_on.connect_failure);
  CHECK(route.retry.retry_on.reset);
  CHECK(route.retry.retry_on.timeout);
  CHECK(route.retry.retry_on.statuses == std::vector<int>{429, 502, 503, 504});
  CHECK(route.retry.backoff.base == Millis{50});
  CHECK(route.retry.backoff.cap == Millis{1000});
  CHECK(route.retry.backoff.jitter == Jitter::full);
  CHECK(route.retry.retry_after.honor);
  CHECK(route.retry.retry_after.max == Millis{5000});
  CHECK(route.retry.idempotency_key == "Idempotency-Key");
  CHECK(route.retry.buffer_limit == 64 * 1024);

  REQUIRE(c.upstreams.size() == 1);
  const Upstream& u = c.upstreams[0];
  CHECK(u.name == "inventory");
  CHECK(u.endpoints == std::vector<HostPort>{{"127.0.0.1", 8081}, {"inventory.svc", 8080}});
  CHECK(u.connect_timeout == Millis{250});
  CHECK(u.pool.max_idle == 64);
  CHECK(u.pool.idle_timeout == Millis{30'000});
  CHECK(u.retry_budget.ratio == 0.1);
  CHECK(u.retry_budget.min_per_second == 5);
  CHECK(u.circuit_breaker.enabled);
  CHECK(u.circuit_breaker.consecutive_failures == 5);
  CHECK(u.circuit_breaker.open_for == Millis{10'000});
  CHECK(u.circuit_breaker.half_open_probes == 1);
  CHECK(c.find_upstream("inventory") == &u);
}

TEST_CASE("config: the shipped config/onelayer.yaml loads without errors") {
  LoadResult r = load_config_file(ONELAYER_TEST_DATA "/../../config/onelayer.yaml");
  INFO(format_errors(r.errors));
  REQUIRE(r.ok());
  const Config& c = *r.config;
  REQUIRE(c.listeners.size() == 1);
  CHECK(c.listeners[0].name == "outbound");
  CHECK(c.listeners[0].listen == HostPort{"127.0.0.1", 15001});
  CHECK(c.admin_listen == HostPort{"127.0.0.1", 9901});
  REQUIRE(c.upstreams.size() == 1);
  CHECK(c.upstreams[0].endpoints == std::vector<HostPort>{{"127.0.0.1", 8081}});
  const Route& flaky = c.listeners[0].routes.at(0);
  CHECK(flaky.name == "demo-flaky");
  CHECK(flaky.match.path_prefix == "/flaky");
  CHECK(flaky.retry.max_attempts == 3);
  CHECK(flaky.retry.backoff.base == Millis{25});
  CHECK(flaky.retry.backoff.cap == Millis{250});
  CHECK(flaky.retry.backoff.jitter == Jitter::full);
  CHECK(c.listeners[0].routes.back().name == "demo");
}

TEST_CASE("config: a minimal file gets every documented default") {
  ConfigPtr c = load_ok(kMinimal);
  CHECK(c->layer_id == default_layer_id());
  CHECK_FALSE(c->layer_id.empty());
  CHECK(c->admin_listen == HostPort{"127.0.0.1", 9901});
  CHECK(c->workers == 1);
  CHECK(c->drain_timeout == Millis{10'000});
  CHECK(c->propagate_baggage);
  CHECK(c->headers == HeaderNames{});
  CHECK(c->headers.retry_owner == "x-retry-owner");

  const Listener& l = c->listeners.at(0);
  CHECK(l.limits == Limits{});
  CHECK(l.limits.max_header_bytes == 32 * 1024);
  CHECK(l.limits.max_body_bytes == 0);
  CHECK(l.listen.port == 0);  // port 0 is allowed for listeners

  const Route& r = l.routes.at(0);
  CHECK(r.match.host.empty());
  CHECK(r.match.path_prefix == "/");
  CHECK(r.match.methods.empty());
  CHECK(r.timeout == Millis{15'000});
  CHECK(r.inner_hops == InnerHops::forbid);
  CHECK_FALSE(r.has_retry);
  CHECK(r.retry.max_attempts == 1);

  const Upstream& u = c->upstreams.at(0);
  CHECK(u.connect_timeout == Millis{1000});
  CHECK(u.pool == PoolConfig{});
  CHECK(u.pool.idle_timeout == Millis{60'000});
  CHECK(u.pool.max_concurrent_streams == 1000);
  CHECK(u.pool.max_requests_per_connection == 0);
  CHECK(u.retry_budget.ratio == 0.2);
  CHECK(u.retry_budget.min_per_second == 10);
  CHECK_FALSE(u.circuit_breaker.enabled);
}

TEST_CASE("config: pool.max_concurrent_streams is read as written") {
  std::string text = kMinimal;
  text += "    pool: { max_concurrent_streams: 2 }\n";
  ConfigPtr c = load_ok(text);
  CHECK(c->upstreams.at(0).pool.max_concurrent_streams == 2);
  CHECK(c->upstreams.at(0).pool.max_idle == 64);
}

TEST_CASE("config: pool.max_requests_per_connection is 0 (no limit) to 1e9 and round-trips") {
  std::string text = kMinimal;
  text += "    pool: { max_requests_per_connection: 300 }\n";
  ConfigPtr c = load_ok(text);
  CHECK(c->upstreams.at(0).pool.max_requests_per_connection == 300);
  test::check_round_trip(*c);
  for (const char* bad : {"-1", "1000000001", "x"}) {
    std::string t = kMinimal;
    t += std::string("    pool: { max_requests_per_connection: ") + bad + " }\n";
    auto e = errors_of(t);
    REQUIRE(e.size() == 1);
    CHECK(e[0].find("upstreams[0].pool.max_requests_per_connection") != std::string::npos);
  }
}

TEST_CASE("config: reuse is safe by default, always when written, and round-trips") {
  CHECK(load_ok(kMinimal)->upstreams.at(0).reuse == ConnectionReuse::safe);
  std::string text = kMinimal;
  text += "    reuse: always\n";
  ConfigPtr c = load_ok(text);
  CHECK(c->upstreams.at(0).reuse == ConnectionReuse::always);
  test::check_round_trip(*c);
  std::string bad = kMinimal;
  bad += "    reuse: never\n";
  auto e = errors_of(bad);
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("upstreams[0].reuse: must be one of safe, always") != std::string::npos);
}

TEST_CASE("config: an empty retry block turns retries on with the documented defaults") {
  std::string yaml = kMinimal;
  const std::string line = "        upstream: up\n";
  yaml.replace(yaml.find(line), line.size(), line + "        retry: {}\n");
  ConfigPtr c = load_ok(yaml);
  const Route& r = c->listeners[0].routes[0];
  CHECK(r.has_retry);
  CHECK(r.retry.max_attempts == 3);
  CHECK_FALSE(r.retry.per_try_timeout.has_value());  // the route timeout applies
  CHECK(r.retry.retry_on == RetryOn{});
  CHECK(r.retry.retry_on.has_status(503));
  CHECK_FALSE(r.retry.retry_on.has_status(500));
  CHECK(r.retry.backoff == Backoff{});
  CHECK(r.retry.backoff.base == Millis{25});
  CHECK(r.retry.retry_after == RetryAfterPolicy{});
  CHECK(r.retry.idempotency_key == "Idempotency-Key");
  CHECK(r.retry.buffer_limit == 64 * 1024);
}

TEST_CASE("config: a null retry block (`retry:` alone) also means the defaults") {
  ConfigPtr c = load_ok(R"(listeners:
  - name: out
    listen: 127.0.0.1:0
    routes:
      - name: r
        upstream: up
        retry:
upstreams:
  - name: up
    endpoints: ["[::1]:8081"]
)");
  CHECK(c->listeners[0].routes[0].has_retry);
  CHECK(c->listeners[0].routes[0].retry.max_attempts == 3);
  CHECK(c->upstreams[0].endpoints[0] == HostPort{"::1", 8081});
}

TEST_CASE("config: routes resolve upstream_index, retry_on replaces the default list") {
  ConfigPtr c = load_ok(R"(layer_id: edge
workers: 4
headers: { retry_owner: X-Owner, baggage_member: Owner }
listeners:
  - name: out
    listen: "[::1]:15001"
    routes:
      - name: a
        match: { host: "*.Svc.Local", methods: [POST] }
        upstream: second
        inner_hops: strip
        retry:
          retry_on: [reset, 500]
          backoff: { jitter: decorrelated }
          idempotency_key: ""
      - name: b
        upstream: first
upstreams:
  - name: first
    endpoints: [a.svc:1]
  - name: second
    endpoints: [b.svc:2]
    circuit_breaker: { enabled: false, open_for: 2s }
)");
  CHECK(c->layer_id == "edge");
  CHECK(c->workers == 4);
  CHECK(c->headers.retry_owner == "x-owner");
  CHECK(c->headers.baggage_member == "owner");
  CHECK(c->headers.retry_attempt == "x-retry-attempt");
  CHECK(c->listeners[0].listen == HostPort{"::1", 15001});
  const Route& a = c->listeners[0].routes[0];
  CHECK(a.upstream_index == 1);
  CHECK(c->listeners[0].routes[1].upstream_index == 0);
  CHECK(a.match.host == "*.svc.local");
  CHECK(a.inner_hops == InnerHops::strip);
  CHECK_FALSE(a.retry.retry_on.connect_failure);
  CHECK(a.retry.retry_on.reset);
  CHECK_FALSE(a.retry.retry_on.timeout);
  CHECK(a.retry.retry_on.statuses == std::vector<int>{500});
  CHECK(a.retry.backoff.jitter == Jitter::decorrelated);
  CHECK(a.retry.idempotency_key.empty());
  CHECK_FALSE(c->upstreams[1].circuit_breaker.enabled);
  CHECK(c->upstreams[1].circuit_breaker.open_for == Millis{2000});
}

// ------------------------------------------------------------------ errors

TEST_CASE("config error: to_string is file:line:col: path: message") {
  ConfigError e{"onelayer.yaml", 14, 7, "listeners[0].routes[1].retry.backoff.cap",
                "must be >= base (50ms)"};
  CHECK(e.to_string() ==
        "onelayer.yaml:14:7: listeners[0].routes[1].retry.backoff.cap: must be >= base (50ms)");
  CHECK(ConfigError{"f.yaml", 0, 0, "", "cannot read file: x"}.to_string() ==
        "f.yaml: cannot read file: x");
  CHECK(ConfigError{"f.yaml", 1, 1, "", "empty configuration"}.to_string() ==
        "f.yaml:1:1: empty configuration");
}

TEST_CASE("config error: backoff cap below base names the cap and the base") {
  CHECK(errors_of(R"(listeners:
  - name: out
    listen: 127.0.0.1:0
    routes:
      - name: r0
        upstream: up
      - name: r1
        upstream: up
        retry:
          backoff:
            base: 50ms
            cap: 20ms
upstreams:
  - name: up
    endpoints: [127.0.0.1:8081]
)") == Lines{"t.yaml:12:18: listeners[0].routes[1].retry.backoff.cap: must be >= base (50ms)"});
}

TEST_CASE("config error: a base above the default cap points at the base") {
  CHECK(errors_of(R"(listeners:
  - name: out
    listen: 127.0.0.1:0
    routes:
      - name: r
        upstream: up
        retry: { backoff: { base: 2s } }
upstreams:
  - name: up
    endpoints: [127.0.0.1:8081]
)") == Lines{"t.yaml:7:35: listeners[0].routes[0].retry.backoff.base: must be <= cap (1s)"});
}

TEST_CASE("config error: missing required keys, each reported at its map") {
  CHECK(errors_of(R"(listeners:
  - routes:
      - match: { path_prefix: /x }
upstreams:
  - endpoints: [127.0.0.1:1]
  - name: bare
)") == Lines{
            "t.yaml:2:5: listeners[0].name: is required",
            "t.yaml:2:5: listeners[0].listen: is required",
            "t.yaml:3:9: listeners[0].routes[0].name: is required",
            "t.yaml:3:9: listeners[0].routes[0].upstream: is required",
            "t.yaml:5:5: upstreams[0].name: is required",
            "t.yaml:6:5: upstreams[1].endpoints: is required (or original_destination: true)",
        });
}

TEST_CASE("config error: no listeners key, and an empty listener list") {
  CHECK(errors_of("workers: 2\n") == Lines{"t.yaml:1:1: listeners: is required"});
  CHECK(errors_of("listeners: []\n") == Lines{"t.yaml:1:12: listeners: must not be empty"});
}

TEST_CASE("config error: empty routes and empty endpoints lists") {
  CHECK(errors_of(R"(listeners:
  - name: out
    listen: 127.0.0.1:0
    routes: []
upstreams:
  - name: up
    endpoints: []
)") == Lines{"t.yaml:4:13: listeners[0].routes: must not be empty",
             "t.yaml:7:16: upstreams[0].endpoints: must not be empty"});
}

TEST_CASE("config error: unknown keys at every level, with a suggestion when close") {
  CHECK(errors_of(R"(listeners:
  - name: out
    listen: 127.0.0.1:0
    colour: blue
    routes:
      - name: r
        upstream: up
        retry: { max_atempts: 2 }
upstreams:
  - name: up
    endpoints: [127.0.0.1:8081]
bogus: 1
)") == Lines{
            "t.yaml:4:5: listeners[0].colour: unknown key",
            "t.yaml:8:18: listeners[0].routes[0].retry.max_atempts: unknown key (did you mean "
            "\"max_attempts\"?)",
            "t.yaml:12:1: bogus: unknown key",
        });
}

TEST_CASE("config error: a key given twice in one map") {
  std::string yaml = std::string("workers: 1\nworkers: 2\n") + kMinimal;
  CHECK(errors_of(yaml) == Lines{"t.yaml:2:1: workers: duplicate key"});
}

TEST_CASE("config error: YAML syntax errors carry the parser's position") {
  CHECK(errors_of("listeners: [\n  a: b\n") ==
        Lines{"t.yaml:3:1: invalid YAML: end of sequence flow not found"});
  CHECK(errors_of("workers: 1\n  bad: indent\n") ==
        Lines{"t.yaml:2:6: invalid YAML: illegal map value"});
  CHECK(errors_of("listeners:\n\t- name: x\n").size() == 1);
  CHECK(errors_of("listen: [::1]:80\n") ==
        Lines{"t.yaml:1:14: invalid YAML: end of map not found"});
}

TEST_CASE("config error: a stray top-level comma is a syntax error, not an endless loop") {
  // yaml-cpp 0.7's LoadAll() loops forever, allocating, on this input.
  CHECK(errors_of(",5") == Lines{"t.yaml:1:1: invalid YAML: unexpected ','"});
  CHECK(errors_of("\n  ,\n") == Lines{"t.yaml:2:3: invalid YAML: unexpected ','"});
}

TEST_CASE("config error: empty file, comment-only file, non-map root, two documents") {
  CHECK(errors_of("") == Lines{"t.yaml:1:1: empty configuration"});
  CHECK(errors_of("# nothing here\n") == Lines{"t.yaml:1:1: empty configuration"});
  CHECK(errors_of("- a\n- b\n") ==
        Lines{"t.yaml:1:1: expected a map of settings at the top level, found a list"});
  CHECK(errors_of("just text\n") ==
        Lines{"t.yaml:1:1: expected a map of settings at the top level, found a scalar"});
  CHECK(errors_of(std::string(kMinimal) + "---\nworkers: 2\n") ==
        Lines{"t.yaml:10:1: more than one YAML document; expected one"});
  CHECK(errors_of(std::string(kMinimal) + "---\n---\n").empty());  // trailing empty documents
}

TEST_CASE("config error: wrong node types never crash and name what was found") {
  CHECK(errors_of(R"(admin: [127.0.0.1:9901]
workers: { n: 1 }
listeners:
  name: out
upstreams: up
)") == Lines{
            "t.yaml:1:8: admin: expected a map, found a list",
            "t.yaml:2:10: workers: expected a scalar value, found a map",
            "t.yaml:4:3: listeners: expected a list, found a map",
            "t.yaml:5:12: upstreams: expected a list, found a scalar",
        });
}

TEST_CASE("config error: an unquoted IPv6 listen address gets a hint") {
  CHECK(errors_of(R"(admin:
  listen: [::1]
)" + std::string(kMinimal)) ==
        Lines{"t.yaml:2:11: admin.listen: expected host:port, found a list (quote IPv6 "
              "addresses: \"[::1]:80\")"});
}

TEST_CASE("config error: bad scalar values, all reported in one load") {
  CHECK(errors_of(R"(layer_id: "two words"
workers: 65
drain_timeout: 10
propagate_baggage: maybe
headers: { retry_attempt: "x bad" }
listeners:
  - name: "out put"
    listen: 127.0.0.1
    limits: { max_header_bytes: 2MiB, max_body_bytes: lots, header_timeout: 0s,
              max_connections: -1 }
    routes:
      - name: r
        upstream: up
        timeout: 1.5
        inner_hops: drop
        match: { host: "inv:80", path_prefix: items, methods: [get, "BAD METHOD"] }
        retry:
          max_attempts: 0
          per_try_timeout: 0.5ms
          retry_on: [5xx, 600, timeout]
          backoff: { jitter: random }
          retry_after: { honor: yes, max: 1d }
          idempotency_key: "Bad Key"
          buffer_limit: 2GiB
upstreams:
  - name: up
    endpoints: [127.0.0.1:0, "localhost"]
    connect_timeout: -1s
    pool: { max_idle: x, max_concurrent_streams: 0 }
    retry_budget: { ratio: 1001, min_per_second: nan }
    circuit_breaker: { consecutive_failures: 0, half_open_probes: 1001 }
)") == Lines{
            "t.yaml:1:11: layer_id: must be a layer name (an HTTP token)",
            "t.yaml:2:10: workers: must be between 1 and 64",
            "t.yaml:3:16: drain_timeout: invalid duration \"10\" (expected a number and a unit: "
            "ms, s, m or h, e.g. 250ms, 1.5s; whole ms)",
            "t.yaml:4:20: propagate_baggage: expected true or false",
            "t.yaml:5:27: headers.retry_attempt: must be a header name (an HTTP token)",
            "t.yaml:7:11: listeners[0].name: must be a name of letters, digits, '-', '_' or '.'",
            "t.yaml:8:13: listeners[0].listen: invalid address \"127.0.0.1\" (expected "
            "host:port, e.g. 127.0.0.1:8080, \"[::1]:8080\" or name.svc:8080)",
            "t.yaml:9:33: listeners[0].limits.max_header_bytes: must be between 1 and 1MiB",
            "t.yaml:9:55: listeners[0].limits.max_body_bytes: invalid size \"lots\" (expected "
            "bytes, or a number and a unit: KiB, MiB, GiB, KB, MB, GB)",
            "t.yaml:9:77: listeners[0].limits.header_timeout: must be greater than 0",
            "t.yaml:10:32: listeners[0].limits.max_connections: expected a whole number",
            "t.yaml:14:18: listeners[0].routes[0].timeout: invalid duration \"1.5\" (expected a "
            "number and a unit: ms, s, m or h, e.g. 250ms, 1.5s; whole ms)",
            "t.yaml:15:21: listeners[0].routes[0].inner_hops: must be one of forbid, strip, pass",
            "t.yaml:16:24: listeners[0].routes[0].match.host: must be a host name or "
            "\"*.suffix\", without a port",
            "t.yaml:16:47: listeners[0].routes[0].match.path_prefix: must start with \"/\"",
            "t.yaml:16:64: listeners[0].routes[0].match.methods[0]: must be upper case (\"GET\")",
            "t.yaml:16:69: listeners[0].routes[0].match.methods[1]: must be a method name (an "
            "HTTP token)",
            "t.yaml:18:25: listeners[0].routes[0].retry.max_attempts: must be between 1 and 10",
            "t.yaml:19:28: listeners[0].routes[0].retry.per_try_timeout: invalid duration "
            "\"0.5ms\" (expected a number and a unit: ms, s, m or h, e.g. 250ms, 1.5s; whole ms)",
            "t.yaml:20:22: listeners[0].routes[0].retry.retry_on[0]: must be connect-failure, "
            "reset, timeout, a status code (100-599) or a gRPC status (cancelled, deadline-exceeded, internal, "
            "resource-exhausted, unavailable)",
            "t.yaml:20:27: listeners[0].routes[0].retry.retry_on[1]: status code must be between "
            "100 and 599",
            "t.yaml:21:30: listeners[0].routes[0].retry.backoff.jitter: must be one of full, "
            "equal, decorrelated, none",
            "t.yaml:22:33: listeners[0].routes[0].retry.retry_after.honor: expected true or false",
            "t.yaml:22:43: listeners[0].routes[0].retry.retry_after.max: invalid duration \"1d\" "
            "(expected a number and a unit: ms, s, m or h, e.g. 250ms, 1.5s; whole ms)",
            "t.yaml:23:28: listeners[0].routes[0].retry.idempotency_key: must be a header name "
            "(an HTTP token) or \"\"",
            "t.yaml:24:25: listeners[0].routes[0].retry.buffer_limit: must be between 0 and 1GiB",
            "t.yaml:27:17: upstreams[0].endpoints[0]: port must be between 1 and 65535",
            "t.yaml:27:30: upstreams[0].endpoints[1]: invalid address \"localhost\" (expected "
            "host:port, e.g. 127.0.0.1:8080, \"[::1]:8080\" or name.svc:8080)",
            "t.yaml:28:22: upstreams[0].connect_timeout: invalid duration \"-1s\" (expected a "
            "number and a unit: ms, s, m or h, e.g. 250ms, 1.5s; whole ms)",
            "t.yaml:29:23: upstreams[0].pool.max_idle: expected a whole number",
            "t.yaml:29:50: upstreams[0].pool.max_concurrent_streams: must be between 1 and 10000",
            "t.yaml:30:28: upstreams[0].retry_budget.ratio: must be between 0 and 1000",
            "t.yaml:30:50: upstreams[0].retry_budget.min_per_second: expected a number",
            "t.yaml:31:46: upstreams[0].circuit_breaker.consecutive_failures: must be between 1 "
            "and 1000000",
            "t.yaml:31:67: upstreams[0].circuit_breaker.half_open_probes: must be between 1 and "
            "1000",
        });
}

TEST_CASE("config error: durations above 720h are refused") {
  std::string yaml = std::string("drain_timeout: 721h\n") + kMinimal;
  CHECK(errors_of(yaml) == Lines{"t.yaml:1:16: drain_timeout: must be at most 720h"});
}

TEST_CASE("config error: a route naming an upstream that does not exist") {
  std::string yaml = kMinimal;
  yaml.replace(yaml.find("upstream: up"), 12, "upstream: nope");
  CHECK(errors_of(yaml) == Lines{"t.yaml:6:19: listeners[0].routes[0].upstream: no upstream "
                                 "named \"nope\""});
}

TEST_CASE("config error: duplicate listener, route and upstream names") {
  CHECK(errors_of(R"(listeners:
  - name: out
    listen: 127.0.0.1:0
    routes:
      - { name: r, upstream: up }
      - { name: r, upstream: up }
  - name: out
    listen: 127.0.0.1:0
    routes:
      - { name: r, upstream: up }
upstreams:
  - { name: up, endpoints: [127.0.0.1:1] }
  - { name: up, endpoints: [127.0.0.1:2] }
)") == Lines{
            "t.yaml:6:17: listeners[0].routes[1].name: duplicate route name \"r\" (also "
            "listeners[0].routes[0].name)",
            "t.yaml:7:11: listeners[1].name: duplicate listener name \"out\" (also "
            "listeners[0].name)",
            "t.yaml:13:13: upstreams[1].name: duplicate upstream name \"up\" (also "
            "upstreams[0].name)",
        });
}

TEST_CASE("config error: two sockets on one address, port 0 never collides") {
  CHECK(errors_of(R"(admin: { listen: 127.0.0.1:15001 }
listeners:
  - name: a
    listen: 127.0.0.1:15001
    routes: [{ name: r, upstream: up }]
  - name: b
    listen: 127.0.0.1:0
    routes: [{ name: r, upstream: up }]
  - name: c
    listen: 127.0.0.1:0
    routes: [{ name: r, upstream: up }]
upstreams:
  - { name: up, endpoints: [127.0.0.1:1] }
)") == Lines{"t.yaml:4:13: listeners[0].listen: address 127.0.0.1:15001 is also used by "
             "admin.listen"});
}

TEST_CASE("config error: protocol header names that coincide") {
  std::string yaml =
      std::string("headers: { retry_owner: X-A, retry_exhausted: x-a }\n") + kMinimal;
  CHECK(errors_of(yaml) == Lines{"t.yaml:1:10: headers: \"retry_exhausted\" and \"retry_owner\" "
                                 "name the same header \"x-a\""});
}

TEST_CASE("config error: an unreadable file names the path as given") {
  LoadResult r = load_config_file("/nonexistent/onelayer.yaml");
  CHECK_FALSE(r.ok());
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].to_string() ==
        "/nonexistent/onelayer.yaml: cannot read file: No such file or directory");
}

TEST_CASE("config error: file errors carry the path as given") {
  std::string path = ONELAYER_TEST_DATA "/config/../config/product_example.yaml";
  CHECK(load_config_file(path).ok());
  LoadResult dir = load_config_file(ONELAYER_TEST_DATA "/config");
  REQUIRE(dir.errors.size() == 1);
  CHECK(dir.errors[0].to_string() ==
        ONELAYER_TEST_DATA "/config: cannot read file: Is a directory");
}

TEST_CASE("config error: deeply nested YAML is an error, not a stack overflow") {
  std::string deep = "workers: " + std::string(5000, '[') + std::string(5000, ']') + "\n";
  std::vector<std::string> errs = errors_of(deep);
  REQUIRE(errs.size() == 1);
  CHECK(errs[0].rfind("t.yaml:", 0) == 0);
}

// ------------------------------------------------------------------ to YAML

TEST_CASE("config_to_yaml: round trip of the documented example gives an equal config") {
  LoadResult first = load_config_file(ONELAYER_TEST_DATA "/config/product_example.yaml");
  REQUIRE(first.ok());
  std::string yaml = config_to_yaml(*first.config);
  LoadResult second = load_config_string(yaml, "config.yaml");
  INFO(yaml);
  INFO(format_errors(second.errors));
  REQUIRE(second.ok());
  CHECK(second.config->same_settings(*first.config));
  CHECK(config_to_yaml(*second.config) == yaml);
}

TEST_CASE("config_to_yaml: defaults are written out and survive the round trip") {
  ConfigPtr c = load_ok(kMinimal);
  std::string yaml = config_to_yaml(*c);
  CHECK(yaml.find("layer_id: " + c->layer_id) != std::string::npos);
  CHECK(yaml.find("drain_timeout: 10s") != std::string::npos);
  CHECK(yaml.find("max_header_bytes: 32KiB") != std::string::npos);
  CHECK(yaml.find("connect_timeout: 1s") != std::string::npos);
  CHECK(yaml.find("retry:") == std::string::npos);  // a route without retries stays so
  LoadResult back = load_config_string(yaml, "config.yaml");
  INFO(yaml);
  REQUIRE(back.ok());
  CHECK(back.config->same_settings(*c));
  CHECK_FALSE(back.config->listeners[0].routes[0].has_retry);
}

TEST_CASE("config_to_yaml: unusual values (IPv6, empty key, odd retry_on) round-trip") {
  ConfigPtr c = load_ok(R"(listeners:
  - name: out
    listen: "[::1]:0"
    routes:
      - name: r
        match: { host: "*.x.y", methods: [GET, PURGE] }
        upstream: up
        retry:
          per_try_timeout: 1500ms
          retry_on: [timeout, 409]
          idempotency_key: ""
          buffer_limit: 1000
upstreams:
  - name: up
    endpoints: ["[fe80::1]:80", a.b:9]
    retry_budget: { ratio: 0.333, min_per_second: 0 }
    circuit_breaker: {}
)");
  test::check_round_trip(*c);
}

TEST_CASE("same_settings: ignores the source, sees any setting") {
  ConfigPtr c = load_ok(kMinimal);
  Config other = *c;
  other.source_path = "elsewhere.yaml";
  other.source_text = "";
  CHECK(other.same_settings(*c));
  other.listeners[0].routes[0].retry.backoff.cap = Millis{2};
  CHECK_FALSE(other.same_settings(*c));
}

TEST_CASE("config: every truncation of a valid file loads or reports errors, never throws") {
  LoadResult full = load_config_file(ONELAYER_TEST_DATA "/config/product_example.yaml");
  REQUIRE(full.ok());
  const std::string& text = full.config->source_text;
  size_t failures = 0;
  for (size_t n = 0; n < text.size(); ++n) {
    LoadResult r;
    REQUIRE_NOTHROW(r = load_config_string(std::string_view(text).substr(0, n), "t.yaml"));
    CHECK(r.ok() == r.errors.empty());
    for (const ConfigError& e : r.errors) CHECK(e.line >= 1);
    if (!r.ok()) ++failures;
  }
  CHECK(failures > 0);  // short prefixes lack the required keys
}
