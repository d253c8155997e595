// Request-head verdicts before and after routing: each refusal with its
// status, reason and detail, and the header changes an accepted head gets.
#include "core/request/request_validation.h"

#include <doctest/doctest.h>

#include "core/config/config_loader.h"

using namespace onelayer;

namespace {

RequestHeadFacts get(std::string_view target, uint8_t minor = 1) {
  RequestHeadFacts f;
  f.method = "GET";
  f.target = target;
  f.http_minor = minor;
  return f;
}

Headers host_a() { return {{"Host", "a"}}; }

}  // namespace

TEST_CASE("request: an origin-form request goes on, routed by Host, target unchanged") {
  Headers h = host_a();
  RequestVerdict v = check_request_head(get("/items?id=1"), h, UnderscoreHeaders::drop);
  CHECK_FALSE(v.refused());
  CHECK(v.host == "a");
  CHECK(v.path == "/items?id=1");
  CHECK(v.upstream_target == "/items?id=1");
  CHECK(h == host_a());
}

TEST_CASE("request: an HTTP/2 head (translated, authority as Host) goes on, without an authority it is refused") {
  RequestHeadFacts f = get("/rpc", 0);
  f.http_major = 2;
  f.chunked = true;  // a body of unknown length follows
  Headers h = host_a();
  RequestVerdict v = check_request_head(f, h, UnderscoreHeaders::drop);
  CHECK_FALSE(v.refused());
  CHECK(v.host == "a");
  CHECK(v.upstream_target == "/rpc");
  Headers none;
  v = check_request_head(f, none, UnderscoreHeaders::drop);
  CHECK(v.status == 400);
  CHECK(std::string_view(v.detail) == "missing_host");
}

TEST_CASE("request: the absolute-form authority replaces Host and is what routing sees") {
  Headers h{{"Host", "internal.admin"}, {"Accept", "*/*"}};
  RequestVerdict v = check_request_head(get("http://public/adm"), h, UnderscoreHeaders::drop);
  REQUIRE_FALSE(v.refused());
  CHECK(v.host == "public");
  CHECK(v.path == "/adm");
  CHECK(v.upstream_target == "/adm");
  CHECK(h == Headers{{"Host", "public"}, {"Accept", "*/*"}});
}

TEST_CASE("request: an absolute-form HTTP/1.0 request without Host gets the authority as Host") {
  Headers h;
  RequestVerdict v = check_request_head(get("HTTPS://svc:8443?q=1", 0), h, UnderscoreHeaders::drop);
  REQUIRE_FALSE(v.refused());
  CHECK(v.upstream_target == "/?q=1");
  CHECK(h == Headers{{"Host", "svc:8443"}});
}

TEST_CASE("request: absolute-form on HTTP/1.1 still needs a Host field") {
  Headers h;
  RequestVerdict v = check_request_head(get("http://public/"), h, UnderscoreHeaders::drop);
  CHECK(v.status == 400);
  CHECK(std::string(v.detail) == "missing_host");
}

TEST_CASE("request: absolute-form with userinfo or a bad authority is refused") {
  for (const char* t : {"http://user@public/", "http:///x", "http://pub lic/", "http://a b/"}) {
    Headers h = host_a();
    RequestVerdict v = check_request_head(get(t), h, UnderscoreHeaders::drop);
    CHECK_MESSAGE(v.status == 400, t);
  }
}

TEST_CASE("request: OPTIONS * goes on, * with another method is refused") {
  Headers h = host_a();
  RequestHeadFacts f = get("*");
  f.method = "OPTIONS";
  RequestVerdict v = check_request_head(f, h, UnderscoreHeaders::drop);
  CHECK_FALSE(v.refused());
  CHECK(v.path == "*");
  CHECK(check_request_head(get("*"), h, UnderscoreHeaders::drop).status == 400);
}

TEST_CASE("request: each refusal before routing is 400 bad_request with its own detail") {
  struct Case {
    RequestHeadFacts facts;
    Headers headers;
    const char* detail;
  };
  RequestHeadFacts connect = get("a:443");
  connect.method = "CONNECT";
  RequestHeadFacts h09 = get("/");
  h09.http_major = 0;
  h09.http_minor = 9;
  RequestHeadFacts folded = get("/");
  folded.obs_fold = true;
  RequestHeadFacts huge = get("/");
  huge.has_content_length = true;
  huge.content_length = kMaxContentLength + 1;
  Case cases[] = {
      {connect, host_a(), "CONNECT is not supported: onelayer originates TLS itself"},
      {h09, host_a(), "only HTTP/1.x and HTTP/2 are served"},
      {get("/a\tb"), host_a(), "invalid byte in the request target"},
      {get("/\x7f"), host_a(), "invalid byte in the request target"},
      {get("/\xa0"), host_a(), "invalid byte in the request target"},
      {get("/"), {{"Host", "a"}, {"Transfer-Encoding", "gzip, chunked"}}, "unsupported Transfer-Encoding"},
      {huge, host_a(), "Content-Length above 2^53-1"},
      {folded, host_a(), "obs_fold"},
      {get("/"), {{"Host", "a"}, {"Host", "a"}}, "duplicate_host"},
      {get("ftp://a/"), host_a(), "request target form not supported"},
  };
  for (Case& c : cases) {
    RequestVerdict v = check_request_head(c.facts, c.headers, UnderscoreHeaders::allow);
    CHECK_MESSAGE(v.status == 400, c.detail);
    CHECK(std::string(v.reason) == "bad_request");
    CHECK(std::string(v.detail) == c.detail);
  }
}

TEST_CASE("request: Content-Length up to 2^53-1 goes on, one more is refused") {
  Headers h = host_a();
  RequestHeadFacts f = get("/");
  f.has_content_length = true;
  f.content_length = kMaxContentLength;
  CHECK_FALSE(check_request_head(f, h, UnderscoreHeaders::drop).refused());
  f.content_length = kMaxContentLength + 1;
  CHECK(check_request_head(f, h, UnderscoreHeaders::drop).status == 400);
  f.content_length = UINT64_MAX;
  CHECK(check_request_head(f, h, UnderscoreHeaders::drop).status == 400);
}

TEST_CASE("request: underscore names are dropped, refused or kept as the listener says") {
  const Headers in{{"Host", "a"}, {"Transfer_Encoding", "chunked"}, {"Content-Length", "5"}, {"X_Real_IP", "1"}};
  Headers dropped = in;
  RequestVerdict v = check_request_head(get("/"), dropped, UnderscoreHeaders::drop);
  CHECK_FALSE(v.refused());
  CHECK(v.underscore_fields_dropped == 2);
  CHECK(dropped == Headers{{"Host", "a"}, {"Content-Length", "5"}});

  Headers rejected = in;
  v = check_request_head(get("/"), rejected, UnderscoreHeaders::reject);
  CHECK(v.status == 400);
  CHECK(std::string(v.detail) == "header name with an underscore");

  Headers allowed = in;
  v = check_request_head(get("/"), allowed, UnderscoreHeaders::allow);
  CHECK_FALSE(v.refused());
  CHECK(v.underscore_fields_dropped == 0);
  CHECK(allowed == in);
}

TEST_CASE("request: after routing, max_body_bytes gives 413 and an unknown Expect 417") {
  bool cont = true;
  RequestHeadFacts f = get("/");
  f.has_content_length = true;
  f.content_length = 101;
  RequestVerdict v = check_routed_request(f, host_a(), 100, &cont);
  CHECK(v.status == 413);
  CHECK(std::string(v.reason) == "body_too_large");
  CHECK_FALSE(cont);
  CHECK_FALSE(check_routed_request(f, host_a(), 0, &cont).refused());  // 0: no limit
  CHECK_FALSE(check_routed_request(f, host_a(), 101, &cont).refused());

  v = check_routed_request(get("/"), {{"Host", "a"}, {"Expect", "teapot"}}, 0, &cont);
  CHECK(v.status == 417);
  v = check_routed_request(get("/"), {{"Host", "a"}, {"Expect", "100-Continue"}}, 0, &cont);
  CHECK_FALSE(v.refused());
  CHECK(cont);
}

TEST_CASE("config: headers_with_underscores takes drop, reject or allow, default drop") {
  auto load = [](std::string_view value) {
    std::string yaml = "listeners:\n  - name: l\n    listen: 127.0.0.1:1\n";
    if (!value.empty()) yaml += "    headers_with_underscores: " + std::string(value) + "\n";
    yaml += "    routes: [{name: r, upstream: u}]\nupstreams:\n  - name: u\n    endpoints: [127.0.0.1:2]\n";
    return load_config_string(yaml, "t.yaml");
  };
  LoadResult r = load("");
  REQUIRE(r.ok());
  CHECK(r.config->listeners[0].headers_with_underscores == UnderscoreHeaders::drop);
  r = load("reject");
  REQUIRE(r.ok());
  CHECK(r.config->listeners[0].headers_with_underscores == UnderscoreHeaders::reject);
  std::string yaml = config_to_yaml(*r.config);
  CHECK(yaml.find("headers_with_underscores: reject") != std::string::npos);
  r = load("allow");
  REQUIRE(r.ok());
  CHECK(r.config->listeners[0].headers_with_underscores == UnderscoreHeaders::allow);
  r = load("keep");
  REQUIRE_FALSE(r.ok());
  CHECK(r.errors[0].to_string() ==
        "t.yaml:4:31: listeners[0].headers_with_underscores: must be one of drop, reject, allow");
}

TEST_CASE("response: transfer codings other than a final chunked are kept, chunked twice is refused") {
  CHECK(response_transfer_codings({}) == std::string());
  CHECK(response_transfer_codings({{"Transfer-Encoding", "chunked"}}) == std::string());
  CHECK(response_transfer_codings({{"Transfer-Encoding", "gzip"}}) == std::string("gzip"));
  CHECK(response_transfer_codings({{"Transfer-Encoding", "gzip, chunked"}}) == std::string("gzip"));
  CHECK(response_transfer_codings({{"Transfer-Encoding", "gzip"}, {"transfer-encoding", "br, chunked"}}) ==
        std::string("gzip, br"));
  CHECK_FALSE(response_transfer_codings({{"Transfer-Encoding", "chunked, chunked"}}).has_value());
  CHECK_FALSE(response_transfer_codings({{"Transfer-Encoding", "chunked, gzip"}}).has_value());
}

TEST_CASE("response: a reason phrase is clean only when it is visible ASCII, SP and HTAB") {
  CHECK(is_clean_reason_phrase("OK"));
  CHECK(is_clean_reason_phrase("Not\tFound here"));
  CHECK_FALSE(is_clean_reason_phrase(""));
  CHECK_FALSE(is_clean_reason_phrase(std::string_view("O\0K", 3)));
  CHECK_FALSE(is_clean_reason_phrase("O\x01K"));
  CHECK_FALSE(is_clean_reason_phrase("OK\x7f"));
  CHECK_FALSE(is_clean_reason_phrase("\x1b[31mred"));
  CHECK_FALSE(is_clean_reason_phrase("caf\xc3\xa9"));
}

TEST_CASE("request: CONNECT is refused with a hint that names the tls block to configure instead") {
  Headers h{{"Host", "a:443"}};
  RequestHeadFacts f = get("a:443");
  f.method = "CONNECT";
  RequestVerdict v = check_request_head(f, h, UnderscoreHeaders::drop);
  CHECK(v.status == 400);
  std::string hint = v.hint;
  CHECK(hint.find("originates TLS") != std::string::npos);
  CHECK(hint.find("upstreams[].tls") != std::string::npos);
}

TEST_CASE("upgrade: websocket with Connection: upgrade is a request to switch, the allowed tokens go on") {
  std::vector<std::string> allowed{"websocket"};
  Headers h{{"Host", "a"}, {"Connection", "keep-alive, Upgrade"}, {"Upgrade", "WebSocket"}};
  UpgradeVerdict v = check_upgrade(get("/ws"), h, allowed);
  CHECK(v.requested);
  CHECK_FALSE(v.refused());
  CHECK(v.protocols == "WebSocket");
  Headers mixed{{"Host", "a"}, {"Connection", "upgrade"}, {"Upgrade", "h2c, websocket/13"}};
  v = check_upgrade(get("/ws"), mixed, allowed);
  CHECK(v.protocols == "websocket/13");
}

TEST_CASE("upgrade: without the Connection option it is no upgrade, others are refused with what is forwarded") {
  std::vector<std::string> allowed{"websocket"};
  Headers bare{{"Host", "a"}, {"Upgrade", "websocket"}};
  CHECK_FALSE(check_upgrade(get("/"), bare, allowed).requested);
  Headers h2c{{"Host", "a"}, {"Connection", "Upgrade, HTTP2-Settings"}, {"Upgrade", "h2c"}};
  CHECK_FALSE(check_upgrade(get("/"), h2c, allowed).requested);  // an offer clients fall back from
  Headers irc{{"Host", "a"}, {"Connection", "Upgrade"}, {"Upgrade", "h2c, IRC/6.9"}};
  UpgradeVerdict v = check_upgrade(get("/"), irc, allowed);
  CHECK(v.requested);
  CHECK(v.status == 400);
  CHECK(std::string(v.reason) == "upgrade_not_allowed");
  CHECK(v.hint.find("Upgrade: IRC/6.9") != std::string::npos);
  CHECK(v.hint.find("forwards Upgrade: websocket") != std::string::npos);
  Headers ws{{"Host", "a"}, {"Connection", "upgrade"}, {"Upgrade", "websocket"}};
  v = check_upgrade(get("/"), ws, {});
  CHECK(std::string(v.reason) == "upgrade_not_allowed");
  CHECK(v.hint.find("forwards no upgrades") != std::string::npos);
  CHECK(check_upgrade(get("/", 0), ws, allowed).status == 400);
  RequestHeadFacts body = get("/");
  body.has_content_length = true;
  body.content_length = 3;
  CHECK(std::string(check_upgrade(body, ws, allowed).detail) == "Upgrade request with a body");
}

TEST_CASE("request: an unsupported Transfer-Encoding is refused before an underscored name or a bad field") {
  // Transfer-Encoding and the underscored names are read in one pass; the
  // order of the refusals stays: coding, length, fields, underscores.
  Headers h{{"X_A", "1"}, {"Host", "a"}, {"transfer-ENCODING", "gzip"}, {"Bad Name", "1"}};
  RequestVerdict v = check_request_head(get("/"), h, UnderscoreHeaders::reject);
  CHECK(std::string(v.detail) == "unsupported Transfer-Encoding");
  Headers fields{{"X_A", "1"}, {"Host", "a"}, {"Bad Name", "1"}};
  CHECK(std::string(check_request_head(get("/"), fields, UnderscoreHeaders::reject).detail) == "invalid_name");
  Headers underscored{{"X_A", "1"}, {"Host", "a"}, {"X_B", "2"}, {"x", "3"}};
  CHECK(std::string(check_request_head(get("/"), underscored, UnderscoreHeaders::reject).detail) ==
        "header name with an underscore");
  RequestVerdict dropped = check_request_head(get("/"), underscored, UnderscoreHeaders::drop);
  CHECK(dropped.underscore_fields_dropped == 2);
  CHECK(dropped.host == "a");  // the Host validation found, after the underscored fields went
  CHECK(underscored == Headers{{"Host", "a"}, {"x", "3"}});
}

TEST_CASE("request: the routing host is the one Host field in any case, or none on HTTP/1.0") {
  Headers h{{"accept", "*/*"}, {"hOST", "b.example:80"}};
  CHECK(check_request_head(get("/"), h, UnderscoreHeaders::drop).host == "b.example:80");
  Headers none{{"accept", "*/*"}};
  RequestVerdict v = check_request_head(get("/", 0), none, UnderscoreHeaders::drop);
  CHECK_FALSE(v.refused());
  CHECK(v.host.empty());
}
