// h2_request: an attempt's request as HTTP/2 pseudo-header fields and
// fields, and what a server session receives of it (names lower-cased,
// connection-specific fields gone).
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "core/config/config.h"
#include "shell/http2/h2_session.h"
#include "shell/http2/h2_client_stream.h"
#include "core/http/message_head.h"
#include "h2_handler_stub.h"

using namespace onelayer;

namespace {

std::string value_of(const Headers& h, std::string_view name) {
  const Header* f = find_header(h, name);
  return f ? f->value : std::string("<absent>");
}

struct Request {
  Config config;
  RequestRewrite rewrite{&config};
  MessageHead head;
  OutgoingRequest out;

  explicit Request(Headers fields) {
    rewrite.via = "1.1 onelayer";
    rewrite.proto = "";
    head.method = "POST";
    head.target = "/orders?id=7";
    head.headers = std::move(fields);
    out.head = &head;
    out.target = head.target;
    out.rewrite = &rewrite;
    out.default_host = "orders.internal:8080";
  }
};

// A server session that keeps the request heads it receives.
class HeadSink : public test::H2HandlerStub {
 public:
  std::map<int32_t, H2Session::Head> heads;
  void on_head(int32_t stream, H2Session::Head& head, bool) override { heads[stream] = head; }
};

}  // namespace

TEST_CASE("h2 request head: Host becomes :authority, the target :path, the scheme as given") {
  Request r({{"Host", "api.example:81"}, {"Accept", "*/*"}});
  CHECK(h2_request(r.out, "https").scheme == "https");
  H2Request h = h2_request(r.out, "http");
  const Headers fields = h.fields.headers();
  CHECK(h.method == "POST");
  CHECK(h.scheme == "http");
  CHECK(h.path == "/orders?id=7");
  CHECK(h.authority == "api.example:81");
  CHECK(find_header(fields, "host") == nullptr);
  CHECK(value_of(fields, "accept") == "*/*");
  CHECK(value_of(fields, "via") == "1.1 onelayer");  // the rewrite's fields are there
  for (const Header& f : fields)
    for (char ch : f.name) CHECK_FALSE((ch >= 'A' && ch <= 'Z'));  // lower-cased on the way in
}

TEST_CASE("h2 request head: no Host gives the default host as :authority") {
  Request r(Headers{{"Accept", "*/*"}});
  CHECK(h2_request(r.out, "http").authority == "orders.internal:8080");
}

TEST_CASE("h2 request head: content-length is kept when the request has one, te only as trailers") {
  Request r({{"Host", "a"}, {"Content-Length", "5"}, {"TE", "trailers, deflate"}});
  r.head.has_content_length = true;
  r.head.content_length = 5;
  const Headers h = h2_request(r.out, "http").fields.headers();
  CHECK(value_of(h, "content-length") == "5");
  CHECK(value_of(h, "te") == "trailers");
  CHECK(count_headers(h, "content-length") == 1);

  Request chunked({{"Host", "a"}, {"Transfer-Encoding", "chunked"}, {"TE", "gzip"}});
  chunked.head.chunked = true;
  const Headers c = h2_request(chunked.out, "http").fields.headers();
  CHECK(find_header(c, "content-length") == nullptr);
  CHECK(find_header(c, "transfer-encoding") == nullptr);
  CHECK(find_header(c, "te") == nullptr);
}

TEST_CASE("h2 request head: a reused head keeps nothing of the request before") {
  Request first({{"Host", "api.example:81"}, {"X-First", "1"}, {"Content-Length", "5"}});
  first.head.has_content_length = true;
  first.head.content_length = 5;
  H2Request h;
  h2_request(first.out, "https", h);
  REQUIRE(h.authority == "api.example:81");
  REQUIRE(value_of(h.fields.headers(), "x-first") == "1");

  Request second(Headers{{"Accept", "*/*"}});
  second.head.method = "GET";
  second.out.target = "/next";
  h2_request(second.out, "http", h);
  const Headers fields = h.fields.headers();
  CHECK(h.method == "GET");
  CHECK(h.scheme == "http");
  CHECK(h.path == "/next");
  CHECK(h.authority == "orders.internal:8080");  // not the first request's Host
  CHECK(find_header(fields, "x-first") == nullptr);
  CHECK(find_header(fields, "content-length") == nullptr);
  CHECK(value_of(fields, "accept") == "*/*");
  CHECK(h.fields.headers() == h2_request(second.out, "http").fields.headers());
}

TEST_CASE("h2 request head: a server receives lower-case names and no connection-specific field") {
  Request r({{"Host", "api.example"},
             {"Connection", "keep-alive, X-Hop"},
             {"Keep-Alive", "timeout=5"},
             {"Proxy-Connection", "keep-alive"},
             {"Upgrade", "websocket"},
             {"X-Hop", "1"},
             {"X-Trace-Id", "abc"},
             {"TE", "trailers"}});
  H2Request h = h2_request(r.out, "http");
  HeadSink server_side;
  HeadSink client_side;
  H2Session client(H2Session::Role::client, &client_side);
  H2Session server(H2Session::Role::server, &server_side);
  int32_t id = client.submit_request(h.line(), h.fields, true);
  REQUIRE(id > 0);
  std::string bytes;
  client.flush(bytes);
  REQUIRE(server.recv(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0));
  REQUIRE(server_side.heads.count(id) == 1);
  const H2Session::Head& got = server_side.heads[id];
  CHECK(got.method == "POST");
  CHECK(got.scheme == "http");
  CHECK(got.authority == "api.example");
  CHECK(got.path == "/orders?id=7");
  CHECK(value_of(got.fields, "x-trace-id") == "abc");
  CHECK(value_of(got.fields, "te") == "trailers");
  for (const char* gone : {"connection", "keep-alive", "proxy-connection", "upgrade", "x-hop", "host"})
    CHECK_MESSAGE(find_header(got.fields, gone) == nullptr, gone);
  for (const Header& f : got.fields)
    for (char ch : f.name) CHECK_FALSE((ch >= 'A' && ch <= 'Z'));
}
