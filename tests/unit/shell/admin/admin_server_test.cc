// AdminServer on a real libuv loop: the loop runs on the test thread, a
// client thread talks to it over blocking sockets, and every test ends with
// all handles closed (uv_loop_close == 0).
#include "shell/admin/admin_server.h"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
#include <thread>

namespace onelayer {
namespace {

// ---- a minimal blocking HTTP client ----

struct Reply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class Client {
 public:
  explicit Client(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{10, 0};  // a safety net against a hung test, not a timing assertion
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  }
  ~Client() {
    if (fd_ >= 0) ::close(fd_);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }

  bool send(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads one response (Content-Length framed); nullopt on EOF or error.
  // `head_request`: the response has no body whatever Content-Length says.
  std::optional<Reply> read_reply(bool head_request = false) {
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return std::nullopt;
    }
    Reply r;
    std::string head = buffer_.substr(0, end);
    buffer_.erase(0, end + 4);
    size_t line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    if (status_line.rfind("HTTP/1.1 ", 0) != 0 || status_line.size() < 12) return std::nullopt;
    r.status = std::stoi(status_line.substr(9, 3));
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t e = head.find("\r\n", pos);
      if (e == std::string::npos) e = head.size();
      std::string line = head.substr(pos, e - pos);
      size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      r.headers[name] = value;
      pos = e + 2;
    }
    size_t length = head_request ? 0 : std::stoul(r.header("content-length").empty() ? "0" : r.header("content-length"));
    while (buffer_.size() < length) {
      if (!fill()) return std::nullopt;
    }
    r.body = buffer_.substr(0, length);
    buffer_.erase(0, length);
    return r;
  }

  // True when the server closed the connection (EOF or reset) with nothing more to read.
  bool closed_by_server() {
    if (!buffer_.empty()) return false;
    char c;
    ssize_t n = ::recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

 private:
  bool fill() {
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    buffer_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

std::optional<Reply> request(int port, const std::string& raw) {
  Client c(port);
  if (!c.connected() || !c.send(raw)) return std::nullopt;
  return c.read_reply(raw.rfind("HEAD ", 0) == 0);
}

std::string get(const std::string& path) { return "GET " + path + " HTTP/1.1\r\nHost: admin\r\n\r\n"; }

// ---- loop harness ----

class Harness {
 public:
  AdminServer::Hooks hooks;
  AdminServer::Limits limits;
  int closed_callbacks = 0;

  Harness() { uv_loop_init(&loop_); }

  // Serves on the loop while `client(port)` runs on another thread, then
  // closes the server and checks that the loop has nothing left open.
  void run(const std::function<void(int port)>& client) {
    server_ = std::make_unique<AdminServer>(&loop_, hooks, limits);
    REQUIRE(server_->listen(HostPort{"127.0.0.1", 0}) == 0);
    const int port = server_->port();
    REQUIRE(port > 0);
    uv_async_init(&loop_, &done_, on_done);
    done_.data = this;
    std::thread t([&] {
      client(port);
      uv_async_send(&done_);
    });
    uv_run(&loop_, UV_RUN_DEFAULT);
    t.join();
    CHECK(closed_callbacks == 1);
    server_.reset();
    CHECK(uv_loop_close(&loop_) == 0);
  }

 private:
  static void on_done(uv_async_t* a) {
    auto* self = static_cast<Harness*>(a->data);
    self->server_->close([self] { ++self->closed_callbacks; });
    uv_close(reinterpret_cast<uv_handle_t*>(a), nullptr);
  }

  uv_loop_t loop_{};
  uv_async_t done_{};
  std::unique_ptr<AdminServer> server_;
};

}  // namespace

TEST_CASE("AdminHealthzAnswers200Ok") {
  Harness h;
  h.run([](int port) {
    auto r = request(port, get("/healthz"));
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->body == "ok");
  });
}

TEST_CASE("AdminReadyFollowsTheReadyHook") {
  std::atomic<bool> ready{false};
  Harness h;
  h.hooks.ready = [&] { return ready.load(); };
  h.run([&](int port) {
    auto before = request(port, get("/ready"));
    ready = true;
    auto after = request(port, get("/ready"));
    REQUIRE(before);
    REQUIRE(after);
    CHECK(before->status == 503);
    CHECK(after->status == 200);
  });
}

TEST_CASE("AdminConfigServesTheYamlHookAsTextYaml") {
  Harness h;
  h.hooks.config_yaml = [] { return std::string("layer_id: orders\n"); };
  h.run([](int port) {
    auto r = request(port, get("/config"));
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->header("content-type") == "text/yaml; charset=utf-8");
    CHECK(r->body == "layer_id: orders\n");
  });
}

TEST_CASE("AdminMetricsServesPrometheusTextWithVersionedContentType") {
  Harness h;
  h.hooks.metrics_text = [] { return std::string("# HELP m x\n# TYPE m gauge\nm 1\n"); };
  h.run([](int port) {
    auto r = request(port, get("/metrics?name[]=m"));  // a query string does not change the path
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->header("content-type") == "text/plain; version=0.0.4; charset=utf-8");
    CHECK(r->body == "# HELP m x\n# TYPE m gauge\nm 1\n");
  });
}

TEST_CASE("AdminReloadPostAnswers200WhenTakenAnd500WithTheErrorsWhenNot") {
  int calls = 0;
  Harness h;
  h.hooks.reload = [&]() -> std::pair<bool, std::string> {
    ++calls;
    if (calls == 1) return {true, "config generation 2"};
    return {false, "onelayer.yaml:3:5: workers: must be >= 1"};
  };
  h.run([](int port) {
    const std::string post = "POST /reload HTTP/1.1\r\nHost: admin\r\nContent-Length: 0\r\n\r\n";
    auto ok = request(port, post);
    auto bad = request(port, post);
    REQUIRE(ok);
    REQUIRE(bad);
    CHECK(ok->status == 200);
    CHECK(ok->body == "config generation 2\n");
    CHECK(bad->status == 500);
    CHECK(bad->body == "onelayer.yaml:3:5: workers: must be >= 1\n");
  });
  CHECK(calls == 2);
}

TEST_CASE("AdminFaultPassesMethodAndQueryToTheHook") {
  std::vector<std::string> seen;
  Harness h;
  h.hooks.fault = [&](std::string_view method, std::string_view query) -> std::pair<int, std::string> {
    seen.push_back(std::string(method) + " " + std::string(query));
    return {method == "POST" ? 200 : 404, "answer"};
  };
  h.run([](int port) {
    auto post = request(port, "POST /fault?upstream=u&status=503&for=30s HTTP/1.1\r\nHost: admin\r\n\r\n");
    auto del = request(port, "DELETE /fault HTTP/1.1\r\nHost: admin\r\n\r\n");
    auto list = request(port, get("/fault"));
    auto put = request(port, "PUT /fault HTTP/1.1\r\nHost: admin\r\nContent-Length: 0\r\n\r\n");
    REQUIRE(post);
    REQUIRE(del);
    REQUIRE(list);
    REQUIRE(put);
    CHECK(post->status == 200);
    CHECK(post->body == "answer\n");
    CHECK(del->status == 404);
    CHECK(put->status == 405);
    CHECK(put->header("allow") == "GET, HEAD, POST, DELETE");
  });
  CHECK(seen == std::vector<std::string>{"POST upstream=u&status=503&for=30s", "DELETE ", "GET "});
}

TEST_CASE("AdminReloadAndFaultWithoutAHookAnswer501") {
  Harness h;
  h.run([](int port) {
    for (const char* path : {"/reload", "/fault?upstream=u"}) {
      auto r = request(port, std::string("POST ") + path + " HTTP/1.1\r\nHost: admin\r\n\r\n");
      REQUIRE(r);
      CHECK(r->status == 501);
    }
  });
}

TEST_CASE("AdminUnknownPathIs404AndWrongMethodIs405WithAllow") {
  bool reloaded = false;
  Harness h;
  h.hooks.reload = [&]() -> std::pair<bool, std::string> {
    reloaded = true;
    return {true, "ok"};
  };
  h.run([](int port) {
    auto missing = request(port, get("/nope"));
    auto get_reload = request(port, get("/reload"));
    auto post_metrics = request(port, "POST /metrics HTTP/1.1\r\nHost: admin\r\nContent-Length: 2\r\n\r\nhi");
    REQUIRE(missing);
    REQUIRE(get_reload);
    REQUIRE(post_metrics);
    CHECK(missing->status == 404);
    CHECK(get_reload->status == 405);
    CHECK(get_reload->header("allow") == "POST");
    CHECK(post_metrics->status == 405);
    CHECK(post_metrics->header("allow") == "GET, HEAD");
  });
  CHECK_FALSE(reloaded);  // GET /reload must not reload
}

TEST_CASE("AdminHeadRequestGetsHeadersWithoutABody") {
  Harness h;
  h.hooks.metrics_text = [] { return std::string("m 1\n"); };
  h.run([](int port) {
    Client c(port);
    REQUIRE(c.connected());
    CHECK(c.send("HEAD /metrics HTTP/1.1\r\nHost: admin\r\n\r\n" + get("/healthz")));
    auto head = c.read_reply(true);
    auto next = c.read_reply();  // would read the HEAD body instead if one had been sent
    REQUIRE(head);
    REQUIRE(next);
    CHECK(head->header("content-length") == "4");
    CHECK(next->body == "ok");
  });
}

TEST_CASE("AdminKeepAliveServesSequentialAndPipelinedRequestsOnOneConnection") {
  Harness h;
  h.hooks.metrics_text = [] { return std::string("m 1\n"); };
  h.run([](int port) {
    Client c(port);
    REQUIRE(c.connected());
    CHECK(c.send(get("/healthz")));
    auto first = c.read_reply();
    CHECK(c.send(get("/metrics") + get("/nope") + get("/healthz")));  // pipelined in one write
    auto second = c.read_reply();
    auto third = c.read_reply();
    auto fourth = c.read_reply();
    REQUIRE(first);
    REQUIRE(second);
    REQUIRE(third);
    REQUIRE(fourth);
    CHECK(first->header("connection").empty());
    CHECK(second->body == "m 1\n");
    CHECK(third->status == 404);
    CHECK(fourth->body == "ok");
  });
}

TEST_CASE("AdminConnectionCloseRequestIsAnsweredThenTheConnectionCloses") {
  Harness h;
  h.run([](int port) {
    Client c(port);
    REQUIRE(c.connected());
    // The second request arrives after a request that asked to close: ignored.
    CHECK(c.send("GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n" + get("/healthz")));
    auto r = c.read_reply();
    REQUIRE(r);
    CHECK(r->header("connection") == "close");
    CHECK(c.closed_by_server());
  });
}

TEST_CASE("AdminHttp10WithoutKeepAliveIsClosedAndWithKeepAliveIsKept") {
  Harness h;
  h.run([](int port) {
    Client plain(port);
    REQUIRE(plain.connected());
    CHECK(plain.send("GET /healthz HTTP/1.0\r\n\r\n"));
    auto r = plain.read_reply();
    REQUIRE(r);
    CHECK(plain.closed_by_server());

    Client kept(port);
    REQUIRE(kept.connected());
    CHECK(kept.send("GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    auto first = kept.read_reply();
    CHECK(kept.send("GET /healthz HTTP/1.0\r\n\r\n"));
    auto second = kept.read_reply();
    REQUIRE(first);
    REQUIRE(second);
    CHECK(first->header("connection") == "keep-alive");
  });
}

TEST_CASE("AdminMalformedRequestGets400AndTheConnectionCloses") {
  Harness h;
  h.run([](int port) {
    Client c(port);
    REQUIRE(c.connected());
    CHECK(c.send("GET /healthz HTTP/9.9\r\nHost: a\r\n\r\n"));
    auto r = c.read_reply();
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(r->header("connection") == "close");
    CHECK(c.closed_by_server());
  });
}

TEST_CASE("AdminRequestHeadOver16KiBGets431AndTheConnectionCloses") {
  Harness h;
  h.run([](int port) {
    Client c(port);
    REQUIRE(c.connected());
    CHECK(c.send("GET /healthz HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(17 * 1024, 'x') + "\r\n\r\n"));
    auto r = c.read_reply();
    REQUIRE(r);
    CHECK(r->status == 431);
    CHECK(c.closed_by_server());
  });
}

TEST_CASE("AdminHeadJustUnderTheLimitIsServed") {
  Harness h;
  h.run([](int port) {
    auto r = request(port, "GET /healthz HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(15 * 1024, 'x') + "\r\n\r\n");
    REQUIRE(r);
    CHECK(r->status == 200);
  });
}

TEST_CASE("AdminRequestTargetOver16KiBGets414AndTheConnectionCloses") {
  Harness h;
  h.run([](int port) {
    Client c(port);
    REQUIRE(c.connected());
    CHECK(c.send("GET /healthz?pad=" + std::string(17 * 1024, 'x') + " HTTP/1.1\r\nHost: a\r\n\r\n"));
    auto r = c.read_reply();
    REQUIRE(r);
    CHECK(r->status == 414);
    CHECK(c.closed_by_server());
  });
}

TEST_CASE("AdminUpgradeRequestIsAnsweredThenTheConnectionCloses") {
  Harness h;
  h.run([](int port) {
    Client c(port);
    REQUIRE(c.connected());
    // The admin listener never switches protocols: it answers in HTTP/1.1
    // and reads nothing after the request (the pipelined one goes unanswered).
    CHECK(c.send("GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n" +
                 get("/ready")));
    auto r = c.read_reply();
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(c.closed_by_server());
  });
}

TEST_CASE("AdminRequestBodyOverTheLimitGets413") {
  Harness h;
  h.limits.max_body_bytes = 8;
  h.run([](int port) {
    auto r = request(port, "POST /reload HTTP/1.1\r\nHost: a\r\nContent-Length: 9\r\n\r\n123456789");
    REQUIRE(r);
    CHECK(r->status == 413);
  });
}

TEST_CASE("AdminConnectionsBeyondTheLimitAreClosedWithoutAnAnswer") {
  Harness h;
  h.limits.max_connections = 2;
  h.run([](int port) {
    Client a(port), b(port);
    // A completed request proves each connection was accepted and counted.
    CHECK(a.send(get("/healthz")));
    CHECK(a.read_reply());
    CHECK(b.send(get("/healthz")));
    CHECK(b.read_reply());
    Client extra(port);
    REQUIRE(extra.connected());  // the kernel completes the handshake; the server then closes
    extra.send(get("/healthz"));
    CHECK(extra.closed_by_server());
    CHECK(a.send(get("/healthz")));  // the first two still work
    CHECK(a.read_reply());
  });
}

TEST_CASE("AdminIdleConnectionIsClosedByTheServer") {
  Harness h;
  h.limits.idle_timeout_ms = 1;
  h.run([](int port) {
    Client c(port);
    REQUIRE(c.connected());
    CHECK(c.closed_by_server());  // blocks until the server gives up on the silent client
  });
}

TEST_CASE("AdminThrowingHookAnswers500AndKeepsServing") {
  Harness h;
  h.hooks.config_yaml = []() -> std::string { throw std::runtime_error("boom"); };
  h.run([](int port) {
    Client c(port);
    REQUIRE(c.connected());
    CHECK(c.send(get("/config") + get("/healthz")));
    auto r = c.read_reply();
    auto next = c.read_reply();
    REQUIRE(r);
    REQUIRE(next);
    CHECK(r->status == 500);
    CHECK(r->body == "internal error: boom\n");
    CHECK(next->status == 200);
  });
}

TEST_CASE("AdminCloseIsIdempotentAndCallsEachCallbackOnce") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  int first = 0, second = 0, late = 0;
  {
    AdminServer server(&loop, {});
    REQUIRE(server.listen(HostPort{"127.0.0.1", 0}) == 0);
    server.close([&] { ++first; });
    server.close([&] { ++second; });
    CHECK(first == 0);  // the listener closes on a later loop turn
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(first == 1);
    CHECK(second == 1);
    server.close([&] { ++late; });  // everything is closed already: runs at once
    CHECK(late == 1);
    CHECK(server.listen(HostPort{"127.0.0.1", 0}) == UV_EINVAL);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(first == 1);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("AdminListenOnABusyPortFailsAndTheLoopStillClosesCleanly") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  int closed = 0;
  {
    AdminServer first(&loop, {});
    AdminServer second(&loop, {});
    REQUIRE(first.listen(HostPort{"127.0.0.1", 0}) == 0);
    CHECK(first.listen(HostPort{"127.0.0.1", 0}) == UV_EBUSY);
    const int port = first.port();
    CHECK(second.listen(HostPort{"127.0.0.1", static_cast<uint16_t>(port)}) == UV_EADDRINUSE);
    CHECK(second.port() == 0);
    first.close([&] { ++closed; });
    second.close([&] { ++closed; });
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  CHECK(closed == 2);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("AdminListenOnAnUnresolvableHostFails") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    AdminServer server(&loop, {});
    CHECK(server.listen(HostPort{"no such host.invalid", 0}) < 0);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("AdminDestroyedWithAnOpenConnectionFreesItsHandlesOnTheNextLoopRun") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  auto server = std::make_unique<AdminServer>(&loop, AdminServer::Hooks{});
  REQUIRE(server->listen(HostPort{"127.0.0.1", 0}) == 0);
  const int port = server->port();
  std::promise<void> server_gone;
  auto gone = server_gone.get_future();
  uv_async_t done;
  struct Ctx {
    std::unique_ptr<AdminServer>* server;
    std::promise<void>* gone;
    size_t connections_seen;
  } ctx{&server, &server_gone, 0};
  done.data = &ctx;
  uv_async_init(&loop, &done, [](uv_async_t* a) {
    auto* c = static_cast<Ctx*>(a->data);
    c->connections_seen = (*c->server)->connection_count();
    c->server->reset();  // no close() first: the destructor starts it
    c->gone->set_value();
    uv_close(reinterpret_cast<uv_handle_t*>(a), nullptr);
  });
  std::optional<Reply> reply;
  std::thread client([&] {
    Client c(port);
    c.send(get("/healthz"));
    reply = c.read_reply();
    uv_async_send(&done);
    gone.wait();  // keep the connection open until the server is destroyed
  });
  uv_run(&loop, UV_RUN_DEFAULT);
  client.join();
  REQUIRE(reply);
  CHECK(reply->status == 200);
  CHECK(ctx.connections_seen == 1);
  CHECK(uv_loop_close(&loop) == 0);
}

}  // namespace onelayer
