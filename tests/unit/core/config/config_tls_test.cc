// The keys of TLS, upgrade tunnels and the Via and X-Forwarded-For switches: defaults, values as
// written, the errors of bad ones, and the YAML round trip.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/config/config_loader.h"
#include "config_test_util.h"

using namespace onelayer;

namespace {

std::string with(std::string_view listener_extra, std::string_view upstream_extra, std::string_view top = "") {
  std::string y(top);
  y += "listeners:\n  - name: out\n    listen: 127.0.0.1:0\n";
  y += listener_extra;
  y += "    routes:\n      - name: r\n        upstream: up\n";
  y += "upstreams:\n  - name: up\n    endpoints: [127.0.0.1:8443]\n";
  y += upstream_extra;
  return y;
}

using test::errors_of;
using test::load_ok;

void check_round_trip(const ConfigPtr& c) { test::check_round_trip(*c); }

}  // namespace

TEST_CASE("config tls: defaults are plain TCP, http1, Via on, websocket upgrades") {
  ConfigPtr c = load_ok(with("", ""));
  CHECK(c->via);
  CHECK(c->via_on(c->listeners[0]));
  CHECK(c->listeners[0].upgrades == std::vector<std::string>{"websocket"});
  CHECK_FALSE(c->listeners[0].tls);
  CHECK(c->upstreams[0].protocol == UpstreamProtocol::http1);
  CHECK_FALSE(c->upstreams[0].tls);
}

TEST_CASE("config tls: `tls: {}` turns TLS on with verification and every default") {
  ConfigPtr c = load_ok(with("", "    tls: {}\n"));
  REQUIRE(c->upstreams[0].tls);
  const UpstreamTls& t = *c->upstreams[0].tls;
  CHECK(t.verify);
  CHECK(t.sni.empty());
  CHECK(t.ca_file.empty());
  CHECK(t.alpn.empty());
  check_round_trip(c);
}

TEST_CASE("config tls: every upstream tls key as written, and the round trip keeps them") {
  ConfigPtr c = load_ok(with("", "    protocol: auto\n    tls: { sni: API.Example.com, verify: false, ca_file: /ca.pem, "
                                 "cert_file: /c.pem, key_file: /k.pem, alpn: [http/1.1] }\n"));
  const Upstream& u = c->upstreams[0];
  CHECK(u.protocol == UpstreamProtocol::auto_);
  REQUIRE(u.tls);
  CHECK(u.tls->sni == "api.example.com");
  CHECK_FALSE(u.tls->verify);
  CHECK(u.tls->ca_file == "/ca.pem");
  CHECK(u.tls->cert_file == "/c.pem");
  CHECK(u.tls->key_file == "/k.pem");
  CHECK(u.tls->alpn == std::vector<std::string>{"http/1.1"});
  check_round_trip(c);
}

TEST_CASE("config h2: HTTP/2 over TLS needs a tls block and offers ALPN h2 alone, and h2c does not go with tls") {
  ConfigPtr c = load_ok(with("", "    protocol: h2\n    tls: {}\n"));
  CHECK(c->upstreams[0].protocol == UpstreamProtocol::h2);
  CHECK(c->upstreams[0].tls->alpn.empty());  // follows protocol: h2
  check_round_trip(c);
  ConfigPtr given = load_ok(with("", "    protocol: h2\n    tls: { alpn: [h2] }\n"));
  CHECK(given->upstreams[0].tls->alpn == std::vector<std::string>{"h2"});
  check_round_trip(given);

  auto e = errors_of(with("", "    protocol: h2\n"));
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("upstreams[0].protocol: h2 is HTTP/2 over TLS and needs a tls block (cleartext: h2c)") !=
        std::string::npos);
  e = errors_of(with("", "    protocol: h2\n    tls: { alpn: [h2, http/1.1] }\n"));
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("tls.alpn must be [h2] or left out") != std::string::npos);
  e = errors_of(with("", "    protocol: h2c\n    tls: {}\n"));
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("upstreams[0].protocol: h2c is HTTP/2 over cleartext TCP and cannot go with a tls block") !=
        std::string::npos);
  e = errors_of(with("", "    protocol: auto\n"));
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("needs a tls block") != std::string::npos);
  e = errors_of(with("", "    protocol: spdy\n"));
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("must be one of http1, h2c, h2, auto") != std::string::npos);
}

TEST_CASE("config h2c: an upstream speaks HTTP/2 over cleartext, and the round trip keeps it") {
  ConfigPtr c = load_ok(with("", "    protocol: h2c\n"));
  CHECK(c->upstreams[0].protocol == UpstreamProtocol::h2c);
  CHECK_FALSE(c->upstreams[0].tls);
  check_round_trip(c);
  // Pool settings apply to h2c connections too (idle_timeout closes an
  // idle one).
  ConfigPtr p = load_ok(with("", "    protocol: h2c\n    pool: { idle_timeout: 5s }\n"));
  CHECK(p->upstreams[0].pool.idle_timeout == Millis(5'000));
  check_round_trip(p);
}

TEST_CASE("config h2c and h2: an active health check is allowed (it speaks HTTP/2), so is outlier detection") {
  for (const char* up :
       {"    protocol: h2c\n", "    protocol: h2\n    tls: {}\n", "    protocol: auto\n    tls: {}\n"}) {
    ConfigPtr c = load_ok(with("", std::string(up) + "    health_check: { path: /healthz }\n"));
    CHECK(c->upstreams[0].health_check.enabled);
    CHECK(c->upstreams[0].health_check.path == "/healthz");
    check_round_trip(c);
  }
  ConfigPtr c = load_ok(with("", "    protocol: h2c\n    outlier_detection: { consecutive_failures: 3 }\n"));
  CHECK(c->upstreams[0].outlier_detection.consecutive_failures == 3);
}

TEST_CASE("config tls: a client certificate needs its key and the other way round, alpn names http/1.1") {
  auto e = errors_of(with("", "    tls: { cert_file: /c.pem }\n"));
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("upstreams[0].tls.cert_file: needs key_file too") != std::string::npos);
  e = errors_of(with("", "    tls: { key_file: /k.pem }\n"));
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("upstreams[0].tls.key_file: needs cert_file too") != std::string::npos);
  e = errors_of(with("", "    tls: { alpn: [h2] }\n"));
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("upstreams[0].tls.alpn[0]: h2 is offered only with protocol: h2 or auto (protocol http1 speaks") !=
        std::string::npos);
  // auto offers both (h2 first by default); an explicit list may name h2.
  ConfigPtr c = load_ok(with("", "    protocol: auto\n    tls: { alpn: [h2, http/1.1] }\n"));
  CHECK(c->upstreams[0].tls->alpn == std::vector<std::string>{"h2", "http/1.1"});
  e = errors_of(with("", "    tls: { alpn: [spdy/3] }\n"));
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("must be http/1.1 or h2") != std::string::npos);
  e = errors_of(with("", "    tls: { sni: \"a b\", verify: maybe, ca_file: \"\", extra: 1 }\n"));
  CHECK(e.size() == 4);
}

TEST_CASE("config tls: listener tls needs both files, upgrades are tokens, lower-cased, replaceable") {
  ConfigPtr c = load_ok(with("    tls: { cert_file: /s.pem, key_file: /s.key }\n    upgrades: [WebSocket, my-proto]\n", ""));
  REQUIRE(c->listeners[0].tls);
  CHECK(c->listeners[0].tls->cert_file == "/s.pem");
  CHECK(c->listeners[0].upgrades == std::vector<std::string>{"websocket", "my-proto"});
  check_round_trip(c);
  ConfigPtr none = load_ok(with("    upgrades: []\n", ""));
  CHECK(none->listeners[0].upgrades.empty());
  check_round_trip(none);
  auto e = errors_of(with("    tls: { cert_file: /s.pem }\n", ""));
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("listeners[0].tls.key_file: is required") != std::string::npos);
  e = errors_of(with("    upgrades: [\"not a token\", h2c]\n", ""));
  CHECK(e.size() == 2);
}

// A switch set at the top level that a listener may override (`via`,
// `x_forwarded_for`): on by default, top-level off with the listener back
// on, top-level on with the listener off; both kept by the round trip.
namespace {

void check_listener_switch(const std::string& key, bool Config::*top, bool (Config::*on)(const Listener&) const) {
  ConfigPtr d = load_ok(with("", ""));
  CHECK((*d).*top);
  CHECK(((*d).*on)(d->listeners[0]));
  ConfigPtr c = load_ok(with("    " + key + ": true\n", "", key + ": false\n"));
  CHECK_FALSE((*c).*top);
  CHECK(((*c).*on)(c->listeners[0]));
  check_round_trip(c);
  ConfigPtr l = load_ok(with("    " + key + ": false\n", ""));
  CHECK((*l).*top);
  CHECK_FALSE(((*l).*on)(l->listeners[0]));
  check_round_trip(l);
  CHECK_FALSE(l->same_settings(*d));
  CHECK(errors_of(with("", "", key + ": sometimes\n")).size() == 1);
}

}  // namespace

TEST_CASE("config via: top-level off, a listener may turn it back on, and the round trip keeps both") {
  check_listener_switch("via", &Config::via, &Config::via_on);
}

TEST_CASE("config x_forwarded_for: on by default, top-level off, a listener may override, the round trip keeps both") {
  check_listener_switch("x_forwarded_for", &Config::x_forwarded_for, &Config::x_forwarded_for_on);
}
