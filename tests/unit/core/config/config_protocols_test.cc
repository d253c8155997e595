// listeners[].protocols, limits.max_concurrent_streams and access_log: defaults, the
// lists that are allowed, the errors of bad ones, and the YAML round trip.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/config/config_loader.h"
#include "config_test_util.h"

using namespace onelayer;

namespace {

std::string listener_with(std::string_view extra) {
  std::string y = "listeners:\n  - name: edge\n    listen: 127.0.0.1:0\n";
  y += extra;
  y += "    routes:\n      - name: r\n        upstream: up\n";
  y += "upstreams:\n  - name: up\n    endpoints: [127.0.0.1:8080]\n";
  return y;
}

using test::errors_of;
using test::load_ok;

}  // namespace

TEST_CASE("config protocols: a listener speaks http1 and h2c unless told otherwise, 100 streams") {
  ConfigPtr c = load_ok(listener_with(""));
  const Listener& l = c->listeners[0];
  CHECK(l.protocols.http1);
  CHECK(l.protocols.h2c);
  CHECK(l.limits.max_concurrent_streams == 100);
  test::check_round_trip(*c);
}

TEST_CASE("config protocols: either protocol alone, in any order, and the round trip keeps it") {
  ConfigPtr c = load_ok(listener_with("    protocols: [h2c]\n"));
  CHECK_FALSE(c->listeners[0].protocols.http1);
  CHECK(c->listeners[0].protocols.h2c);
  test::check_round_trip(*c);

  c = load_ok(listener_with("    protocols: [http1]\n"));
  CHECK(c->listeners[0].protocols.http1);
  CHECK_FALSE(c->listeners[0].protocols.h2c);
  test::check_round_trip(*c);
  CHECK(config_to_yaml(*c).find("protocols: [http1]") != std::string::npos);

  c = load_ok(listener_with("    protocols: [h2c, http1]\n"));
  CHECK(c->listeners[0].protocols == ListenerProtocols{});
}

TEST_CASE("config protocols: an empty list or an unknown name is refused and says what is allowed") {
  auto e = errors_of(listener_with("    protocols: []\n"));
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("listeners[0].protocols: must not be empty") != std::string::npos);

  e = errors_of(listener_with("    protocols: [http1, h2]\n"));
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("listeners[0].protocols[1]: must be http1 or h2c") != std::string::npos);
  CHECK(e[0].find("\"h2\"") != std::string::npos);

  e = errors_of(listener_with("    protocols: http1\n"));
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("expected a list") != std::string::npos);
}

TEST_CASE("config protocols: max_concurrent_streams is 1 to 10000 and round-trips") {
  ConfigPtr c = load_ok(listener_with("    limits: { max_concurrent_streams: 7 }\n"));
  CHECK(c->listeners[0].limits.max_concurrent_streams == 7);
  test::check_round_trip(*c);
  for (const char* bad : {"0", "10001", "-1", "many"}) {
    auto e = errors_of(listener_with(std::string("    limits: { max_concurrent_streams: ") + bad + " }\n"));
    INFO(bad);
    REQUIRE(e.size() == 1);
    CHECK(e[0].find("listeners[0].limits.max_concurrent_streams") != std::string::npos);
  }
}

TEST_CASE("config listener access_log: on unless false, refused when not a bool, and round-trips") {
  ConfigPtr c = load_ok(listener_with(""));
  CHECK(c->listeners[0].access_log);
  c = load_ok(listener_with("    access_log: false\n"));
  CHECK_FALSE(c->listeners[0].access_log);
  test::check_round_trip(*c);
  CHECK(config_to_yaml(*c).find("access_log: false") != std::string::npos);

  auto e = errors_of(listener_with("    access_log: sometimes\n"));
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("listeners[0].access_log: expected true or false") != std::string::npos);
}
