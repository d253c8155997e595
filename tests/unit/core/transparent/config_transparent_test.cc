// listeners[].mode and detect_timeout, routes' destination and
// destination_port, upstreams' original_destination: defaults, errors, the
// implicit fallback routes and the YAML round trip.
#include <doctest/doctest.h>

#include <string>

#include "../config_test_util.h"
#include "core/config/config_loader.h"
#include "core/request/route_match.h"

using namespace onelayer;
using test::errors_of;
using test::load_ok;

namespace {

const char* kTransparent = R"(listeners:
  - name: outbound
    listen: 127.0.0.1:15001
    mode: transparent
    detect_timeout: 150ms
    routes:
      - name: inventory
        match: { destination: 10.0.0.0/8, destination_port: 8080 }
        upstream: original
      - name: v6
        match: { destination: "fd00::/8" }
        upstream: original
upstreams:
  - name: original
    original_destination: true
)";

bool has_error(const std::vector<std::string>& errs, const std::string& part) {
  for (const std::string& e : errs)
    if (e.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("config transparent: a listener is a proxy listener with a 300ms detect_timeout unless told otherwise") {
  ConfigPtr c = load_ok("listeners:\n  - name: l\n    listen: 127.0.0.1:0\n    routes:\n      - name: r\n"
                        "        upstream: u\nupstreams:\n  - name: u\n    endpoints: [127.0.0.1:1]\n");
  CHECK(c->listeners[0].mode == ListenerMode::proxy);
  CHECK(c->listeners[0].detect_timeout.count() == 300);
  CHECK(c->listeners[0].routes.size() == 1);  // no fallback on a proxy listener
  CHECK(c->upstreams.size() == 1);
}

TEST_CASE("config transparent: keys are read, fallback routes are added last, and /config round-trips") {
  ConfigPtr c = load_ok(kTransparent);
  const Listener& l = c->listeners[0];
  CHECK(l.mode == ListenerMode::transparent);
  CHECK(l.detect_timeout.count() == 150);
  REQUIRE(l.routes.size() == 4);
  REQUIRE(l.routes[0].match.destination);
  CHECK(l.routes[0].match.destination->to_string() == "10.0.0.0/8");
  CHECK(l.routes[0].match.destination_port == 8080);
  CHECK(l.routes[1].match.destination->to_string() == "fd00::/8");
  CHECK(l.routes[2].implicit);
  CHECK(l.routes[2].name == "transparent-fallback");
  CHECK(l.routes[3].name == "transparent-fallback-h2c");
  CHECK(l.routes[2].retry.max_attempts == 1);  // one attempt, never a retry
  REQUIRE(c->upstreams.size() == 3);
  CHECK(c->upstreams[0].original_destination);
  CHECK(c->upstreams[0].endpoints.empty());
  CHECK(c->upstreams[l.routes[3].upstream_index].protocol == UpstreamProtocol::h2c);
  std::string yaml = config_to_yaml(*c);
  CHECK(yaml.find("mode: transparent") != std::string::npos);
  CHECK(yaml.find("detect_timeout: 150ms") != std::string::npos);
  CHECK(yaml.find("destination: 10.0.0.0/8") != std::string::npos);
  CHECK(yaml.find("destination_port: 8080") != std::string::npos);
  CHECK(yaml.find("original_destination: true") != std::string::npos);
  CHECK(yaml.find("transparent-fallback") == std::string::npos);  // implicit: not written
  test::check_round_trip(*c);
}

TEST_CASE("config transparent: route matching by destination and port, fallback routes never matched") {
  ConfigPtr c = load_ok(kTransparent);
  const Listener& l = c->listeners[0];
  Destination in = *parse_destination("10.201.1.2", 8080);
  Destination other_port = *parse_destination("10.201.1.2", 9090);
  Destination v6 = *parse_destination("fd00::5", 80);
  Destination outside = *parse_destination("192.0.2.1", 8080);
  CHECK(match_route(l, "x", "/", "GET", &in) == &l.routes[0]);
  CHECK(match_route(l, "x", "/", "GET", &other_port) == nullptr);
  CHECK(match_route(l, "x", "/", "GET", &v6) == &l.routes[1]);
  CHECK(match_route(l, "x", "/", "GET", &outside) == nullptr);
  CHECK(match_route(l, "x", "/", "GET", nullptr) == nullptr);  // no destination: no destination route
}

TEST_CASE("config transparent: bad values and keys out of place are errors that say why") {
  auto errs = errors_of(R"(listeners:
  - name: l
    listen: 127.0.0.1:0
    mode: sidecar
    routes:
      - name: r
        match: { destination: 10.0.0.1/8, destination_port: 0 }
        upstream: u
upstreams:
  - name: u
    endpoints: [127.0.0.1:1]
)");
  CHECK(has_error(errs, "listeners[0].mode: must be one of"));
  CHECK(has_error(errs, "destination: has bits set past the prefix length"));
  CHECK(has_error(errs, "destination_port: must be between 1 and 65535"));

  errs = errors_of(R"(listeners:
  - name: l
    listen: 127.0.0.1:0
    detect_timeout: 1s
    routes:
      - name: r
        match: { destination_port: 80 }
        upstream: o
upstreams:
  - name: o
    original_destination: true
)");
  CHECK(has_error(errs, "listeners[0].detect_timeout: needs mode: transparent"));
  CHECK(has_error(errs, "listeners[0].routes[0].match: needs mode: transparent"));
  CHECK(has_error(errs, "upstream: upstream \"o\" has original_destination: true and needs a listener with mode: transparent"));

  errs = errors_of(R"(listeners:
  - name: l
    listen: 127.0.0.1:0
    routes:
      - name: r
        upstream: u
upstreams:
  - name: u
  - name: o
    original_destination: true
    endpoints: [127.0.0.1:1]
)");
  CHECK(has_error(errs, "upstreams[0].endpoints: is required (or original_destination: true)"));
  CHECK(has_error(errs, "upstreams[1].original_destination: an upstream with original_destination: true has no endpoints"));
}

TEST_CASE("config transparent: the fallback names are reserved") {
  std::string y = kTransparent;
  y += "  - name: transparent-fallback\n    endpoints: [127.0.0.1:1]\n";
  CHECK(has_error(errors_of(y), "reserved"));
}
