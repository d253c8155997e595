#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/h2wire/h2_message_rules.h"

using namespace onelayer;
using Field = H2MessageRules::Field;
using Side = H2MessageRules::Side;
using Fields = std::vector<std::pair<std::string, std::string>>;

namespace {

const Fields kGet = {{":method", "GET"}, {":scheme", "http"}, {":authority", "a.example"}, {":path", "/x"}};

// Feeds one block; false as soon as a field is malformed or the block's end is.
bool block(H2MessageRules& r, const Fields& fields, bool end_stream) {
  r.begin_block();
  for (const auto& [n, v] : fields)
    if (r.field(n, v) == Field::malformed) return false;
  return r.end_block(end_stream);
}

bool request_ok(const Fields& fields, bool end_stream = true) {
  H2MessageRules r(Side::request);
  return block(r, fields, end_stream);
}

Fields with(Fields base, const Fields& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

Fields without(Fields base, const std::string& name) {
  std::erase_if(base, [&](const auto& f) { return f.first == name; });
  return base;
}

H2MessageRules response_to(const char* method) {
  H2MessageRules r(Side::response);
  r.expect_response_to(method);
  return r;
}

}  // namespace

TEST_CASE("H2MessageRulesTellEachFieldItsKind") {
  H2MessageRules r(Side::request);
  r.begin_block();
  CHECK(r.field(":method", "GET") == Field::method);
  CHECK(r.field(":scheme", "https") == Field::scheme);
  CHECK(r.field(":authority", "a.example:8443") == Field::authority);
  CHECK(r.field(":path", "/a?b=c") == Field::path);
  CHECK(r.field("accept", "*/*") == Field::regular);
  CHECK(r.end_block(true));
  H2MessageRules s(Side::response);
  s.begin_block();
  CHECK(s.field(":status", "200") == Field::status);
  CHECK(s.status() == 200);
}

TEST_CASE("H2MessageRulesTakeAWellFormedRequestWithAndWithoutABody") {
  CHECK(request_ok(kGet));
  CHECK(request_ok(with(without(kGet, ":authority"), {{"host", "a.example"}})));
  CHECK(request_ok(with(kGet, {{"te", "trailers"}, {"x-empty", ""}, {"x-obs", "a\x80\xff"}, {"x-tab", "a\tb"}})));
  H2MessageRules r(Side::request);
  CHECK(block(r, with(kGet, {{"content-length", "5"}}), false));
  CHECK(r.content_length() == 5);
  CHECK(r.data(2));
  CHECK(r.data(3));
  CHECK(r.end_stream());
}

TEST_CASE("H2MessageRulesRefuseRequestsWithoutTheirPseudoHeaders") {
  CHECK_FALSE(request_ok(without(kGet, ":method")));
  CHECK_FALSE(request_ok(without(kGet, ":scheme")));
  CHECK_FALSE(request_ok(without(kGet, ":path")));
  CHECK_FALSE(request_ok(without(kGet, ":authority")));  // and no host
}

TEST_CASE("H2MessageRulesRefuseMisplacedRepeatedEmptyOrUnknownPseudoHeaders") {
  CHECK_FALSE(request_ok(with(kGet, {{":path", "/y"}})));
  CHECK_FALSE(request_ok({{":method", "GET"}, {"accept", "*/*"}, {":scheme", "http"}, {":authority", "a"}, {":path", "/"}}));
  CHECK_FALSE(request_ok(with(kGet, {{":foo", "x"}})));
  CHECK_FALSE(request_ok(with(kGet, {{":status", "200"}})));
  CHECK_FALSE(request_ok(with(kGet, {{":protocol", "websocket"}})));  // extended CONNECT is not offered
  CHECK_FALSE(request_ok({{":method", "GET"}, {":scheme", "http"}, {":authority", "a"}, {":path", ""}}));
  CHECK_FALSE(request_ok({{":method", ""}, {":scheme", "http"}, {":authority", "a"}, {":path", "/"}}));
  CHECK_FALSE(request_ok(with(kGet, {{"host", "a"}, {"host", "b"}})));
  CHECK_FALSE(request_ok(with(without(kGet, ":authority"), {{"host", ""}})));
  H2MessageRules r(Side::request);
  r.begin_block();
  CHECK(r.field(":", "x") == Field::malformed);
  CHECK(r.field("", "x") == Field::malformed);
}

TEST_CASE("H2MessageRulesCheckThePseudoHeaderValues") {
  auto req = [](const char* method, const char* scheme, const char* authority, const char* path) {
    return request_ok({{":method", method}, {":scheme", scheme}, {":authority", authority}, {":path", path}});
  };
  CHECK(req("PATCH", "http", "a", "/"));
  CHECK(req("M-SEARCH", "coap+tcp", "[::1]:80", "/"));
  CHECK(req("GET", "https", "user@host:1", "/%7e?q=\"x\"#f"));
  CHECK_FALSE(req("GE T", "http", "a", "/"));
  CHECK_FALSE(req("GE(T", "http", "a", "/"));
  CHECK_FALSE(req("GET", "1http", "a", "/"));
  CHECK_FALSE(req("GET", "ht tp", "a", "/"));
  CHECK_FALSE(req("GET", "http", "a b", "/"));
  CHECK_FALSE(req("GET", "http", "a/b", "/"));
  CHECK_FALSE(req("GET", "http", "a", "/a b"));
  CHECK_FALSE(req("GET", "http", "a", "/a\x7f"));
  // An http(s) path is absolute, or "*" for OPTIONS; other schemes may differ.
  CHECK_FALSE(req("GET", "http", "a", "x"));
  CHECK_FALSE(req("GET", "HTTPS", "a", "x"));
  CHECK_FALSE(req("GET", "http", "a", "*"));
  CHECK(req("OPTIONS", "http", "a", "*"));
  CHECK(req("GET", "foo", "a", "x"));
}

TEST_CASE("H2MessageRulesTakeConnectWithAnAuthorityOnly") {
  CHECK(request_ok({{":method", "CONNECT"}, {":authority", "a:443"}}, false));
  CHECK_FALSE(request_ok({{":method", "CONNECT"}}, false));
  CHECK_FALSE(request_ok({{":method", "CONNECT"}, {":authority", "a:443"}, {":path", "/"}}, false));
  CHECK_FALSE(request_ok({{":method", "CONNECT"}, {":authority", "a:443"}, {":scheme", "http"}}, false));
  H2MessageRules r(Side::request);  // its content-length binds nothing
  CHECK(block(r, {{":method", "CONNECT"}, {":authority", "a:443"}, {"content-length", "1"}}, false));
  CHECK(r.data(10));
}

TEST_CASE("H2MessageRulesRefuseFieldNamesAndValuesHttp2Forbids") {
  H2MessageRules r(Side::request);
  r.begin_block();
  CHECK(r.field("X-Foo", "v") == Field::malformed);
  CHECK(r.field("x foo", "v") == Field::malformed);
  CHECK(r.field("x:foo", "v") == Field::malformed);
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const bool token = (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9') || std::string("!#$%&'*+-.^_`|~").find(c) != std::string::npos;
    INFO("name byte ", b);
    CHECK((r.field(std::string("x-") + c, "v") != Field::malformed) == token);
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const bool good = b == '\t' || (b >= 0x20 && b != 0x7F);
    INFO("value byte ", b);
    // Short values byte by byte, long ones eight bytes at a time: both ways,
    // and the bad byte at every place of the long one.
    CHECK((r.field("x-t", std::string("a") + c + "a") != Field::malformed) == good);
    for (size_t at = 1; at < 20; ++at) {
      std::string v(21, 'v');
      v[at] = c;
      if ((r.field("x-t", v) != Field::malformed) != good) FAIL("value byte ", b, " at ", at);
    }
  }
  for (const char* v : {" a", "a ", "\ta", "a\t", " ", "0123456789abcdef ", " 0123456789abcdef"}) {
    INFO(v);
    CHECK(r.field("x-t", v) == Field::malformed);
  }
}

TEST_CASE("H2MessageRulesRefuseConnectionSpecificFields") {
  for (const char* n : {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}) {
    INFO(n);
    CHECK_FALSE(request_ok(with(kGet, {{n, "x"}})));
  }
  CHECK_FALSE(request_ok(with(kGet, {{"te", "gzip"}})));
  CHECK_FALSE(request_ok(with(kGet, {{"te", "trailers, gzip"}})));
  CHECK(request_ok(with(kGet, {{"te", "Trailers"}})));
}

TEST_CASE("H2MessageRulesHoldTheBodyToItsContentLength") {
  CHECK_FALSE(request_ok(with(kGet, {{"content-length", "abc"}})));
  CHECK_FALSE(request_ok(with(kGet, {{"content-length", "-1"}})));
  CHECK_FALSE(request_ok(with(kGet, {{"content-length", ""}})));
  CHECK_FALSE(request_ok(with(kGet, {{"content-length", "99999999999999999999"}})));
  CHECK_FALSE(request_ok(with(kGet, {{"content-length", "1"}, {"content-length", "1"}})));
  CHECK_FALSE(request_ok(with(kGet, {{"content-length", "5"}}), true));  // END_STREAM on the head: 0 bytes
  CHECK(request_ok(with(kGet, {{"content-length", "0"}}), true));
  CHECK(request_ok(with(kGet, {{"content-length", "9223372036854775807"}}), false));

  H2MessageRules longer(Side::request);
  CHECK(block(longer, with(kGet, {{"content-length", "5"}}), false));
  CHECK(longer.data(5));
  CHECK_FALSE(longer.data(1));

  H2MessageRules shorter(Side::request);
  CHECK(block(shorter, with(kGet, {{"content-length", "5"}}), false));
  CHECK(shorter.data(3));
  CHECK_FALSE(shorter.end_stream());

  H2MessageRules unknown(Side::request);
  CHECK(block(unknown, kGet, false));
  CHECK(unknown.content_length() == -1);
  CHECK(unknown.data(1 << 20));
  CHECK(unknown.end_stream());
}

TEST_CASE("H2MessageRulesTakeTrailersThatEndTheStreamWithoutPseudoHeaders") {
  H2MessageRules r(Side::request);
  CHECK(block(r, with(kGet, {{"content-length", "2"}}), false));
  CHECK(r.data(2));
  CHECK(block(r, {{"x-checksum", "ab"}}, true));
  CHECK(r.in_trailers());

  H2MessageRules open(Side::request);
  CHECK(block(open, kGet, false));
  CHECK_FALSE(block(open, {{"x-checksum", "ab"}}, false));  // trailers without END_STREAM

  H2MessageRules pseudo(Side::request);
  CHECK(block(pseudo, kGet, false));
  CHECK_FALSE(block(pseudo, {{":path", "/"}}, true));

  H2MessageRules length(Side::request);  // frames nothing there: dropped
  CHECK(block(length, with(kGet, {{"content-length", "3"}}), false));
  CHECK(length.data(3));
  length.begin_block();
  CHECK(length.field("content-length", "7") == Field::drop);
  CHECK(length.field("x-checksum", "ab") == Field::regular);
  CHECK(length.end_block(true));

  H2MessageRules hop(Side::request);
  CHECK(block(hop, kGet, false));
  CHECK_FALSE(block(hop, {{"connection", "close"}}, true));
}

TEST_CASE("H2MessageRulesTakeAWellFormedResponse") {
  H2MessageRules r = response_to("GET");
  CHECK(block(r, {{":status", "200"}, {"content-length", "2"}, {"server", "x"}}, false));
  CHECK(r.status() == 200);
  CHECK(r.data(2));
  CHECK(r.end_stream());
}

TEST_CASE("H2MessageRulesRefuseResponsesWithABadStatus") {
  auto ok = [](const Fields& f) {
    H2MessageRules r = response_to("GET");
    return block(r, f, true);
  };
  CHECK(ok({{":status", "599"}}));
  CHECK_FALSE(ok({{"server", "x"}}));  // no :status
  CHECK_FALSE(ok({{":status", "20"}}));
  CHECK_FALSE(ok({{":status", "2000"}}));
  CHECK_FALSE(ok({{":status", "abc"}}));
  CHECK_FALSE(ok({{":status", "2a0"}}));
  CHECK_FALSE(ok({{":status", "101"}}));
  CHECK_FALSE(ok({{":status", "200"}, {":status", "200"}}));
  CHECK_FALSE(ok({{"server", "x"}, {":status", "200"}}));
  CHECK_FALSE(ok({{":status", "200"}, {":path", "/"}}));
  CHECK_FALSE(ok({{":status", "200"}, {"Server", "x"}}));
  CHECK_FALSE(ok({{":status", "200"}, {"x", "a\r\nb"}}));
  CHECK_FALSE(ok({{":status", "200"}, {"connection", "close"}}));
  CHECK_FALSE(ok({{":status", "200"}, {"transfer-encoding", "chunked"}}));
}

TEST_CASE("H2MessageRulesTakeInterimHeadsThenTheFinalOne") {
  H2MessageRules r = response_to("POST");
  CHECK(block(r, {{":status", "100"}}, false));
  CHECK(r.interim());
  CHECK_FALSE(r.in_trailers());
  CHECK(block(r, {{":status", "103"}, {"link", "</a>; rel=preload"}}, false));
  CHECK(r.interim());
  CHECK(block(r, {{":status", "200"}, {"content-length", "1"}}, false));
  CHECK_FALSE(r.interim());
  CHECK(r.status() == 200);
  CHECK(r.data(1));
  CHECK(r.end_stream());

  H2MessageRules data_first = response_to("GET");
  CHECK(block(data_first, {{":status", "100"}}, false));
  CHECK_FALSE(data_first.data(1));  // DATA before the final head

  H2MessageRules ended = response_to("GET");
  CHECK_FALSE(block(ended, {{":status", "100"}}, true));  // END_STREAM on an interim head

  H2MessageRules length = response_to("GET");
  CHECK_FALSE(block(length, {{":status", "100"}, {"content-length", "0"}}, false));

  H2MessageRules none = response_to("GET");
  CHECK_FALSE(none.data(1));  // DATA before any head
}

TEST_CASE("H2MessageRulesHoldResponsesWithoutABodyToNoData") {
  for (const char* status : {"204", "304"}) {
    INFO(status);
    H2MessageRules r = response_to("GET");
    CHECK(block(r, {{":status", status}}, false));
    CHECK_FALSE(r.data(1));
    H2MessageRules empty = response_to("GET");
    CHECK(block(empty, {{":status", status}}, false));
    CHECK(empty.data(0));
    CHECK(empty.end_stream());
  }
  H2MessageRules head = response_to("HEAD");
  CHECK(block(head, {{":status", "200"}, {"content-length", "100"}}, false));
  CHECK_FALSE(head.data(1));
  H2MessageRules head_ends = response_to("HEAD");
  CHECK(block(head_ends, {{":status", "200"}, {"content-length", "100"}}, true));
}

TEST_CASE("H2MessageRulesDropA204sZeroContentLengthAndRefuseAnyOther") {
  H2MessageRules r = response_to("GET");
  r.begin_block();
  CHECK(r.field(":status", "204") == Field::status);
  CHECK(r.field("content-length", "0") == Field::drop);
  CHECK(r.end_block(true));
  H2MessageRules five = response_to("GET");
  CHECK_FALSE(block(five, {{":status", "204"}, {"content-length", "5"}}, true));
  H2MessageRules twice = response_to("GET");
  CHECK_FALSE(block(twice, {{":status", "204"}, {"content-length", "0"}, {"content-length", "0"}}, true));
}

TEST_CASE("H2MessageRulesDropTheContentLengthOfATunnelsAnswer") {
  H2MessageRules r = response_to("CONNECT");
  r.begin_block();
  CHECK(r.field(":status", "200") == Field::status);
  CHECK(r.field("content-length", "0") == Field::drop);
  CHECK(r.end_block(false));
  CHECK(r.data(100));
}

TEST_CASE("H2MessageRulesRequireResponseTrailersToEndTheStream") {
  H2MessageRules r = response_to("GET");
  CHECK(block(r, {{":status", "200"}}, false));
  CHECK(r.data(3));
  CHECK_FALSE(block(r, {{"grpc-status", "0"}}, false));
  H2MessageRules pseudo = response_to("GET");
  CHECK(block(pseudo, {{":status", "200"}}, false));
  CHECK_FALSE(block(pseudo, {{":status", "200"}}, true));
  H2MessageRules good = response_to("GET");
  CHECK(block(good, {{":status", "200"}}, false));
  CHECK(block(good, {{"grpc-status", "0"}}, true));
}
