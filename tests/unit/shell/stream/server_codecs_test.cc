// The server codecs through the interfaces below them, with no Worker: an
// Http1ServerConnection made with a host of the test's (Http1ServerHost)
// hands each request head to the host's ExchangeStarter, answers a refusal
// in HTTP/1 framing, feeds an admitted exchange (RequestExchange) and gives
// it back to the host's retire once done; on the HTTP/2 preface it hands
// its reads to the codec the host makes (ClientSocketCodec: here the real
// H2ServerConnection, running on the connection as its ClientSocket),
// whose streams go to the same starter. Real sockets (a socketpair) on the
// host's loop, run by hand.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/http/message_head.h"
#include "core/metrics/metrics.h"
#include "socket_drain.h"
#include "h2_handler_stub.h"
#include "shell/http1/http1_server_connection.h"
#include "shell/http1/http1_server_host.h"
#include "shell/http2/h2_server_connection.h"
#include "shell/http2/h2_session.h"

using namespace onelayer;

namespace {

Metrics test_metrics;

struct TestListener final : ServerListener {
  TestListener() : ServerListener("public") {}
};

// An admitted request's exchange: it answers 200 once the request has
// ended and tells its stream it is done.
class AnsweringExchange final : public RequestExchange {
 public:
  explicit AnsweringExchange(DownstreamStream& down) : down_(down) {}
  void start() override { started = true; }
  void on_request_body(const char*, size_t len) override { body_bytes += len; }
  void on_request_trailers(const Headers&) override {}
  void on_request_end() override {
    down_.send_proxy_response(200, "answered", {}, false, true);
    down_.exchange_done();
  }
  void on_down_drained() override {}
  void on_down_body_sent(size_t) override {}
  void refuse_request(int, const char*, const char*) override {}
  void abort(const char*) override { aborted = true; }
  void on_tunnel_down(ssize_t, const uv_buf_t*) override {}
  bool response_started() const override { return false; }
  bool request_complete() const override { return true; }

  bool started = false;
  bool aborted = false;
  size_t body_bytes = 0;

 private:
  DownstreamStream& down_;
};

// The worker's part, played by the test: requests to /refused are refused
// 403, the others admitted; what the codecs ask is recorded.
class TestHost final : public Http1ServerHost, public ExchangeStarter {
 public:
  TestHost() : Http1ServerHost(test_metrics) {}
  ~TestHost() {
    retired.clear();
    timers().close();
    uv_run(loop(), UV_RUN_NOWAIT);  // close callbacks
    loop_closed = uv_loop_close(loop());
  }
  // The writes HTTP/2 defers to the end of a poll (the Worker's check handle).
  void write_deferred() { write_deferred_writers(); }

  // ExchangeStarter.
  Start start(DownstreamStream& down, const std::string& listener, MessageHead& head, const std::string&,
              const Destination*) override {
    requests.push_back(listener + " " + head.method + " " + head.target);
    protocols.push_back(down.protocol());
    Start s;
    if (head.target == "/refused") {
      s.status = 403;
      s.reason = "caller_not_allowed";
      s.detail = "the test refuses it";
      s.keeps_connection = true;  // no body unread: HTTP/1 reads the next request
      return s;
    }
    s.exchange = std::make_unique<AnsweringExchange>(down);
    return s;
  }

  // ServerCodecHost.
  ExchangeStarter& exchanges() override { return *this; }
  void retire(std::unique_ptr<RequestExchange> ex) override { retired.push_back(std::move(ex)); }
  bool logs_access(const std::string&) override { return false; }

  // Http1ServerHost.
  HttpParserPool& parsers() override { return parsers_; }
  bool park(int, ServerListener*, uint64_t) override { return false; }
  const Listener* listener_config(const std::string&) override { return &config; }
  std::unique_ptr<TlsChannel> open_tls(const std::string&) override { return nullptr; }
  size_t max_open_connections() override { return SIZE_MAX; }
  std::unique_ptr<ClientSocketCodec> take_over_h2c(ClientSocket* c, ServerListener* l) override {
    ++h2c_taken_over;
    return std::make_unique<H2ServerConnection>(c, this, l, &config, "x-request-timeout");
  }
  void down_closed(Http1ServerConnection*) override { ++closed; }
  void forget_transparent(const Http1ServerConnection*) override {}

  Listener config;
  std::vector<std::string> requests;
  std::vector<WireProtocol> protocols;
  std::vector<std::unique_ptr<RequestExchange>> retired;
  int h2c_taken_over = 0;
  int closed = 0;
  int loop_closed = -1;

 private:
  HttpParserPool parsers_;
};

using test::drain;

void send_all(int fd, const std::string& s) { REQUIRE(::send(fd, s.data(), s.size(), 0) == static_cast<ssize_t>(s.size())); }

void turn(TestHost& host) {
  for (int i = 0; i < 4; ++i) {
    uv_run(host.loop(), UV_RUN_NOWAIT);
    host.write_deferred();
  }
}

// A client connection on the host: the first end of a socketpair as an
// Http1ServerConnection; the test is the client at the other end.
struct Client {
  int fds[2] = {-1, -1};
  Http1ServerConnection* conn = nullptr;
  Client(TestHost& host, TestListener& listener) {
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
    conn = new Http1ServerConnection(&host, &listener);
    REQUIRE(uv_tcp_open(reinterpret_cast<uv_tcp_t*>(conn->stream()), fds[0]) == 0);
    conn->start();
  }
  ~Client() { close(fds[1]); }
};

// Records the response heads an HTTP/2 client session receives.
struct ResponseHeads final : test::H2HandlerStub {
  void on_head(int32_t, H2Session::Head& head, bool) override {
    statuses.push_back(head.status);
    for (const Header& f : head.fields)
      if (f.name == "x-onelayer-error") errors.push_back(f.value);
  }
  std::vector<int> statuses;
  std::vector<std::string> errors;
};

}  // namespace

TEST_CASE("http1 server connection: requests go to the host's exchange starter, refusals answered in HTTP/1") {
  TestListener listener;
  TestHost host;
  {
    Client c(host, listener);
    send_all(c.fds[1], "GET /refused HTTP/1.1\r\nHost: a\r\n\r\n");
    turn(host);
    std::string got = drain(c.fds[1]);
    CHECK(got.rfind("HTTP/1.1 403 ", 0) == 0);
    CHECK(got.find("x-onelayer-error: caller_not_allowed\r\n") != std::string::npos);
    REQUIRE(host.requests.size() == 1);
    CHECK(host.requests[0] == "public GET /refused");
    CHECK(host.protocols[0] == WireProtocol::http1);

    // Admitted: the exchange is fed the body, answers, and is retired.
    send_all(c.fds[1], "POST /ok HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
    turn(host);
    got = drain(c.fds[1]);
    CHECK(got.rfind("HTTP/1.1 200 ", 0) == 0);
    REQUIRE(host.requests.size() == 2);
    CHECK(host.requests[1] == "public POST /ok");
    REQUIRE(host.retired.size() == 1);
    auto* ex = static_cast<AnsweringExchange*>(host.retired[0].get());
    CHECK(ex->started);
    CHECK(ex->body_bytes == 5);
    CHECK(host.h2c_taken_over == 0);
    c.conn->abort_connection();
    turn(host);
    CHECK(host.closed == 1);
  }
  host.retired.clear();
}

TEST_CASE("http1 server connection: the HTTP/2 preface hands the connection to the codec the host makes") {
  TestListener listener;
  TestHost host;
  {
    Client c(host, listener);
    ResponseHeads heads;
    H2Session client(H2Session::Role::client, &heads);
    H2Session::Head refused;
    refused.method = "GET";
    refused.scheme = "http";
    refused.authority = "a";
    refused.path = "/refused";
    REQUIRE(client.submit_request(refused, true) > 0);
    H2Session::Head admitted = refused;
    admitted.path = "/ok";
    REQUIRE(client.submit_request(admitted, true) > 0);
    std::string out;
    client.flush(out);
    REQUIRE(out.rfind("PRI * HTTP/2.0", 0) == 0);
    // The preface in two reads: the connection waits for enough bytes to tell.
    send_all(c.fds[1], out.substr(0, 10));
    turn(host);
    CHECK(host.h2c_taken_over == 0);
    send_all(c.fds[1], out.substr(10));
    turn(host);
    CHECK(host.h2c_taken_over == 1);
    REQUIRE(host.requests.size() == 2);
    CHECK(host.requests[0] == "public GET /refused");
    CHECK(host.requests[1] == "public GET /ok");
    CHECK(host.protocols[0] == WireProtocol::h2);
    REQUIRE(host.retired.size() == 1);  // the admitted one, once answered
    std::string in = drain(c.fds[1]);
    REQUIRE(client.recv(reinterpret_cast<const uint8_t*>(in.data()), in.size(), 0));
    REQUIRE(heads.statuses.size() == 2);
    CHECK(heads.statuses[0] == 403);
    CHECK(heads.statuses[1] == 200);
    REQUIRE(!heads.errors.empty());
    CHECK(heads.errors[0] == "caller_not_allowed");
    c.conn->abort_connection();
    turn(host);
    CHECK(host.closed == 1);
  }
  host.retired.clear();
}
