#include "shell/health/health_checker.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <deque>
#include <string>

#include "shell/proxy/endpoint_log.h"
#include "shell/health/h2_health_probe.h"
#include "shell/io/handle_wrap.h"
#include "shell/io/socket_address.h"
#include "shell/tls/tls_channel.h"
#include "shell/tls/tls_client_context.h"

namespace onelayer {

static constexpr uint64_t kTickMs = 50;

// One check in flight: a TCP connection, a timeout, the first line read.
// Freed once both handles have closed (HandleWrap).
struct HealthChecker::Check : HandleWrap<HealthChecker::Check> {
  HealthChecker* owner;
  std::shared_ptr<UpstreamEndpoints> eps;
  std::string upstream;
  uint32_t member;
  Key key;
  uint32_t unhealthy, healthy;
  uv_tcp_t tcp;
  uv_timer_t timer;
  uv_connect_t connect_req;
  uv_write_t write_req;
  std::string request;  // the HTTP/1.1 check
  std::string response;
  // HTTP/2 checks: h2c and h2 upstreams, and `auto` ones whose handshake
  // chose h2 (what the check's own handshake chose decides).
  UpstreamProtocol protocol = UpstreamProtocol::http1;
  std::string authority, path;
  std::unique_ptr<H2HealthProbe> h2;
  // A TLS upstream is checked over TLS, verified like its requests: the
  // ciphertext on its way out waits here until libuv has written it.
  std::shared_ptr<TlsClientContext> tls_ctx;  // outlives `tls` (a reload may drop the generation's)
  std::unique_ptr<TlsChannel> tls;
  std::deque<std::string> out;
  bool request_sent = false;
  char buf[512];
  bool done = false;  // the verdict is in

  void adopt_handles() {
    adopt(&tcp);
    adopt(&timer);
  }
  void close() { close_handles(nullptr, &tcp, &timer); }
  void on_closed() { owner->checks_.erase(this); }
};

HealthChecker::HealthChecker(uv_loop_t* loop, Runtime& rt) : loop_(loop), rt_(rt) {
  uv_timer_init(loop_, &timer_);
  timer_.data = this;
}

HealthChecker::~HealthChecker() = default;

void HealthChecker::start() {
  uv_timer_start(&timer_, [](uv_timer_t* t) { static_cast<HealthChecker*>(t->data)->tick(); }, kTickMs, kTickMs);
}

void HealthChecker::close() {
  if (closed_) return;
  closed_ = true;
  uv_timer_stop(&timer_);
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
  std::vector<Check*> inflight;
  for (Check* c : checks_) inflight.push_back(c);
  for (Check* c : inflight) finished(c, false);
}

void HealthChecker::tick() {
  GenerationPtr gen = rt_.current();
  TimePoint now = Clock::now();
  for (size_t i = 0; i < gen->config->upstreams.size(); ++i) {
    const Upstream& u = gen->config->upstreams[i];
    if (!u.health_check.enabled) continue;
    const std::shared_ptr<UpstreamEndpoints>& eps = gen->endpoints[i];
    for (const UpstreamEndpoints::MemberView& m : eps->members()) {
      if (m.address.empty()) continue;  // a DNS name not resolved by a worker yet
      Target& t = targets_[Key{eps.get(), m.member}];
      if (t.in_flight || now < t.next) continue;
      t.next = now + u.health_check.interval;
      launch(u, eps, m, t, gen->tls.upstreams[i]);
    }
  }
}

// Writes bytes on a check's connection; they stay in c->out until written.
static void check_write(HealthChecker::Check* c, std::string bytes) {
  if (bytes.empty()) return;
  c->out.push_back(std::move(bytes));
  auto* req = new uv_write_t;
  req->data = c;
  uv_buf_t b = uv_buf_init(c->out.back().data(), static_cast<unsigned>(c->out.back().size()));
  if (uv_write(req, reinterpret_cast<uv_stream_t*>(&c->tcp), &b, 1, [](uv_write_t* r, int) { delete r; }) != 0)
    delete req;
}

static std::string take_tls_output(TlsChannel& t) {
  std::string s(t.pending_output(), '\0');
  s.resize(t.take_output(s.data(), s.size()));
  return s;
}

// The first bytes of the check, in the protocol it speaks: HTTP/2 to h2c
// and to a server whose handshake chose h2, else HTTP/1.1. Empty when the
// check cannot go: an h2 upstream whose server did not choose h2 (its
// requests would fail the same way).
static std::string first_request(HealthChecker::Check* c) {
  bool h2 = c->protocol == UpstreamProtocol::h2c || (c->tls && c->tls->alpn() == "h2");
  if (!h2 && c->protocol == UpstreamProtocol::h2) return {};
  if (!h2) return c->request;
  c->h2 = std::make_unique<H2HealthProbe>(c->tls ? "https" : "http", c->authority, c->path);
  return c->h2->start();
}

// Plaintext for the peer: through the TLS channel when there is one.
static void check_send(HealthChecker::Check* c, const std::string& plain) {
  if (!c->tls) {
    check_write(c, plain);
    return;
  }
  if (!plain.empty()) c->tls->write(plain.data(), plain.size());
  check_write(c, take_tls_output(*c->tls));
}

// The check's request once it may go: at once in cleartext, after the
// handshake over TLS. False when the TLS handshake failed or the check
// cannot be sent.
static bool check_advance(HealthChecker::Check* c) {
  TlsChannel::Status st = c->tls ? c->tls->handshake() : TlsChannel::Status::ok;
  if (st == TlsChannel::Status::error) {
    check_write(c, take_tls_output(*c->tls));
    spdlog::debug("upstream {}: health check TLS: {}", c->upstream, c->tls->error_text());
    return false;
  }
  std::string first;
  if (st == TlsChannel::Status::ok && !c->request_sent) {
    first = first_request(c);
    if (first.empty()) {
      spdlog::debug("upstream {}: health check: the server did not choose ALPN h2", c->upstream);
      return false;
    }
    c->request_sent = true;
  }
  check_send(c, first);
  return true;
}

// Plaintext of the answer: true once there is a verdict (in *passed).
static bool check_input(HealthChecker::Check* c, const char* data, size_t n, bool* passed) {
  if (c->h2) {
    std::string out;
    c->h2->feed(data, n, uv_now(c->tcp.loop), out);
    if (!out.empty()) check_send(c, out);
    *passed = c->h2->verdict() == H2HealthProbe::Verdict::passed;
    return c->h2->verdict() != H2HealthProbe::Verdict::pending;
  }
  c->response.append(data, n);
  size_t eol = c->response.find("\r\n");
  if (eol == std::string::npos && c->response.size() < 256) return false;
  // "HTTP/1.1 200 ...": the status is the three digits after the first space.
  std::string_view line(c->response.data(), std::min(eol, c->response.size()));
  size_t sp = line.find(' ');
  *passed = line.rfind("HTTP/1.", 0) == 0 && sp != std::string_view::npos && line.size() >= sp + 4 &&
            line[sp + 1] == '2';
  return true;
}

void HealthChecker::launch(const Upstream& u, const std::shared_ptr<UpstreamEndpoints>& eps,
                           const UpstreamEndpoints::MemberView& m, Target& t,
                           const std::shared_ptr<TlsClientContext>& tls) {
  sockaddr_storage ss{};
  uint16_t port = u.endpoints[m.endpoint].port;
  std::string ip(m.address);
  if (!ip_literal_address(ip, port, &ss)) return;
  auto* c = new Check();  // value-initialized, as make_unique did
  c->owner = this;
  c->eps = eps;
  c->upstream = u.name;
  c->member = m.member;
  c->key = Key{eps.get(), m.member};
  c->unhealthy = u.health_check.unhealthy;
  c->healthy = u.health_check.healthy;
  c->request = "GET " + u.health_check.path + " HTTP/1.1\r\nHost: " + u.endpoints[m.endpoint].to_string() +
               "\r\nUser-Agent: onelayer-health-check\r\nConnection: close\r\n\r\n";
  c->protocol = u.protocol;
  c->authority = u.endpoints[m.endpoint].to_string();
  c->path = u.health_check.path;
  if (tls) {
    c->tls_ctx = tls;
    c->tls = tls->open(u.endpoints[m.endpoint].host, u.endpoints[m.endpoint].to_string());
  }
  uv_tcp_init(loop_, &c->tcp);
  uv_timer_init(loop_, &c->timer);
  c->adopt_handles();
  c->connect_req.data = c->write_req.data = c;
  checks_.insert(c);
  t.in_flight = true;
  uv_timer_start(&c->timer, [](uv_timer_t* h) {
    auto* c = Check::owner_of(h);
    c->owner->finished(c, false);
  }, static_cast<uint64_t>(u.health_check.timeout.count()), 0);
  int rc = uv_tcp_connect(&c->connect_req, &c->tcp, reinterpret_cast<const sockaddr*>(&ss), [](uv_connect_t* req,
                                                                                                int status) {
    auto* c = static_cast<Check*>(req->data);
    if (status == UV_ECANCELED || c->done) return;
    if (status < 0) {
      c->owner->finished(c, false);
      return;
    }
    if (!check_advance(c)) {
      c->owner->finished(c, false);
      return;
    }
    uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp),
                  [](uv_handle_t* h, size_t, uv_buf_t* out) {
                    auto* c = Check::owner_of(h);
                    *out = uv_buf_init(c->buf, sizeof c->buf);
                  },
                  [](uv_stream_t* s, ssize_t n, const uv_buf_t* b) {
                    auto* c = Check::owner_of(s);
                    if (c->done) return;
                    if (n < 0) {
                      c->owner->finished(c, false);
                      return;
                    }
                    bool passed = false;
                    bool decided = false;
                    if (c->tls) {
                      c->tls->feed(b->base, static_cast<size_t>(n));
                      if (!c->tls->handshake_done()) {
                        if (!check_advance(c)) c->owner->finished(c, false);
                        if (c->done || !c->tls->handshake_done()) return;
                      }
                      char plain[512];
                      TlsChannel::Status st;
                      while (!decided) {
                        size_t got = c->tls->read(plain, sizeof plain, &st);
                        if (got == 0) break;
                        decided = check_input(c, plain, got, &passed);
                      }
                    } else {
                      decided = check_input(c, b->base, static_cast<size_t>(n), &passed);
                    }
                    if (decided) c->owner->finished(c, passed);
                  });
  });
  if (rc != 0) finished(c, false);
}

void HealthChecker::finished(Check* c, bool passed) {
  if (c->done) return;
  c->done = true;
  if (!closed_) {
    auto it = targets_.find(c->key);
    if (it != targets_.end()) it->second.in_flight = false;
    UpstreamEndpoints::Report rep = c->eps->check(c->member, passed, Clock::now());
    using Kind = OutlierDetector::Event::Kind;
    uint32_t checks = rep.event.kind == Kind::ejected ? c->unhealthy : c->healthy;
    log_endpoint_event(c->upstream, c->eps->label(c->member), rep.event, checks);
    if (!passed) spdlog::debug("upstream {}: health check of {} failed", c->upstream, c->eps->label(c->member));
  }
  uv_timer_stop(&c->timer);
  c->close();
}

}  // namespace onelayer
