// ProxyExchangeStarter, the ExchangeStarter the worker owns: a request
// admission refuses comes back as the refusal to answer, with no exchange;
// an admitted one as an Exchange made for the codec's stream and not
// started (nothing was asked of the stream yet).
#include "shell/proxy/proxy_exchange_starter.h"

#include <doctest/doctest.h>

#include <string>

#include "core/config/config_loader.h"
#include "core/http/message_head.h"
#include "shell/server/worker.h"

using namespace onelayer;

namespace {

constexpr const char* kConfig = R"(layer_id: edge
listeners:
  - name: out
    listen: 127.0.0.1:0
    routes:
      - name: api
        match: { path_prefix: /api }
        upstream: up
upstreams:
  - name: up
    endpoints: [127.0.0.1:9]
)";

// A client stream that counts what is asked of it (nothing, until started).
class QuietDownstream final : public DownstreamStream {
 public:
  WireProtocol protocol() const override { return WireProtocol::http1; }
  const std::string& peer_ip() const override { return ip_; }
  bool over_tls() const override { return false; }
  bool send_response_head(const MessageHead&, const ResponseMeta&) override { return ++calls, true; }
  bool send_response_body(std::string_view) override { return ++calls, true; }
  void send_response_trailers(const Headers&) override { ++calls; }
  void send_response_end() override { ++calls; }
  void flush() override { ++calls; }
  void send_proxy_response(int, const char*, const Headers&, bool, bool) override { ++calls; }
  size_t queued_bytes() const override { return 0; }
  uint64_t response_bytes() const override { return 0; }
  void hold_request_body() override { ++calls; }
  void release_request_body() override { ++calls; }
  bool request_body_held() const override { return false; }
  void exchange_done() override { ++calls; }
  void abort_stream(const char*) override { ++calls; }
  int calls = 0;

 private:
  std::string ip_ = "127.0.0.1";
};

MessageHead get(std::string target) {
  MessageHead h;
  h.method = "GET";
  h.target = std::move(target);
  h.http_major = 1;
  h.http_minor = 1;
  h.headers.push_back({"Host", "svc.test"});
  return h;
}

}  // namespace

TEST_CASE("ProxyExchangeStarter: a refused request comes back as its answer, an admitted one as an exchange not started") {
  LoadResult r = load_config_string(kConfig, "proxy_exchange_starter_test.yaml");
  REQUIRE(r.ok());
  Runtime rt;
  rt.install(std::move(r.config));
  {
    Worker w{rt, 0};
    QuietDownstream down;
    ExchangeStarter& starter = w.exchanges();

    MessageHead nowhere = get("/elsewhere");
    ExchangeStarter::Start refused = starter.start(down, "out", nowhere, "", nullptr);
    CHECK(refused.refused());
    CHECK(refused.status == 404);
    CHECK(std::string(refused.reason) == "no_route");
    CHECK(refused.exchange == nullptr);

    MessageHead api = get("/api/items");
    ExchangeStarter::Start admitted = starter.start(down, "out", api, "", nullptr);
    CHECK(!admitted.refused());
    REQUIRE(admitted.exchange != nullptr);
    CHECK(!admitted.expect_continue);
    CHECK(!admitted.upgrade);
    CHECK(!admitted.exchange->response_started());
    CHECK(down.calls == 0);
    admitted.exchange.reset();
    w.post_force_close();
    uv_run(w.loop(), UV_RUN_DEFAULT);
  }
}
