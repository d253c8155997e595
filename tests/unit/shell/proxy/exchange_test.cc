// The exchange's state machine with fake streams: no socket is opened. A
// FakeDownstream records what the client would see, FakeUpstreams (handed
// out by a FakeFactory installed on the worker) record what each attempt
// sent, and the tests play the upstream's part through the Receiver the
// exchange gives each stream. Timers (backoff, deadlines) are the worker's
// timer list, driven by running the worker's loop.
#include "core/base/default_random.h"
#include "shell/proxy/exchange.h"

#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/config/config_loader.h"
#include "core/base/grpc_timeout.h"
#include "shell/http2/h2_session.h"
#include "shell/io/connection_host.h"
#include "shell/proxy/endpoint_state.h"
#include "shell/proxy/proxy_host.h"
#include "shell/memory/spare_string_rooms.h"
#include "shell/server/worker.h"

using namespace onelayer;
using namespace std::chrono_literals;

namespace {

// One listener, three routes: GET (and other safe methods) with retries, POST
// with an idempotency key, and a route whose deadline is 50 ms. The upstream
// address is never dialled: the factory below is fake.
constexpr const char* kConfig = R"(layer_id: edge
listeners:
  - name: out
    listen: 127.0.0.1:0
    limits: { idle_timeout: 200ms, max_body_bytes: 512KiB }
    routes:
      - name: slow
        match: { path_prefix: /slow }
        upstream: up
        timeout: 50ms
        retry: { max_attempts: 3, retry_on: [connect-failure, reset, 503], backoff: { base: 1ms, cap: 2ms, jitter: none } }
      - name: post
        match: { methods: [POST] }
        upstream: up
        timeout: 5s
        retry:
          max_attempts: 3
          retry_on: [connect-failure, reset, 503]
          backoff: { base: 1ms, cap: 2ms, jitter: none }
          idempotency_key: Idempotency-Key
      - name: pertry
        match: { path_prefix: /pertry }
        upstream: up
        timeout: 5s
        retry: { max_attempts: 2, per_try_timeout: 30ms, retry_on: [connect-failure, reset, timeout], backoff: { base: 1ms, cap: 2ms, jitter: none } }
      - name: main
        upstream: up
        timeout: 5s
        inner_hops: forbid
        retry: { max_attempts: 2, retry_on: [connect-failure, reset, 503], backoff: { base: 1ms, cap: 2ms, jitter: none } }
upstreams:
  - name: up
    endpoints: [127.0.0.1:9]
    retry_budget: { ratio: 1.0, min_per_second: 100 }
)";

constexpr size_t kRouteSlow = 0, kRoutePost = 1, kRoutePerTry = 2, kRouteMain = 3;

// Every call the exchange makes on the client side.
class FakeDownstream final : public DownstreamStream {
 public:
  struct Head {
    int status = 0;
    Headers headers;  // the upstream's fields as given
    Headers extra;    // ResponseMeta.extra
    bool no_body = false;
  };
  struct ProxyResponse {
    int status = 0;
    std::string reason;
    Headers extra;
    bool request_complete = false;
  };

  std::vector<Head> heads;
  std::string body;
  int body_calls = 0;
  std::vector<Headers> trailers;
  int ends = 0;
  std::vector<ProxyResponse> proxy_responses;
  int done = 0;
  std::vector<std::string> aborts;
  int flushes = 0;
  size_t queued = 0;  // what queued_bytes() answers
  bool held = false;
  bool refuse_heads = false;  // send_response_head: this response cannot reach the client
  WireProtocol wire = WireProtocol::http1;  // what protocol() answers
  bool reports_sent = false;  // what reports_body_sent() answers (HTTP/2's)
  Watermarks marks = kMessageWatermarks;  // what message_watermarks() answers

  WireProtocol protocol() const override { return wire; }
  const std::string& peer_ip() const override { return peer_; }
  bool over_tls() const override { return false; }
  bool send_response_head(const MessageHead& head, const ResponseMeta& meta) override {
    if (refuse_heads) return false;
    Head h;
    h.status = head.status;
    h.headers = head.headers;
    if (meta.extra) h.extra = *meta.extra;
    h.no_body = meta.no_body;
    heads.push_back(std::move(h));
    return true;
  }
  bool send_response_body(std::string_view bytes) override {
    ++body_calls;
    body.append(bytes);
    return true;
  }
  void send_response_trailers(const Headers& t) override { trailers.push_back(t); }
  void send_response_end() override { ++ends; }
  void flush() override { ++flushes; }
  void send_proxy_response(int status, const char* reason, const Headers& extra, bool,
                           bool request_complete) override {
    proxy_responses.push_back({status, reason, extra, request_complete});
  }
  size_t queued_bytes() const override { return queued; }
  bool reports_body_sent() const override { return reports_sent; }
  Watermarks message_watermarks() const override { return marks; }
  uint64_t response_bytes() const override { return body.size(); }
  void hold_request_body() override { held = true; }
  void release_request_body() override { held = false; }
  bool request_body_held() const override { return held; }
  // The test owns the exchange: nothing is freed here.
  void exchange_done() override { ++done; }
  void abort_stream(const char* reason) override { aborts.emplace_back(reason); }

  // Answers of any kind the client got: proxied heads plus onelayer's own.
  size_t answers() const { return heads.size() + proxy_responses.size(); }

 private:
  std::string peer_ = "127.0.0.1";
};

// One attempt's stream: what was sent, and how the exchange let go of it.
// Kept alive by the factory after release()/cancel() so the test can look.
class FakeUpstream final : public UpstreamStream {
 public:
  UpstreamStream::Receiver* r = nullptr;
  bool is_ready = false;
  int requests = 0;  // send_request calls
  std::string method, target;
  Headers rewritten;  // the fields the request would carry (rewrite applied)
  uint32_t attempt = 0;  // RequestRewrite::attempt
  std::string body;      // bytes with the head and after it
  bool end = false;
  Headers trailers;      // the request's trailers (with the head, or at its end)
  int trailer_calls = 0;  // send_request_trailers calls
  int pauses = 0, resumes = 0;
  std::vector<size_t> window_given;  // response_body_sent() calls
  int releases = 0, cancels = 0;
  bool released_reusable = false;
  bool cancelled_with_reset = false;
  int send_result = 0;  // what send_request answers (<0: the write failed)
  size_t queued = 0;    // what queued_bytes() answers

  bool ready() const override { return is_ready; }
  bool closing() const override { return gone(); }
  Millis connect_timeout() const override { return 250ms; }
  int send_request(const OutgoingRequest& req) override {
    CHECK_FALSE(gone());
    ++requests;
    method = req.head->method;
    target = std::string(req.target);
    // The rewrite lives only for this call: read it now.
    REQUIRE(req.rewrite != nullptr);
    attempt = req.rewrite->attempt;
    rewrite_request_headers(req.head->headers, *req.rewrite, rewritten);
    body.append(req.body);
    end = req.end;
    if (req.trailers) trailers = *req.trailers;
    return send_result;
  }
  void send_request_body(std::string_view bytes) override {
    CHECK_FALSE(gone());
    body.append(bytes);
  }
  void send_request_end() override {
    CHECK_FALSE(gone());
    end = true;
  }
  void send_request_trailers(const Headers& t) override {
    CHECK_FALSE(gone());
    ++trailer_calls;
    trailers = t;
    end = true;
  }
  size_t queued_bytes() const override { return queued; }
  void pause_response() override { ++pauses; }
  void resume_response() override { ++resumes; }
  void response_body_sent(size_t n) override {
    CHECK_FALSE(gone());
    window_given.push_back(n);
  }
  void release(bool reusable) override {
    CHECK_FALSE(gone());
    ++releases;
    released_reusable = reusable;
  }
  void cancel(bool reset) override {
    CHECK_FALSE(gone());
    ++cancels;
    cancelled_with_reset = reset;
  }
  bool gone() const { return releases + cancels > 0; }

  std::string field(std::string_view name) const {
    const Header* h = find_header(rewritten, name);
    return h ? h->value : std::string("<none>");
  }
};

class FakeFactory final : public UpstreamStreamFactory {
 public:
  std::vector<std::unique_ptr<FakeUpstream>> streams;
  bool ready_at_once = false;  // a pooled connection: the exchange sends at once
  int send_result = 0;         // given to each new stream
  ConnectionHost* host = nullptr;  // what the last open() was given
  EndpointState* endpoint = nullptr;

  UpstreamStream* open(ConnectionHost* c, EndpointState* ep, const Upstream&, int,
                       const std::shared_ptr<TlsClientContext>&, UpstreamStream::Receiver* r, bool, Millis) override {
    host = c;
    endpoint = ep;
    auto s = std::make_unique<FakeUpstream>();
    s->r = r;
    s->is_ready = ready_at_once;
    s->send_result = send_result;
    streams.push_back(std::move(s));
    return streams.back().get();
  }
  size_t opens() const { return streams.size(); }
  FakeUpstream& at(size_t i) {
    REQUIRE(i < streams.size());
    return *streams[i];
  }
};

MessageHead request_head(std::string method, std::string target, Headers more = {}) {
  MessageHead h;
  h.method = std::move(method);
  h.target = std::move(target);
  h.headers.push_back({"Host", "svc.test"});
  for (Header& f : more) h.headers.push_back(std::move(f));
  for (const Header& f : h.headers) {
    if (f.name == "Content-Length") {
      h.has_content_length = true;
      h.content_length = std::stoull(f.value);
    }
  }
  return h;
}

MessageHead response_head(int status, Headers fields = {}) {
  MessageHead h;
  h.status = status;
  h.reason = "R";
  h.headers = std::move(fields);
  return h;
}

ConfigPtr test_config() {
  LoadResult r = load_config_string(kConfig, "exchange_test.yaml");
  INFO(format_errors(r.errors));
  REQUIRE(r.ok());
  return r.config;
}

// A runtime with the config above, a worker that is never started (its
// loop is run by hand), the fake factory installed, and the exchange.
class Harness {
 public:
  FakeFactory factory;  // outlives the exchange (its destructor may cancel)
  FakeDownstream down;
  Runtime rt;
  Worker w{rt, 0};
  std::unique_ptr<Exchange> ex;

  explicit Harness(ConfigPtr config = test_config()) {
    rt.install(std::move(config));
    w.set_upstream_streams(&factory);
  }
  ~Harness() {
    ex.reset();  // disarms its timer entry while the list exists
    // Close the worker's handles so its loop closes cleanly (no leak).
    w.post_force_close();
    uv_run(w.loop(), UV_RUN_DEFAULT);
  }

  Exchange& begin(size_t route, MessageHead head) {
    GenerationPtr gen = w.generation();
    Admission a;
    a.listener_index = 0;
    a.route = &gen->config->listeners[0].routes[route];
    a.metrics = gen->route_metrics[0][route];
    a.upstream_target = head.target;
    a.gen = gen;
    uv_update_time(w.loop());  // the timer list reads loop time
    ex = std::make_unique<Exchange>(&down, &w, a, head);
    ex->start();
    return *ex;
  }

  // A GET read whole (head and end) on `route`.
  Exchange& get(size_t route = kRouteMain, std::string target = "/", Headers fields = {}) {
    Exchange& e = begin(route, request_head("GET", std::move(target), std::move(fields)));
    e.on_request_end();
    return e;
  }

  // Runs the worker's loop until `done()` holds; false after 2 s.
  template <class Pred>
  bool run_until(Pred done) {
    const auto give_up = std::chrono::steady_clock::now() + 2s;
    while (!done()) {
      if (std::chrono::steady_clock::now() > give_up) return false;
      uv_run(w.loop(), UV_RUN_NOWAIT);
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }

  // The backoff timer runs out and attempt `n` (1-based) opens its stream.
  void await_attempt(size_t n) {
    REQUIRE(run_until([&] { return factory.opens() == n; }));
  }
  // The loop runs on a while and no attempt past the `n`th one opens.
  void check_no_more_attempts(size_t n) {
    run_for(30ms);
    CHECK(factory.opens() == n);
  }

  // The second attempt opens after the backoff, carries x-retry-attempt: 2,
  // is answered 200 "ok", and that answer alone reaches the client.
  FakeUpstream& retry_succeeds() {
    await_attempt(2);
    FakeUpstream& second = connect(1);
    CHECK(second.requests == 1);
    CHECK(second.attempt == 2);
    CHECK(second.field("x-retry-attempt") == "2");
    CHECK(second.end);
    answer(1, 200, "ok");
    REQUIRE(down.heads.size() == 1);
    CHECK(down.heads[0].status == 200);
    CHECK(down.body == "ok");
    CHECK(down.proxy_responses.empty());
    CHECK(down.aborts.empty());
    CHECK(down.done == 1);
    CHECK(second.releases == 1);
    return second;
  }

  // Runs the worker's loop for `ms` (nothing is expected to happen).
  void run_for(Millis ms) {
    const auto until = std::chrono::steady_clock::now() + ms;
    while (std::chrono::steady_clock::now() < until) {
      uv_run(w.loop(), UV_RUN_NOWAIT);
      std::this_thread::sleep_for(1ms);
    }
  }

  // The stream of attempt `i` (0-based) connects and gets the request.
  FakeUpstream& connect(size_t i) {
    FakeUpstream& u = factory.at(i);
    u.is_ready = true;
    u.r->on_connected();
    return u;
  }
  // Stream `i` connects and its 200 head reaches the client.
  FakeUpstream& response_started(size_t i) {
    FakeUpstream& u = connect(i);
    MessageHead h = response_head(200);
    CHECK(u.r->on_up_head(h) == 0);
    return u;
  }
  // The client got onelayer's own answer, once, and nothing else.
  void check_proxy_answer(int status, std::string_view reason) {
    REQUIRE(down.proxy_responses.size() == 1);
    CHECK(down.proxy_responses[0].status == status);
    CHECK(down.proxy_responses[0].reason == reason);
    CHECK(down.heads.empty());
    CHECK(down.aborts.empty());
    CHECK(down.done == 1);
  }
  // The client got the upstream's `status` with `body`, whole, once.
  void check_proxied_answer(int status, std::string_view body) {
    REQUIRE(down.heads.size() == 1);
    CHECK(down.heads[0].status == status);
    CHECK(down.body == body);
    CHECK(down.ends == 1);
    CHECK(down.proxy_responses.empty());
    CHECK(down.aborts.empty());
    CHECK(down.done == 1);
  }
  // The upstream answers `status` with `body` on stream `i`.
  void answer(size_t i, int status, std::string_view body, Headers fields = {}) {
    FakeUpstream& u = factory.at(i);
    MessageHead h = response_head(status, std::move(fields));
    int rc = u.r->on_up_head(h);
    if (rc < 0) return;  // retried (or refused): the stream is gone
    CHECK(rc == 0);
    if (!body.empty()) CHECK(u.r->on_up_body(body.data(), body.size()) == 0);
    u.r->on_up_end(true);
  }
};

std::string extra_field(const Headers& h, std::string_view name) {
  const Header* f = find_header(h, name);
  return f ? f->value : std::string("<none>");
}

}  // namespace

TEST_CASE("exchange: a GET answered 200 reaches the client, the stream goes back to the pool") {
  Harness t;
  t.get();
  REQUIRE(t.factory.opens() == 1);
  FakeUpstream& u = t.connect(0);
  CHECK(u.requests == 1);
  CHECK(u.method == "GET");
  CHECK(u.target == "/");
  CHECK(u.end);
  CHECK(u.body.empty());
  CHECK(u.attempt == 1);
  CHECK(u.field("x-retry-attempt") == "1");
  CHECK(u.field("x-retry-owner") == "edge");
  CHECK(u.field("Host") == "svc.test");

  t.answer(0, 200, "hello", {{"Content-Type", "text/plain"}});
  REQUIRE(t.down.heads.size() == 1);
  CHECK(t.down.heads[0].status == 200);
  CHECK(extra_field(t.down.heads[0].headers, "Content-Type") == "text/plain");
  CHECK(t.down.heads[0].extra.empty());
  CHECK(t.down.body == "hello");
  CHECK(t.down.ends == 1);
  CHECK(t.down.proxy_responses.empty());
  CHECK(t.down.aborts.empty());
  CHECK(t.down.done == 1);
  CHECK(u.releases == 1);
  CHECK(u.released_reusable);
  CHECK(u.cancels == 0);
  CHECK(t.factory.opens() == 1);
}

// A host of the exchange's own, no Worker: one endpoint for every lookup,
// each lookup noted.
class TestProxyHost final : public ConnectionHost, public ProxyHost {
 public:
  explicit TestProxyHost(Runtime& rt) : ConnectionHost(rt.metrics), ProxyHost(*this, rt, random_) {}
  ~TestProxyHost() {
    timers().close();
    uv_run(loop(), UV_RUN_NOWAIT);  // close callbacks
    uv_loop_close(loop());
  }
  EndpointState* endpoint(const HostPort& hp, const Upstream& u, uint64_t) override {
    looked_up.push_back(u.name + "|" + hp.to_string());
    return &endpoint_;
  }
  EndpointState* destination_endpoint(const Destination&, const Upstream&) override { return &endpoint_; }

  std::vector<std::string> looked_up;
  EndpointState endpoint_;

 private:
  DefaultRandom random_{42};
};

TEST_CASE("exchange: runs on any ProxyHost: its endpoint, timers and stream factory are the host's") {
  FakeFactory factory;
  FakeDownstream down;
  Runtime rt;
  rt.install(test_config());
  TestProxyHost host(rt);
  host.set_upstream_streams(&factory);
  GenerationPtr gen = rt.current();
  Admission a;
  a.listener_index = 0;
  a.route = &gen->config->listeners[0].routes[kRouteMain];
  a.metrics = gen->route_metrics[0][kRouteMain];
  a.upstream_target = "/";
  a.gen = gen;
  uv_update_time(host.loop());
  MessageHead head = request_head("GET", "/");
  auto ex = std::make_unique<Exchange>(&down, &host, a, head);
  ex->start();
  ex->on_request_end();
  REQUIRE(factory.opens() == 1);
  CHECK(host.looked_up == std::vector<std::string>{"up|127.0.0.1:9"});
  CHECK(factory.host == static_cast<ConnectionHost*>(&host));
  CHECK(factory.endpoint == &host.endpoint_);
  CHECK(host.timers().size() > 0);  // the attempt's deadline is an entry of the host's timers
  FakeUpstream& u = factory.at(0);
  u.is_ready = true;
  u.r->on_connected();
  MessageHead h = response_head(200);
  CHECK(u.r->on_up_head(h) == 0);
  u.r->on_up_end(true);
  CHECK(down.heads.size() == 1);
  CHECK(down.done == 1);
  CHECK(u.releases == 1);
  ex.reset();
  CHECK(host.timers().size() == 0);
}

TEST_CASE("exchange: an HTTP/2 request's field list is kept for the next HTTP/2 head when the exchange ends") {
  for (WireProtocol wire : {WireProtocol::h2, WireProtocol::http1}) {
    CAPTURE(static_cast<int>(wire));
    Harness t;
    t.down.wire = wire;
    const size_t spares = H2Session::spare_field_lists();
    MessageHead head = request_head("GET", "/", {{"user-agent", "a client of twenty-odd bytes"}});
    if (wire == WireProtocol::h2) head.http_major = 2;  // as the HTTP/2 downstream translates it
    t.begin(kRouteMain, std::move(head)).on_request_end();
    t.connect(0);
    t.answer(0, 200, "ok");
    REQUIRE(t.down.done == 1);
    CHECK(H2Session::spare_field_lists() == spares);  // still the exchange's
    t.ex.reset();
    CHECK(H2Session::spare_field_lists() == spares + (wire == WireProtocol::h2 ? 1 : 0));
  }
}

TEST_CASE("exchange: a 503 is retried after the backoff and the client sees only the 200") {
  Harness t;
  t.get();
  t.connect(0);
  t.answer(0, 503, "busy");
  FakeUpstream& first = t.factory.at(0);
  CHECK(first.cancels == 1);  // let go of, not pooled: its body was never read
  CHECK(first.releases == 0);
  CHECK(t.down.answers() == 0);
  CHECK(t.down.body.empty());
  CHECK(t.factory.opens() == 1);  // the backoff timer comes first

  t.retry_succeeds();
  CHECK(extra_field(t.down.heads[0].extra, "x-retry-exhausted") == "<none>");
  CHECK(t.factory.opens() == 2);
}

TEST_CASE("exchange: only the attempt right after a refused one asks for a connection opened since") {
  Harness t;
  t.get();
  t.connect(0).r->on_up_refused();
  t.await_attempt(2);
  FakeUpstream& second = t.connect(1);
  CHECK(second.r->follows_refusal());
  t.answer(1, 503, "busy");
  t.await_attempt(3);
  FakeUpstream& third = t.connect(2);
  CHECK_FALSE(third.r->follows_refusal());  // after a 503, any connection will do
  t.answer(2, 200, "ok");
  REQUIRE(t.down.heads.size() == 1);
  CHECK(t.down.heads[0].status == 200);
}

TEST_CASE("exchange: a POST without idempotency key is not retried after a reset") {
  Harness t;
  Exchange& ex = t.begin(kRoutePost, request_head("POST", "/orders", {{"Content-Length", "5"}}));
  CHECK(t.factory.opens() == 0);  // a replayable body is read whole first
  ex.on_request_body("hello", 5);
  ex.on_request_end();
  REQUIRE(t.factory.opens() == 1);
  FakeUpstream& u = t.connect(0);
  CHECK(u.method == "POST");
  CHECK(u.body == "hello");
  CHECK(u.end);

  u.r->on_up_error(UV_ECONNRESET);
  CHECK(u.cancels == 1);
  t.check_proxy_answer(502, "upstream_reset");
  CHECK(t.down.proxy_responses[0].request_complete);
  // Nothing more happens on the loop: no second attempt.
  t.check_no_more_attempts(1);
}

TEST_CASE("exchange: a POST whose stream was refused is retried with its body replayed") {
  Harness t;
  Exchange& ex = t.begin(kRoutePost, request_head("POST", "/orders", {{"Content-Length", "5"}}));
  ex.on_request_body("hello", 5);
  ex.on_request_end();
  FakeUpstream& first = t.connect(0);
  CHECK_FALSE(first.r->follows_refusal());
  first.r->on_up_refused();
  CHECK(first.cancels == 1);
  CHECK(t.down.answers() == 0);

  t.await_attempt(2);
  FakeUpstream& second = t.connect(1);
  CHECK(second.r->follows_refusal());  // asked for a connection opened since the refusal
  CHECK(second.method == "POST");
  CHECK(second.body == "hello");
  CHECK(second.end);
  CHECK(second.attempt == 1);  // a re-send keeps the number of the attempt it sends again
  t.answer(1, 201, "made");
  REQUIRE(t.down.heads.size() == 1);
  CHECK(t.down.heads[0].status == 201);
  CHECK(t.down.body == "made");
  CHECK(t.down.proxy_responses.empty());
  CHECK(t.down.done == 1);
}

TEST_CASE("exchange: a request body's buffer room is kept when the exchange ends and serves the next body") {
  Harness t;
  const std::string body(64, 'b');  // over std::string's inline room
  auto post = [&] {
    Exchange& ex = t.begin(kRoutePost, request_head("POST", "/orders", {{"Content-Length", "64"}}));
    ex.on_request_body(body.data(), body.size());
    ex.on_request_end();
    return &ex;
  };
  post();
  FakeUpstream& first = t.connect(0);
  CHECK(first.body == body);
  t.answer(0, 201, "made");
  const size_t spares = SpareStringRooms::kept();
  t.ex.reset();
  CHECK(SpareStringRooms::kept() == spares + 1);
  post();
  CHECK(SpareStringRooms::kept() == spares);  // taken by the second body
  FakeUpstream& second = t.connect(1);
  CHECK(second.body == body);
}

TEST_CASE("exchange: a failed connect is retried on a new stream") {
  Harness t;
  t.get();
  REQUIRE(t.factory.opens() == 1);
  FakeUpstream& first = t.factory.at(0);
  first.r->on_connect_failed(UV_ECONNREFUSED, false);
  CHECK(first.requests == 0);
  CHECK(first.cancels == 1);
  CHECK(t.down.answers() == 0);

  t.retry_succeeds();
}

TEST_CASE("exchange: a pooled stream that is ready at once gets the request without on_connected") {
  Harness t;
  t.factory.ready_at_once = true;
  Exchange& ex = t.begin(kRouteMain, request_head("GET", "/"));
  REQUIRE(t.factory.opens() == 1);
  FakeUpstream& u = t.factory.at(0);
  CHECK(u.requests == 1);
  CHECK_FALSE(u.end);  // the request's end has not been read yet
  ex.on_request_end();
  CHECK(u.end);
  t.answer(0, 204, "");
  REQUIRE(t.down.heads.size() == 1);
  CHECK(t.down.heads[0].no_body);
  CHECK(t.down.done == 1);
  CHECK(u.releases == 1);
}

TEST_CASE("exchange: attempts exhausted: the client gets the last 503 marked x-retry-exhausted") {
  Harness t;
  t.get();
  t.connect(0);
  t.answer(0, 503, "first");
  t.await_attempt(2);
  t.connect(1);
  t.answer(1, 503, "second");
  t.check_proxied_answer(503, "second");
  CHECK(extra_field(t.down.heads[0].extra, "x-retry-exhausted") == "2");
  CHECK(t.factory.at(0).cancels == 1);
  CHECK(t.factory.at(1).releases == 1);
  t.check_no_more_attempts(2);
}

TEST_CASE("exchange: no head before the route's deadline: 504 and the upstream cancelled") {
  Harness t;
  const auto t0 = std::chrono::steady_clock::now();
  t.get(kRouteSlow, "/slow");
  FakeUpstream& u = t.connect(0);
  CHECK(u.requests == 1);
  REQUIRE(t.run_until([&] { return t.down.answers() > 0; }));
  CHECK(std::chrono::steady_clock::now() - t0 >= 45ms);
  t.check_proxy_answer(504, "deadline_exceeded");
  CHECK(u.cancels == 1);
  CHECK(t.factory.opens() == 1);
}

TEST_CASE("exchange: the client going away mid-response cancels the upstream") {
  Harness t;
  Exchange& ex = t.get();
  FakeUpstream& u = t.response_started(0);
  CHECK(u.r->on_up_body("part", 4) == 0);
  ex.abort("client_closed");
  CHECK(u.cancels == 1);
  CHECK(u.releases == 0);
  CHECK(t.down.heads.size() == 1);
  CHECK(t.down.ends == 0);
  CHECK(t.down.done == 0);  // the downstream ended it: nothing to tell it
  CHECK(t.down.aborts.empty());
  CHECK(t.down.proxy_responses.empty());
  // Late events of the cancelled stream are ignored.
  CHECK(ex.on_up_body("more", 4) == -1);
  CHECK(t.down.body == "part");
}

TEST_CASE("exchange: an upstream error after the head went out aborts the client's stream") {
  Harness t;
  t.get();
  FakeUpstream& u = t.response_started(0);
  CHECK(u.r->on_up_body("part", 4) == 0);
  u.r->on_up_error(UV_ECONNRESET);
  CHECK(u.cancels == 1);
  REQUIRE(t.down.aborts.size() == 1);
  CHECK(t.down.aborts[0] == "upstream_reset");
  CHECK(t.down.heads.size() == 1);
  CHECK(t.down.proxy_responses.empty());  // never a second answer
  CHECK(t.down.ends == 0);
  CHECK(t.down.done == 0);
  t.check_no_more_attempts(1);  // not retried: bytes went to the client
}

TEST_CASE("exchange: a slow client pauses the upstream's response and a drained one resumes it") {
  Harness t;
  Exchange& ex = t.get();
  FakeUpstream& u = t.response_started(0);
  const std::string chunk(16 * 1024, 'x');
  CHECK(u.r->on_up_body(chunk.data(), chunk.size()) == 0);
  CHECK(u.pauses == 0);  // the client keeps up
  t.down.queued = 300 * 1024;
  CHECK(u.r->on_up_body(chunk.data(), chunk.size()) == 0);
  CHECK(u.pauses == 1);
  CHECK(u.resumes == 0);
  t.down.queued = 100 * 1024;  // still above the low-water mark
  ex.on_down_drained();
  CHECK(u.resumes == 0);
  t.down.queued = 1000;
  ex.on_down_drained();
  CHECK(u.resumes == 1);
  u.r->on_up_end(true);
  CHECK(t.down.body.size() == 2 * chunk.size());
  CHECK(t.down.done == 1);
  CHECK(u.releases == 1);
}

TEST_CASE("exchange: an HTTP/2 client's response window goes back upstream as the client takes the body, no sooner") {
  Harness t;
  t.down.reports_sent = true;
  Exchange& ex = t.get();
  FakeUpstream& u = t.response_started(0);
  CHECK(u.r->reopens_response_window());
  const std::string chunk(16 * 1024, 'x');
  CHECK(u.r->on_up_body(chunk.data(), chunk.size()) == 0);
  CHECK(u.r->on_up_body(chunk.data(), chunk.size()) == 0);
  CHECK(u.window_given.empty());  // queued, not yet taken
  ex.on_down_body_sent(10000);
  ex.on_down_body_sent(chunk.size());
  CHECK(u.window_given == std::vector<size_t>{10000, chunk.size()});
  // Bytes that did not come from the upstream (more than it sent) give
  // back nothing more.
  ex.on_down_body_sent(2 * chunk.size());
  CHECK(u.window_given == std::vector<size_t>{10000, chunk.size(), chunk.size() - 10000});
  ex.on_down_body_sent(100);
  CHECK(u.window_given.size() == 3);
  CHECK(u.pauses == 0);
  u.r->on_up_end(true);
  CHECK(u.releases == 1);
  ex.on_down_body_sent(100);  // the stream is gone: nothing is given to it
  CHECK(u.window_given.size() == 3);
}

TEST_CASE("exchange: an HTTP/1.1 client's response window is the upstream stream's to give back") {
  Harness t;
  Exchange& ex = t.get();
  FakeUpstream& u = t.response_started(0);
  CHECK_FALSE(u.r->reopens_response_window());
  const std::string chunk(1000, 'x');
  CHECK(u.r->on_up_body(chunk.data(), chunk.size()) == 0);
  ex.on_down_body_sent(chunk.size());
  CHECK(u.window_given.empty());
  u.r->on_up_end(true);
}

TEST_CASE("exchange: connect failures until the attempts run out: 502 marked x-retry-exhausted") {
  Harness t;
  t.get();
  t.factory.at(0).r->on_connect_failed(UV_ECONNREFUSED, false);
  t.await_attempt(2);
  t.factory.at(1).r->on_connect_failed(UV_ECONNREFUSED, false);
  t.check_proxy_answer(502, "connect_failure");
  CHECK(extra_field(t.down.proxy_responses[0].extra, "x-retry-exhausted") == "2");
  CHECK(t.factory.at(0).cancels == 1);
  CHECK(t.factory.at(1).cancels == 1);
  t.check_no_more_attempts(2);
}

TEST_CASE("exchange: a request whose write failed is retried on a new stream") {
  Harness t;
  t.factory.send_result = UV_EPIPE;
  t.get();
  FakeUpstream& first = t.connect(0);
  CHECK(first.requests == 1);
  CHECK(first.cancels == 1);
  CHECK(t.down.answers() == 0);
  t.factory.send_result = 0;
  t.retry_succeeds();
}

TEST_CASE("exchange: the upstream's trailers reach the client before the end") {
  Harness t;
  t.get();
  FakeUpstream& u = t.response_started(0);
  CHECK(u.r->on_up_body("data", 4) == 0);
  Headers tr{{"grpc-status", "0"}};
  u.r->on_up_trailers(tr);
  CHECK(t.down.ends == 0);
  u.r->on_up_end(true);
  REQUIRE(t.down.trailers.size() == 1);
  CHECK(t.down.trailers[0] == Headers{{"grpc-status", "0"}});
  CHECK(t.down.ends == 1);
  CHECK(t.down.done == 1);
  CHECK(u.releases == 1);
}

TEST_CASE("exchange: a response body that stalls past idle_timeout is cut") {
  Harness t;
  t.get();
  FakeUpstream& u = t.response_started(0);
  CHECK(u.r->on_up_body("data", 4) == 0);
  REQUIRE(t.run_until([&] { return !t.down.aborts.empty(); }));
  REQUIRE(t.down.aborts.size() == 1);
  CHECK(t.down.aborts[0] == "stream_stalled");
  CHECK(u.cancels == 1);
  CHECK(t.down.ends == 0);
  CHECK(t.down.done == 0);
  CHECK(t.down.proxy_responses.empty());
}

TEST_CASE("exchange: request trailers go with the end, filtered, and again on the retry") {
  Harness t;
  MessageHead head = request_head("POST", "/orders", {{"Idempotency-Key", "k1"}});
  head.chunked = true;
  Exchange& ex = t.begin(kRoutePost, head);
  ex.on_request_body("hello", 5);
  ex.on_request_trailers({{"X-Sum", "1"}, {"Host", "evil"}, {"Content-Length", "9"}, {"x-rows", "2"}});
  ex.on_request_end();
  const Headers kept = {{"X-Sum", "1"}, {"x-rows", "2"}};
  FakeUpstream& first = t.connect(0);
  CHECK(first.body == "hello");
  CHECK(first.end);
  CHECK(first.trailers == kept);  // read whole first: they go with the head
  t.answer(0, 503, "busy");
  t.await_attempt(2);
  FakeUpstream& second = t.connect(1);
  CHECK(second.body == "hello");
  CHECK(second.trailers == kept);
  t.answer(1, 201, "made");
  CHECK(t.down.heads.size() == 1);
}

TEST_CASE("exchange: a streaming body's trailers end the request after its bytes") {
  Harness t;
  MessageHead head = request_head("PUT", "/big");
  head.chunked = true;
  Exchange& ex = t.begin(kRouteMain, head);
  const std::string chunk(70 * 1024, 'b');  // past buffer_limit: streams
  ex.on_request_body(chunk.data(), chunk.size());
  FakeUpstream& u = t.connect(0);
  CHECK_FALSE(u.end);
  CHECK(u.trailers.empty());
  ex.on_request_trailers({{"x-sum", "9"}});
  ex.on_request_end();
  CHECK(u.body == chunk);
  CHECK(u.trailer_calls == 1);
  CHECK(u.trailers == Headers{{"x-sum", "9"}});
  CHECK(u.end);
}

TEST_CASE("exchange: a body past buffer_limit streams, is held back under backpressure and never replayed") {
  Harness t;
  Exchange& ex = t.begin(kRouteMain, request_head("PUT", "/big", {{"Content-Length", "1048576"}}));
  REQUIRE(t.factory.opens() == 1);  // too big to buffer: the attempt starts at once
  FakeUpstream& u = t.connect(0);
  CHECK(u.method == "PUT");
  CHECK(u.body.empty());
  CHECK_FALSE(u.end);
  const std::string chunk(1024, 'b');
  ex.on_request_body(chunk.data(), chunk.size());
  CHECK(u.body == chunk);
  CHECK_FALSE(t.down.held);
  u.queued = 300 * 1024;  // the upstream takes it slowly
  ex.on_request_body(chunk.data(), chunk.size());
  CHECK(u.body.size() == 2 * chunk.size());
  CHECK(t.down.held);
  u.queued = 100 * 1024;
  u.r->on_up_drained();
  CHECK(t.down.held);  // above the low-water mark
  u.queued = 0;
  u.r->on_up_drained();
  CHECK_FALSE(t.down.held);
  // A reset now cannot be retried: the body that went is not kept.
  u.r->on_up_error(UV_ECONNRESET);
  t.check_proxy_answer(502, "upstream_reset");
  CHECK_FALSE(t.down.proxy_responses[0].request_complete);
  t.check_no_more_attempts(1);
}

TEST_CASE("exchange: a streaming body is held at its client side's own watermarks (an HTTP/2 stream's 64/16 KiB)") {
  Harness t;
  t.down.marks = {64 * 1024, 16 * 1024};
  Exchange& ex = t.begin(kRouteMain, request_head("PUT", "/big", {{"Content-Length", "1048576"}}));
  FakeUpstream& u = t.connect(0);
  const std::string chunk(1024, 'b');
  u.queued = 64 * 1024;  // at the mark, not above it
  ex.on_request_body(chunk.data(), chunk.size());
  CHECK_FALSE(t.down.held);
  u.queued = 64 * 1024 + 1;
  ex.on_request_body(chunk.data(), chunk.size());
  CHECK(t.down.held);
  u.queued = 16 * 1024;  // not below the low mark yet
  u.r->on_up_drained();
  CHECK(t.down.held);
  u.queued = 16 * 1024 - 1;
  u.r->on_up_drained();
  CHECK_FALSE(t.down.held);
  CHECK(u.body.size() == 2 * chunk.size());
  u.r->on_up_error(UV_ECONNRESET);
}

TEST_CASE("exchange: the client going away during the backoff stops the retry") {
  Harness t;
  Exchange& ex = t.get();
  t.connect(0);
  t.answer(0, 503, "busy");
  CHECK(t.factory.at(0).cancels == 1);
  ex.abort("client_closed");
  t.check_no_more_attempts(1);
  CHECK(t.down.answers() == 0);
  CHECK(t.down.done == 0);
  CHECK(t.down.aborts.empty());
}

TEST_CASE("exchange: a body over max_body_bytes after part of it went upstream: 413, the upstream reset") {
  Harness t;
  Exchange& ex = t.begin(kRouteMain, request_head("PUT", "/big", {{"Content-Length", "1048576"}}));
  FakeUpstream& u = t.connect(0);
  const std::string chunk(300 * 1024, 'b');
  ex.on_request_body(chunk.data(), chunk.size());
  CHECK(u.body.size() == chunk.size());
  ex.on_request_body(chunk.data(), chunk.size());  // 600 KiB read: over the limit
  CHECK(u.body.size() == chunk.size());             // the bytes over it never went
  CHECK(u.cancels == 1);
  CHECK(u.cancelled_with_reset);  // the upstream must see the request cut
  CHECK_FALSE(u.end);
  t.check_proxy_answer(413, "body_too_large");
  CHECK(extra_field(t.down.proxy_responses[0].extra, "x-onelayer-forwarded") == "partial");
  t.check_no_more_attempts(1);
}

TEST_CASE("exchange: a response head the client cannot take is a bad upstream response, not retried") {
  Harness t;
  t.get();
  FakeUpstream& u = t.connect(0);
  t.down.refuse_heads = true;
  MessageHead h = response_head(200);
  CHECK(u.r->on_up_head(h) == -1);
  // The exchange answers at once and lets go of the stream: a codec need not
  // report the refusal again (a late report changes nothing).
  CHECK(u.cancels == 1);
  t.check_proxy_answer(502, "bad_upstream_response");
  t.check_no_more_attempts(1);
}

TEST_CASE("exchange: a request an outer layer owns is tried once and keeps its owner") {
  Harness t;
  t.get(kRouteMain, "/", {{"x-retry-owner", "gateway"}});
  FakeUpstream& u = t.connect(0);
  CHECK(u.field("x-retry-owner") == "gateway");
  CHECK(u.field("x-envoy-max-retries") == "0");  // hops further in must not retry either
  t.answer(0, 503, "busy");
  t.check_proxied_answer(503, "busy");
  CHECK(extra_field(t.down.heads[0].extra, "x-retry-exhausted") == "<none>");  // the owner decides
  t.check_no_more_attempts(1);
}

TEST_CASE("exchange: the caller's x-request-timeout-ms bounds the attempt and is passed on") {
  Harness t;
  t.get(kRouteMain, "/", {{"x-request-timeout-ms", "40"}});
  FakeUpstream& u = t.connect(0);
  const std::string left = u.field("x-request-timeout-ms");
  REQUIRE(left != "<none>");
  CHECK(std::stoi(left) <= 40);
  CHECK(std::stoi(left) > 0);
  REQUIRE(t.run_until([&] { return t.down.answers() > 0; }));
  t.check_proxy_answer(504, "deadline_exceeded");
  CHECK(u.cancels == 1);
}

TEST_CASE("exchange: an x-request-timeout-ms of 0 leaves no time for any attempt") {
  Harness t;
  t.begin(kRouteMain, request_head("GET", "/", {{"x-request-timeout-ms", "0"}}));
  CHECK(t.factory.opens() == 0);
  t.check_proxy_answer(504, "deadline_exceeded");
}

TEST_CASE("exchange: a HEAD response has no body to wait for") {
  Harness t;
  Exchange& ex = t.begin(kRouteMain, request_head("HEAD", "/"));
  ex.on_request_end();
  FakeUpstream& u = t.connect(0);
  CHECK(u.method == "HEAD");
  MessageHead h = response_head(200, {{"Content-Length", "10"}});
  CHECK(u.r->on_up_head(h) == 1);
  u.r->on_up_end(true);
  REQUIRE(t.down.heads.size() == 1);
  CHECK(t.down.heads[0].no_body);
  CHECK(t.down.body.empty());
  CHECK(t.down.ends == 1);
  CHECK(t.down.done == 1);
  CHECK(u.releases == 1);
}

TEST_CASE("exchange: the deadline passes while the request body is still coming: 504, nothing sent") {
  Harness t;
  t.begin(kRouteSlow, request_head("POST", "/slow", {{"Content-Length", "5"}}));
  t.ex->on_request_body("he", 2);
  REQUIRE(t.run_until([&] { return t.down.answers() > 0; }));
  t.check_proxy_answer(504, "deadline_exceeded");
  CHECK_FALSE(t.down.proxy_responses[0].request_complete);
  t.ex->on_request_body("llo", 3);  // the rest comes too late
  t.ex->on_request_end();
  CHECK(t.factory.opens() == 0);
}

TEST_CASE("exchange: an attempt past per_try_timeout is cancelled and the next one answers") {
  Harness t;
  t.get(kRoutePerTry, "/pertry");
  FakeUpstream& first = t.connect(0);
  CHECK(std::stoi(first.field("x-request-timeout-ms")) <= 30);
  t.await_attempt(2);  // the per-try timer, then the backoff
  CHECK(first.cancels == 1);
  CHECK(t.down.answers() == 0);
  t.retry_succeeds();
}

TEST_CASE("exchange: attempts that never connect time out into connect failures until exhausted") {
  Harness t;
  t.get(kRoutePerTry, "/pertry");
  t.await_attempt(2);
  CHECK(t.factory.at(0).requests == 0);
  CHECK(t.factory.at(0).cancels == 1);
  REQUIRE(t.run_until([&] { return t.down.answers() > 0; }));
  CHECK(t.factory.at(1).requests == 0);
  CHECK(t.factory.at(1).cancels == 1);
  t.check_proxy_answer(504, "deadline_exceeded");
  CHECK(extra_field(t.down.proxy_responses[0].extra, "x-retry-exhausted") == "2");
  t.check_no_more_attempts(2);
}

TEST_CASE("exchange: a 503 an inner layer marked exhausted is final and passed on") {
  Harness t;
  t.get();
  t.connect(0);
  t.answer(0, 503, "inner gave up", {{"x-retry-exhausted", "3"}});
  t.check_proxied_answer(503, "inner gave up");
  CHECK(extra_field(t.down.heads[0].headers, "x-retry-exhausted") == "3");
  t.check_no_more_attempts(1);
}

TEST_CASE("exchange: a Retry-After beyond the deadline returns the 503 at once") {
  Harness t;
  t.get(kRouteSlow, "/slow");
  t.connect(0);
  t.answer(0, 503, "later", {{"Retry-After", "1"}});
  t.check_proxied_answer(503, "later");
  CHECK(extra_field(t.down.heads[0].extra, "x-retry-exhausted") == "1");
  CHECK(t.factory.at(0).releases == 1);
  t.check_no_more_attempts(1);
}

// ---- gRPC calls (docs/grpc.md) ---------------------------------------------

namespace {

// gRPC routes: idempotent (retries UNAVAILABLE), unsafe (no key, not
// idempotent), and one to an http1 upstream. The loader refuses h2c until
// HTTP/2 upstreams exist, so the upstream's protocol is set after loading.
constexpr const char* kGrpcConfig = R"(layer_id: edge
listeners:
  - name: out
    listen: 127.0.0.1:0
    limits: { idle_timeout: 500ms }
    routes:
      - name: grpc
        match: { path_prefix: /pkg.Svc/ }
        upstream: h2
        timeout: 5s
        retry:
          max_attempts: 3
          per_try_timeout: 80ms
          idempotent: true
          backoff: { base: 1ms, cap: 2ms, jitter: none }
          retry_after: { honor: true, max: 1s }
      - name: grpc-unsafe
        upstream: h2
        timeout: 5s
        retry: { max_attempts: 3, backoff: { base: 1ms, cap: 2ms, jitter: none } }
      - name: grpc-to-http1
        upstream: h1
        retry: { max_attempts: 3, idempotent: true }
upstreams:
  - name: h2
    endpoints: [127.0.0.1:9]
    retry_budget: { ratio: 1.0, min_per_second: 100 }
  - name: h1
    endpoints: [127.0.0.1:9]
)";
constexpr size_t kRouteGrpc = 0, kRouteGrpcUnsafe = 1, kRouteGrpcToHttp1 = 2;

ConfigPtr grpc_config() {
  LoadResult r = load_config_string(kGrpcConfig, "exchange_grpc_test.yaml");
  INFO(format_errors(r.errors));
  REQUIRE(r.ok());
  auto c = std::make_shared<Config>(*r.config);
  c->upstreams[0].protocol = UpstreamProtocol::h2c;
  return c;
}

// A harness whose client speaks HTTP/2.
struct GrpcHarness : Harness {
  GrpcHarness() : Harness(grpc_config()) { down.wire = WireProtocol::h2; }

  // A unary call on `route`, its one message read whole.
  Exchange& call(size_t route = kRouteGrpc, Headers more = {}) {
    Headers fields{{"content-type", "application/grpc"}, {"te", "trailers"}};
    for (Header& f : more) fields.push_back(std::move(f));
    Exchange& e = begin(route, request_head("POST", "/pkg.Svc/Get", std::move(fields)));
    e.on_request_body("\0\0\0\0\1x", 6);
    e.on_request_end();
    return e;
  }
  RouteMetrics& metrics(size_t route = kRouteGrpc) { return *w.generation()->route_metrics[0][route]; }

  // Stream `i` answers Trailers-Only with grpc-status `status`.
  void trailers_only(size_t i, const char* status, Headers more = {}) {
    Headers fields{{"content-type", "application/grpc"}, {"grpc-status", status}};
    for (Header& f : more) fields.push_back(std::move(f));
    FakeUpstream& u = factory.at(i);
    MessageHead h = response_head(200, std::move(fields));
    if (u.r->on_up_head(h) < 0) return;
    u.r->on_up_end(true);
  }
  // Stream `i` answers a head, `message` (none when empty), then trailers.
  void answer_grpc(size_t i, const std::string& message, Headers trailers) {
    FakeUpstream& u = factory.at(i);
    MessageHead h = response_head(200, {{"content-type", "application/grpc"}});
    REQUIRE(u.r->on_up_head(h) == 0);
    if (!message.empty() && u.r->on_up_body(message.data(), message.size()) < 0) return;
    if (u.gone()) return;
    u.r->on_up_trailers(trailers);
    if (u.gone()) return;
    u.r->on_up_end(true);
  }
  static RetryTrigger unavailable() { return RetryTrigger{AttemptOutcome::response, 200, GrpcStatus::unavailable}; }
};

}  // namespace

TEST_CASE("exchange grpc: UNAVAILABLE Trailers-Only twice then OK: three attempts, one OK to the client") {
  GrpcHarness t;
  t.call();
  t.connect(0);
  t.trailers_only(0, "14");
  t.await_attempt(2);
  t.connect(1);
  t.trailers_only(1, "14");
  t.await_attempt(3);
  t.connect(2);
  t.trailers_only(2, "0");
  REQUIRE(t.down.heads.size() == 1);
  CHECK(extra_field(t.down.heads[0].headers, "grpc-status") == "0");
  CHECK(t.down.heads[0].extra.empty());
  CHECK(t.down.ends == 1);
  CHECK(t.down.proxy_responses.empty());
  CHECK(t.metrics().retries(GrpcHarness::unavailable()) == 2);
  CHECK(t.metrics().grpc_responses(GrpcStatus::ok) == 1);
  CHECK(t.metrics().grpc_responses(GrpcStatus::unavailable) == 0);
  CHECK(t.metrics().attempt_failures(true, GrpcHarness::unavailable()) == 1);
  CHECK(t.metrics().attempt_failures(false, GrpcHarness::unavailable()) == 1);
  // Each attempt carried the message again.
  for (size_t i = 0; i < 3; ++i) CHECK(t.factory.at(i).body == std::string("\0\0\0\0\1x", 6));
  CHECK(t.factory.at(0).field("grpc-previous-rpc-attempts") == "<none>");
  CHECK(t.factory.at(1).field("grpc-previous-rpc-attempts") == "1");
  CHECK(t.factory.at(2).field("grpc-previous-rpc-attempts") == "2");
  t.check_no_more_attempts(3);
}

TEST_CASE("exchange grpc: UNAVAILABLE in trailers after headers is retried, the held head never reaches the client") {
  GrpcHarness t;
  t.call();
  t.connect(0);
  t.answer_grpc(0, "", {{"grpc-status", "14"}, {"grpc-message", "down"}});
  CHECK(t.down.heads.empty());
  CHECK(t.down.trailers.empty());
  t.await_attempt(2);
  t.connect(1);
  t.answer_grpc(1, std::string("\0\0\0\0\2ok", 7), {{"grpc-status", "0"}});
  REQUIRE(t.down.heads.size() == 1);
  CHECK(t.down.body == std::string("\0\0\0\0\2ok", 7));
  REQUIRE(t.down.trailers.size() == 1);
  CHECK(extra_field(t.down.trailers[0], "grpc-status") == "0");
  CHECK(t.down.ends == 1);
  CHECK(t.metrics().retries(GrpcHarness::unavailable()) == 1);
  CHECK(t.metrics().grpc_responses(GrpcStatus::ok) == 1);
  CHECK(t.factory.at(0).cancels == 1);
}

TEST_CASE("exchange grpc: a failure after a message went downstream is committed, never retried") {
  GrpcHarness t;
  t.call();
  t.connect(0);
  t.answer_grpc(0, std::string("\0\0\0\0\1a", 6), {{"grpc-status", "14"}});
  REQUIRE(t.down.heads.size() == 1);
  REQUIRE(t.down.trailers.size() == 1);
  CHECK(extra_field(t.down.trailers[0], "grpc-status") == "14");
  CHECK(extra_field(t.down.trailers[0], "x-retry-exhausted") == "<none>");
  CHECK(t.metrics().grpc_responses(GrpcStatus::unavailable) == 1);
  CHECK(t.metrics().retries(GrpcHarness::unavailable()) == 0);
  t.check_no_more_attempts(1);
}

TEST_CASE("exchange grpc: pushback sets the wait, the retry does not start before it") {
  GrpcHarness t;
  t.call();
  t.connect(0);
  const auto answered = std::chrono::steady_clock::now();
  t.trailers_only(0, "14", {{"grpc-retry-pushback-ms", "60"}});
  t.run_for(30ms);
  CHECK(t.factory.opens() == 1);
  t.await_attempt(2);
  CHECK(std::chrono::steady_clock::now() - answered >= 60ms);
  t.connect(1);
  t.trailers_only(1, "0");
  CHECK(t.down.heads.size() == 1);
}

TEST_CASE("exchange grpc: pushback -1 stops: declined server_pushback, marked in the Trailers-Only head") {
  GrpcHarness t;
  t.call();
  t.connect(0);
  t.trailers_only(0, "14", {{"grpc-retry-pushback-ms", "-1"}});
  REQUIRE(t.down.heads.size() == 1);
  CHECK(extra_field(t.down.heads[0].headers, "grpc-status") == "14");
  CHECK(extra_field(t.down.heads[0].extra, "x-retry-exhausted") == "1");
  CHECK(t.metrics().declined(Decline::server_pushback) == 1);
  CHECK(t.metrics().grpc_responses(GrpcStatus::unavailable) == 1);
  t.check_no_more_attempts(1);
}

TEST_CASE("exchange grpc: attempts exhausted on trailers: the last answer passes with x-retry-exhausted in its trailers") {
  GrpcHarness t;
  t.call();
  for (size_t i = 0; i < 3; ++i) {
    if (i > 0) t.await_attempt(i + 1);
    t.connect(i);
    t.answer_grpc(i, "", {{"grpc-status", "14"}});
  }
  REQUIRE(t.down.heads.size() == 1);
  CHECK(t.down.heads[0].extra.empty());
  REQUIRE(t.down.trailers.size() == 1);
  CHECK(extra_field(t.down.trailers[0], "grpc-status") == "14");
  CHECK(extra_field(t.down.trailers[0], "x-retry-exhausted") == "3");
  CHECK(t.metrics().declined(Decline::attempts_exhausted) == 1);
  CHECK(t.down.ends == 1);
}

TEST_CASE("exchange grpc: x-retry-exhausted in upstream trailers is final") {
  GrpcHarness t;
  t.call();
  t.connect(0);
  t.answer_grpc(0, "", {{"grpc-status", "14"}, {"x-retry-exhausted", "3"}});
  REQUIRE(t.down.trailers.size() == 1);
  CHECK(extra_field(t.down.trailers[0], "x-retry-exhausted") == "3");
  CHECK(t.metrics().declined(Decline::inner_exhausted) == 1);
  t.check_no_more_attempts(1);
}

TEST_CASE("exchange grpc: an unsafe route does not retry a gRPC POST") {
  GrpcHarness t;
  t.call(kRouteGrpcUnsafe);
  t.connect(0);
  t.trailers_only(0, "14");
  REQUIRE(t.down.heads.size() == 1);
  CHECK(t.metrics(kRouteGrpcUnsafe).declined(Decline::not_idempotent) == 1);
  t.check_no_more_attempts(1);
}

TEST_CASE("exchange grpc: a refused stream is sent again on an unsafe route, counted as a re-send") {
  GrpcHarness t;
  t.call(kRouteGrpcUnsafe);
  t.connect(0).r->on_up_refused();
  t.await_attempt(2);
  t.connect(1);
  t.trailers_only(1, "0");
  CHECK(t.down.heads.size() == 1);
  CHECK(t.metrics(kRouteGrpcUnsafe).retries(RetryTrigger{AttemptOutcome::refused, 0, {}}) == 0);
  CHECK(t.metrics(kRouteGrpcUnsafe).resends.load() == 1);
}

TEST_CASE("exchange grpc: the caller's grpc-timeout shortens the deadline and each attempt carries what is left") {
  GrpcHarness t;
  t.call(kRouteGrpc, {{"grpc-timeout", "600m"}});
  FakeUpstream& first = t.connect(0);
  // per_try_timeout 80ms is the smaller: the attempt gets at most that.
  const std::string sent = first.field("grpc-timeout");
  auto parsed = parse_grpc_timeout(sent);
  REQUIRE(parsed);
  CHECK(*parsed <= 80ms);
  CHECK(*parsed > 0ms);
  CHECK(std::stoll(first.field("x-request-timeout-ms")) <= 80);
  t.trailers_only(0, "14");
  t.await_attempt(2);
  CHECK(parse_grpc_timeout(t.connect(1).field("grpc-timeout")).value() <= 80ms);
}

TEST_CASE("exchange grpc: a held head that never gets its outcome times out and is retried") {
  GrpcHarness t;
  t.call();
  FakeUpstream& first = t.connect(0);
  MessageHead h = response_head(200, {{"content-type", "application/grpc"}});
  REQUIRE(first.r->on_up_head(h) == 0);
  t.await_attempt(2);  // per_try_timeout (80ms) ran out while the head was held
  CHECK(t.down.heads.empty());
  CHECK(first.cancels == 1);
  t.connect(1);
  t.trailers_only(1, "0");
  CHECK(t.down.heads.size() == 1);
  CHECK(t.metrics().retries(RetryTrigger{AttemptOutcome::timeout, 0, {}}) == 1);
}

TEST_CASE("exchange grpc: a call to an http1 upstream is answered UNAVAILABLE without an attempt") {
  GrpcHarness t;
  t.call(kRouteGrpcToHttp1);
  CHECK(t.factory.opens() == 0);
  t.check_proxy_answer(502, "bad_upstream_response");
  CHECK(t.metrics(kRouteGrpcToHttp1).grpc_responses(GrpcStatus::unavailable) == 1);
}

TEST_CASE("exchange grpc: onelayer's own answer to a gRPC caller is counted by its gRPC status") {
  GrpcHarness t;
  t.call();
  for (size_t i = 0; i < 3; ++i) {
    if (i > 0) t.await_attempt(i + 1);
    t.factory.at(i).r->on_connect_failed(UV_ECONNREFUSED, false);
  }
  t.check_proxy_answer(502, "connect_failure");
  CHECK(extra_field(t.down.proxy_responses[0].extra, "x-retry-exhausted") == "3");
  CHECK(t.metrics().grpc_responses(GrpcStatus::unavailable) == 1);
}

TEST_CASE("exchange grpc: over HTTP/1 a gRPC content-type is plain HTTP (the head is not held)") {
  Harness t(grpc_config());  // the client speaks HTTP/1.1
  Exchange& e = t.begin(kRouteGrpc, request_head("POST", "/pkg.Svc/Get", {{"content-type", "application/grpc"}}));
  e.on_request_end();
  FakeUpstream& u = t.connect(0);
  CHECK(u.field("grpc-timeout") == "<none>");
  MessageHead h = response_head(200, {{"content-type", "application/grpc"}});
  CHECK(u.r->on_up_head(h) == 0);
  CHECK(t.down.heads.size() == 1);
}

TEST_CASE("exchange grpc: a body replayed before it was fully read goes out once, in order") {
  GrpcHarness t;
  Exchange& e = t.begin(kRouteGrpc, request_head("POST", "/pkg.Svc/Put", {{"content-type", "application/grpc"}}));
  // The attempt starts before the end of the body (a streaming call).
  REQUIRE(t.factory.opens() == 1);
  FakeUpstream& first = t.connect(0);
  e.on_request_body("AAAA", 4);
  CHECK(first.body == "AAAA");
  t.trailers_only(0, "14");  // fails while the client is still sending
  e.on_request_body("BBBB", 4);  // arrives during the backoff
  t.await_attempt(2);
  FakeUpstream& second = t.connect(1);
  e.on_request_body("CCCC", 4);  // arrives after the replay went out
  e.on_request_end();
  CHECK(second.body == "AAAABBBBCCCC");
  CHECK(second.end);
  t.trailers_only(1, "0");
  CHECK(t.down.heads.size() == 1);
}

// ---- Hedged requests (shell/proxy/exchange_hedges.cc): several attempts in flight at once.

namespace {

// Two endpoints, a hedge 20 ms after an attempt without a response head.
constexpr const char* kHedgeConfig = R"(layer_id: edge
listeners:
  - name: out
    listen: 127.0.0.1:0
    routes:
      - name: hedged
        upstream: up
        timeout: 5s
        retry:
          max_attempts: 3
          retry_on: [connect-failure, reset, 503]
          backoff: { base: 1ms, cap: 2ms, jitter: none }
          hedge: { after: 20ms }
upstreams:
  - name: up
    endpoints: [127.0.0.1:9, 127.0.0.1:10]
    retry_budget: { ratio: 1.0, min_per_second: 100 }
)";

// A GET whose first attempt got its request and whose hedge has opened,
// got the same request and carries attempt number 2.
struct HedgeHarness : Harness {
  HedgeHarness() : Harness(load_config_string(kHedgeConfig, "hedge.yaml").config) {
    factory.ready_at_once = true;
    get(0);
    REQUIRE(factory.opens() == 1);
    REQUIRE(run_until([&] { return factory.opens() == 2; }));
    CHECK(factory.at(0).attempt == 1);
    CHECK(factory.at(1).attempt == 2);
    CHECK(factory.at(1).field("x-retry-attempt") == "2");
    CHECK(factory.at(1).end);
  }
  uint64_t hedges(RouteMetrics::HedgeResult r) { return w.generation()->route_metrics[0][0]->hedges(r); }
};

}  // namespace

TEST_CASE("hedge: the hedge's answer wins, the first attempt is cancelled and none of it reaches the client") {
  HedgeHarness t;
  t.answer(1, 200, "hedged");
  CHECK(t.factory.at(0).cancels == 1);
  CHECK(t.factory.at(1).releases == 1);
  t.check_proxied_answer(200, "hedged");
  CHECK(t.hedges(RouteMetrics::HedgeResult::won) == 1);
  CHECK(t.hedges(RouteMetrics::HedgeResult::lost) == 0);
}

TEST_CASE("hedge: the first attempt's answer wins and the hedge is cancelled") {
  HedgeHarness t;
  t.answer(0, 404, "first");
  CHECK(t.factory.at(1).cancels == 1);
  t.check_proxied_answer(404, "first");
  CHECK(t.hedges(RouteMetrics::HedgeResult::lost) == 1);
}

TEST_CASE("hedge: a retryable answer on either attempt lets the other run on, with no retry") {
  for (size_t loser : {size_t{0}, size_t{1}}) {
    CAPTURE(loser);
    HedgeHarness t;
    MessageHead h = response_head(503);
    CHECK(t.factory.at(loser).r->on_up_head(h) == -1);
    CHECK(t.factory.at(loser).cancels == 1);
    CHECK(t.down.answers() == 0);
    t.check_no_more_attempts(2);
    t.answer(1 - loser, 200, "other");
    t.check_proxied_answer(200, "other");
  }
}

TEST_CASE("hedge: both attempts fail, then the retry rules decide (max_attempts counts the hedge)") {
  HedgeHarness t;
  t.factory.at(0).r->on_up_error(UV_ECONNRESET);
  t.factory.at(1).r->on_up_error(UV_ECONNRESET);
  // Third and last attempt: a retry (max_attempts 3 = first + hedge + retry).
  t.await_attempt(3);
  CHECK(t.factory.at(2).attempt == 3);
  t.answer(2, 200, "retried");
  t.check_proxied_answer(200, "retried");
}

TEST_CASE("hedge: a request answered before `after` makes no hedge") {
  Harness t(load_config_string(kHedgeConfig, "hedge.yaml").config);
  t.factory.ready_at_once = true;
  t.get(0);
  t.answer(0, 200, "fast");
  t.check_no_more_attempts(1);
  t.check_proxied_answer(200, "fast");
}
