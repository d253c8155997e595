// ConnectionHost on its own, with no Worker: a connection made on it reads
// into its buffer, writes through its write path (at once while the socket
// takes the bytes, queued in order once it does not) and arms its timers in
// its timer list. Real sockets (a socketpair) on the host's loop, run by hand.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "core/metrics/metrics.h"
#include "socket_drain.h"
#include "shell/io/conn.h"
#include "shell/io/connection_host.h"
#include "shell/tls/tls_channel.h"
#include "tls/test_certs.h"

using namespace onelayer;

namespace {

Metrics test_metrics;

// A host for tests. Ending, it closes its timer list and its loop, as the
// Worker does, and reports whether the loop closed with no handle open.
class TestHost final : public ConnectionHost {
 public:
  explicit TestHost(int* loop_closed) : ConnectionHost(test_metrics), loop_closed_(loop_closed) {}
  ~TestHost() {
    timers().close();
    uv_run(loop(), UV_RUN_NOWAIT);  // close callbacks
    *loop_closed_ = uv_loop_close(loop());
  }

 private:
  int* loop_closed_;
};

// One end of a socketpair as a connection on the host.
class PairConn final : public Conn {
 public:
  PairConn(ConnectionHost* host, int fd, int* writes_done) : Conn(host), writes_done_(writes_done) {
    opened = uv_tcp_open(&tcp_, fd);
  }
  void on_write_done(int status) override {
    if (status == 0) ++*writes_done_;
  }
  void close() { close_handles(); }
  int opened = -1;

 private:
  int* writes_done_;
};

using test::drain;
using test::sends;

// A socketpair whose first end becomes a connection on a host; the test
// reads the other end.
struct Pair {
  int fds[2] = {-1, -1};
  int writes_done = 0;
  int loop_closed = -1;
  Pair() { REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0); }
  ~Pair() { close(fds[1]); }
  PairConn* conn(ConnectionHost& host) {
    auto* c = new PairConn(&host, fds[0], &writes_done);
    REQUIRE(c->opened == 0);
    return c;
  }
};

}  // namespace

TEST_CASE("ConnectionHostWritesAtOnceWhileTheSocketTakesTheBytes") {
  Pair p;
  {
    TestHost host(&p.loop_closed);
    PairConn* c = p.conn(host);
    CHECK(c->host() == &host);
    CHECK(host.write(c, "hello, ") == 0);
    uv_buf_t parts[2] = {uv_buf_init(const_cast<char*>("two "), 4), uv_buf_init(const_cast<char*>("parts"), 5)};
    CHECK(host.write(c, parts, 2) == 0);
    CHECK(c->write_queue() == 0);  // nothing waited for libuv
    CHECK(drain(p.fds[1]) == "hello, two parts");
    c->close();
    uv_run(host.loop(), UV_RUN_NOWAIT);
  }
  CHECK(p.writes_done == 0);  // no write was queued, so none reported done later
  CHECK(p.loop_closed == 0);
}

TEST_CASE("ConnectionHostQueuesWhatTheSocketDoesNotTakeAndKeepsTheOrder") {
  Pair p;
  std::string sent;
  {
    TestHost host(&p.loop_closed);
    PairConn* c = p.conn(host);
    // More than a socketpair's buffer: the rest is queued behind it.
    for (int i = 0; i < 64; ++i) {
      std::string block(64 * 1024, static_cast<char>('a' + i % 26));
      sent += block;
      REQUIRE(host.write(c, block) == 0);
    }
    CHECK(c->write_queue() > 0);
    std::string got;
    for (int turn = 0; turn < 10000 && got.size() < sent.size(); ++turn) {
      got += drain(p.fds[1]);
      uv_run(host.loop(), UV_RUN_NOWAIT);
    }
    got += drain(p.fds[1]);
    CHECK(got.size() == sent.size());
    CHECK(got == sent);
    CHECK(p.writes_done > 0);  // the queued writes were reported done
    CHECK(c->write_queue() == 0);
    c->close();
    uv_run(host.loop(), UV_RUN_NOWAIT);
  }
  CHECK(p.loop_closed == 0);
}

TEST_CASE("ConnectionHostRunsAConnectionsTimer") {
  Pair p;
  static int fired;
  fired = 0;
  {
    TestHost host(&p.loop_closed);
    PairConn* c = p.conn(host);
    c->arm_timer(1, [](TimerList::Entry* e) {
      ++fired;
      Conn::of<PairConn>(e)->close();
    });
    for (int turn = 0; turn < 1000 && fired == 0; ++turn) uv_run(host.loop(), UV_RUN_ONCE);
    CHECK(fired == 1);
    uv_run(host.loop(), UV_RUN_NOWAIT);  // the connection's close callback
  }
  CHECK(p.loop_closed == 0);
}

namespace {

// A TLS client connection on the host (Conn::tls_pump drives its channel)
// whose first request is written as soon as its handshake is done.
class TlsClientConn final : public Conn {
 public:
  TlsClientConn(ConnectionHost* host, int fd, SSL_CTX* ctx) : Conn(host) {
    opened = uv_tcp_open(&tcp_, fd);
    tls_ = std::make_unique<TlsChannel>(ctx, TlsChannel::Role::client);
  }
  void start() {
    uv_read_start(stream(), Conn::no_read_buffer, Conn::on_readable<TlsClientConn>);
    Conn::tls_pump(this);  // the ClientHello
  }
  void on_tls_handshake(bool ok) {
    handshake_ok = ok;
    if (ok) host()->write(this, "GET / HTTP/1.1\r\nHost: origin.test\r\n\r\n");
  }
  void on_read(ssize_t, const uv_buf_t*) {}
  void on_tls_error() {}
  void on_write_done(int) override {}
  void close() { close_handles(); }
  int opened = -1;
  bool handshake_ok = false;
};

}  // namespace

// tests/bench/tls.sh's handshake row: a new upstream connection's Finished
// and its request leave in one send (two before: the Finished on its own).
TEST_CASE("ConnectionHostSendsATlsClientsFinishedAndItsFirstRequestTogether") {
  test::TestCert ca("test CA", "", nullptr);
  test::TestCert leaf("origin.test", "DNS:origin.test", &ca);
  SSL_CTX* server_ctx = SSL_CTX_new(TLS_server_method());
  SSL_CTX_use_certificate(server_ctx, leaf.x509);
  SSL_CTX_use_PrivateKey(server_ctx, leaf.key);
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  int fds[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
  int loop_closed = -1;
  {
    TestHost host(&loop_closed);
    auto* c = new TlsClientConn(&host, fds[0], client_ctx);
    REQUIRE(c->opened == 0);
    c->start();
    std::vector<std::string> hello = sends(fds[1]);
    REQUIRE(hello.size() == 1);
    TlsChannel server(server_ctx, TlsChannel::Role::server);
    server.feed(hello[0].data(), hello[0].size());
    REQUIRE(server.handshake() == TlsChannel::Status::want_more);
    std::string flight(server.output());
    server.drop_output();
    REQUIRE(::send(fds[1], flight.data(), flight.size(), 0) == static_cast<ssize_t>(flight.size()));
    uv_run(host.loop(), UV_RUN_NOWAIT);  // the client reads it, finishes and writes
    CHECK(c->handshake_ok);
    std::vector<std::string> last = sends(fds[1]);
    CHECK(last.size() == 1);
    for (const std::string& m : last) server.feed(m.data(), m.size());
    CHECK(server.handshake() == TlsChannel::Status::ok);
    char buf[256];
    TlsChannel::Status st;
    size_t n = server.read(buf, sizeof buf, &st);
    CHECK(std::string(buf, n) == "GET / HTTP/1.1\r\nHost: origin.test\r\n\r\n");
    c->close();
    uv_run(host.loop(), UV_RUN_NOWAIT);
  }
  CHECK(loop_closed == 0);
  close(fds[1]);
  SSL_CTX_free(server_ctx);
  SSL_CTX_free(client_ctx);
}
