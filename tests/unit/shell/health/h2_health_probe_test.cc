// H2HealthProbe against a server H2Session in memory: the GET it sends,
// and its verdict for a 2xx, a 503, a reset stream and garbage.
#include "shell/health/h2_health_probe.h"

#include <doctest/doctest.h>

#include <string>

#include "h2_handler_stub.h"

using namespace onelayer;

namespace {

// A server that answers every request with `status` (0: resets it).
struct Server : test::H2HandlerStub {
  int status = 200;
  H2Session session{H2Session::Role::server, this};
  H2Session::Head seen;
  void on_head(int32_t stream, H2Session::Head& head, bool) override {
    seen = head;
    if (status == 0) {
      session.reset_stream(stream, H2Session::kInternalError);
      return;
    }
    H2Session::Head answer;
    answer.status = status;
    session.submit_response(stream, answer, false);
    session.send_data(stream, "body");
    session.end_stream(stream);
  }
};

// Runs the probe against a server answering `status` until it decides.
H2HealthProbe::Verdict run(int status, H2Session::Head* seen = nullptr) {
  Server server;
  server.status = status;
  H2HealthProbe probe("http", "svc.internal:8081", "/healthz");
  std::string to_server = probe.start();
  for (int i = 0; i < 10 && probe.verdict() == H2HealthProbe::Verdict::pending; ++i) {
    server.session.recv(reinterpret_cast<const uint8_t*>(to_server.data()), to_server.size(), 0);
    std::string to_probe;
    server.session.flush(to_probe);
    to_server.clear();
    probe.feed(to_probe.data(), to_probe.size(), 0, to_server);
  }
  if (seen) *seen = server.seen;
  return probe.verdict();
}

}  // namespace

TEST_CASE("h2 health probe: one GET of the path, a 2xx passes, another status or a reset fails") {
  H2Session::Head seen;
  CHECK(run(200, &seen) == H2HealthProbe::Verdict::passed);
  CHECK(seen.method == "GET");
  CHECK(seen.scheme == "http");
  CHECK(seen.authority == "svc.internal:8081");
  CHECK(seen.path == "/healthz");
  REQUIRE(find_header(seen.fields, "user-agent"));
  CHECK(find_header(seen.fields, "user-agent")->value == "onelayer-health-check");
  CHECK(run(204) == H2HealthProbe::Verdict::passed);
  CHECK(run(503) == H2HealthProbe::Verdict::failed);
  CHECK(run(301) == H2HealthProbe::Verdict::failed);
  CHECK(run(0) == H2HealthProbe::Verdict::failed);
}

TEST_CASE("h2 health probe: a peer that does not speak HTTP/2 fails it") {
  H2HealthProbe probe("http", "svc.internal:8081", "/healthz");
  CHECK_FALSE(probe.start().empty());
  std::string out;
  const std::string http1 = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  probe.feed(http1.data(), http1.size(), 0, out);
  CHECK(probe.verdict() == H2HealthProbe::Verdict::failed);
}
