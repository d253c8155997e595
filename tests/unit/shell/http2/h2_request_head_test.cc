// The HTTP/2 downstream's head translations: a stream's request head into
// the neutral MessageHead, and an upstream's response head for an HTTP/2
// client.
#include "shell/http2/h2_request_head.h"

#include <doctest/doctest.h>

#include <optional>

using namespace onelayer;

namespace {

H2Session::Head request(Headers fields, std::string authority = "api.test") {
  H2Session::Head h;
  h.method = "POST";
  h.scheme = "http";
  h.authority = std::move(authority);
  h.path = "/items?id=7";
  h.fields = std::move(fields);
  return h;
}

// An upstream's response head; a `length` is its Content-Length.
MessageHead upstream_response(int status, Headers fields, std::optional<uint64_t> length = std::nullopt) {
  MessageHead m;
  m.status = status;
  m.headers = std::move(fields);
  m.has_content_length = length.has_value();
  m.content_length = length.value_or(0);
  return m;
}

}  // namespace

TEST_CASE("h2 request: pseudo-headers become method, target and a Host field first, version 2.0") {
  H2Session::Head in = request({{"accept", "*/*"}, {"host", "other"}});
  MessageHead m;
  REQUIRE(translate_h2_request(in, true, m) == nullptr);
  CHECK(m.method == "POST");
  CHECK(m.target == "/items?id=7");
  CHECK((m.http_major == 2 && m.http_minor == 0));
  CHECK(m.headers == Headers{{"Host", "api.test"}, {"accept", "*/*"}});
  CHECK_FALSE(m.chunked);
  CHECK_FALSE(m.has_content_length);
  CHECK(m.content_length == 0);
}

TEST_CASE("h2 request: without :authority a host field stays as the client sent it") {
  H2Session::Head in = request({{"host", "legacy.test"}}, "");
  MessageHead m;
  REQUIRE(translate_h2_request(in, true, m) == nullptr);
  CHECK(m.headers == Headers{{"host", "legacy.test"}});
}

TEST_CASE("h2 request: several cookie fields become one, joined with a semicolon, where the first was") {
  H2Session::Head in = request({{"cookie", "a=1"}, {"accept", "*/*"}, {"cookie", "b=2"}, {"cookie", "c=3"}});
  MessageHead m;
  REQUIRE(translate_h2_request(in, true, m) == nullptr);
  CHECK(m.headers == Headers{{"Host", "api.test"}, {"cookie", "a=1; b=2; c=3"}, {"accept", "*/*"}});
}

TEST_CASE("h2 request: the body is none, its content-length, or chunked when its length is unknown") {
  MessageHead m;
  H2Session::Head in = request({{"content-length", "12"}});
  REQUIRE(translate_h2_request(in, false, m) == nullptr);
  CHECK((m.has_content_length && m.content_length == 12 && !m.chunked));
  in = request({});
  REQUIRE(translate_h2_request(in, false, m) == nullptr);
  CHECK((m.chunked && !m.has_content_length));
  in = request({});
  REQUIRE(translate_h2_request(in, true, m) == nullptr);
  CHECK_FALSE(m.chunked);
}

TEST_CASE("h2 request: a bad or contradicting content-length, or no method, is refused with a reason") {
  MessageHead m;
  H2Session::Head in = request({{"content-length", "1x"}});
  CHECK(std::string(translate_h2_request(in, false, m)) == "invalid content-length");
  in = request({{"content-length", "99999999999999999"}});
  CHECK(translate_h2_request(in, false, m) != nullptr);
  in = request({{"content-length", "3"}, {"content-length", "4"}});
  CHECK(std::string(translate_h2_request(in, false, m)) == "content-length given twice with different values");
  in = request({});
  in.method.clear();
  CHECK(translate_h2_request(in, true, m) != nullptr);
}

TEST_CASE("h2 request: the fields stay in the stream's own list, Host moved in first") {
  H2Session::Head in = request({{"accept", "*/*"}, {"cookie", "a=1"}, {"host", "dropped"}, {"cookie", "b=2"}});
  in.fields.reserve(12);
  const Header* list = in.fields.data();
  MessageHead m;
  REQUIRE(translate_h2_request(in, true, m) == nullptr);
  CHECK(m.headers.data() == list);  // no second list per request
  CHECK(m.headers == Headers{{"Host", "api.test"}, {"accept", "*/*"}, {"cookie", "a=1; b=2"}});
  CHECK(in.fields.empty());
}

TEST_CASE("h2 request: a malformed head still hands over the fields before the fault") {
  MessageHead m;
  H2Session::Head in = request({{"content-type", "application/grpc"}, {"content-length", "x"}, {"te", "trailers"}});
  CHECK(std::string(translate_h2_request(in, false, m)) == "invalid content-length");
  CHECK(m.headers == Headers{{"Host", "api.test"}, {"content-type", "application/grpc"}});
  CHECK(m.method == "POST");
}

TEST_CASE("h2 request: a front field (leave_front_field) takes Host in place, or goes without :authority") {
  // What an earlier head left in the front field is overwritten.
  H2Session::Head in = request({{"Host", "old.test"}, {"accept", "*/*"}, {"cookie", "a=1"}, {"host", "dropped"},
                                {"cookie", "b=2"}});
  in.front_field = true;
  const Header* list = in.fields.data();
  MessageHead m;
  REQUIRE(translate_h2_request(in, true, m) == nullptr);
  CHECK(m.headers.data() == list);
  CHECK(m.headers == Headers{{"Host", "api.test"}, {"accept", "*/*"}, {"cookie", "a=1; b=2"}});

  in = request({{"x-left", "over"}, {"host", "legacy.test"}, {"content-length", "3"}}, "");
  in.front_field = true;
  REQUIRE(translate_h2_request(in, false, m) == nullptr);
  CHECK(m.headers == Headers{{"host", "legacy.test"}, {"content-length", "3"}});
  CHECK((m.has_content_length && m.content_length == 3));

  // The front field is never read as a received one.
  in = request({{"content-length", "x"}, {"accept", "*/*"}});
  in.front_field = true;
  REQUIRE(translate_h2_request(in, true, m) == nullptr);
  CHECK(m.headers == Headers{{"Host", "api.test"}, {"accept", "*/*"}});
  CHECK_FALSE(m.has_content_length);

  // A malformed head hands over the fields before the fault, Host first.
  in = request({{}, {"content-type", "application/grpc"}, {"content-length", "x"}, {"te", "trailers"}});
  in.front_field = true;
  CHECK(std::string(translate_h2_request(in, false, m)) == "invalid content-length");
  CHECK(m.headers == Headers{{"Host", "api.test"}, {"content-type", "application/grpc"}});
}

TEST_CASE("h2 response: hop-by-hop and framing fields go, names are lower case, Via and extras are added") {
  MessageHead up;
  up.status = 201;
  up.headers = {{"Content-Type", "text/html"}, {"Connection", "close, X-Hop"}, {"X-Hop", "1"},
                {"Keep-Alive", "timeout=5"}, {"Transfer-Encoding", "chunked"}, {"Set-Cookie", "s=1"}};
  Headers extra{{"x-retry-exhausted", "3"}};
  DownstreamStream::ResponseMeta meta;
  meta.via = "1.1 onelayer";
  meta.extra = &extra;
  H2Response out;
  REQUIRE(translate_response_for_h2(up, meta, out));
  CHECK(out.status == 201);
  CHECK(out.fields.headers() == Headers{{"content-type", "text/html"}, {"set-cookie", "s=1"}, {"via", "1.1 onelayer"},
                              {"x-retry-exhausted", "3"}});
}

TEST_CASE("h2 response: a length is kept when the response may carry it, never on 204") {
  MessageHead up = upstream_response(200, {{"Content-Length", "42"}}, 42);
  DownstreamStream::ResponseMeta meta;
  H2Response out;
  REQUIRE(translate_response_for_h2(up, meta, out));
  CHECK(out.fields.headers() == Headers{{"content-length", "42"}});
  meta.no_body = true;
  meta.head_request = true;  // HEAD: the length the body would have
  REQUIRE(translate_response_for_h2(up, meta, out));
  CHECK(out.fields.headers() == Headers{{"content-length", "42"}});
  up.status = 204;
  meta.head_request = false;
  REQUIRE(translate_response_for_h2(up, meta, out));
  CHECK(out.fields.empty());
}

TEST_CASE("h2 response: a transfer coding HTTP/2 has no field for makes the response unfit") {
  MessageHead up;
  up.status = 200;
  up.headers = {{"Transfer-Encoding", "gzip, chunked"}};
  DownstreamStream::ResponseMeta meta;
  H2Response out;
  CHECK_FALSE(translate_response_for_h2(up, meta, out));
  meta.no_body = true;  // no body: nothing is coded
  CHECK(translate_response_for_h2(up, meta, out));
}

TEST_CASE("h2 response: extras are lower-cased too, a 304 keeps its length, an unfit response leaves the head") {
  MessageHead up = upstream_response(304, {{"ETag", "\"v1\""}}, 7);
  Headers extra{{"X-Retry-Exhausted", "2"}};
  DownstreamStream::ResponseMeta meta;
  meta.no_body = true;  // a 304 has none, and keeps the length it stands for
  meta.extra = &extra;
  H2Response out;
  REQUIRE(translate_response_for_h2(up, meta, out));
  CHECK(out.status == 304);
  CHECK(out.fields.headers() == Headers{{"etag", "\"v1\""}, {"content-length", "7"}, {"x-retry-exhausted", "2"}});

  MessageHead coded = upstream_response(200, {{"Transfer-Encoding", "chunked, gzip"}});  // chunked not last
  CHECK_FALSE(translate_response_for_h2(coded, DownstreamStream::ResponseMeta{}, out));
  CHECK(out.status == 304);
  CHECK(out.fields.size() == 3);
}
