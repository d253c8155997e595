// onelayer-demo-upstream: a small HTTP/1.1 origin for the README demo and for
// integration tests. Its answers are deterministic so a retrying proxy in
// front of it behaves the same way every run:
//
//   /hello            200 "hello from the demo upstream"
//   /flaky            of every 3 requests the first two get 503, the third 200
//   /slow?ms=N        200 after N ms (default 1000, at most 10000)
//   /status/NNN       status NNN (200..599)
//   /echo             the request body back (any method)
//   /headers          the request line and headers as text
//   /retry-after?s=N  503 with Retry-After: N (default 1)
//   anything else     404
//
// Usage: onelayer-demo-upstream [--listen HOST:PORT] [--ports-file P]
// Port 0 picks a free port; --ports-file then receives "demo <port>".
// One log line per request goes to stderr. SIGINT/SIGTERM exit 0.
#include <uv.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/http_status.h"
#include "core/http/http_headers.h"
#include "shell/http1/http_parser.h"
#include "shell/io/handle_wrap.h"
#include "shell/io/socket_address.h"
#include "shell/io/string_write.h"

namespace {

constexpr size_t kMaxHeadBytes = 64 * 1024;
constexpr size_t kMaxBodyBytes = 64 * 1024 * 1024;
constexpr size_t kMaxBufferedInput = 1024 * 1024;  // pipelined bytes kept while a reply is delayed
constexpr uint64_t kMaxSlowMs = 10'000;
constexpr uint64_t kDefaultSlowMs = 1'000;

struct Server;

// One client connection: a socket and a timer (for /slow). Deleted when both
// handles have closed (HandleWrap). Its requests are parsed by the proxy's
// HTTP/1 parser, which hands each one to it (HttpParser::Handler).
struct Conn : onelayer::HandleWrap<Conn>, onelayer::HttpParser::Handler {
  Server* server = nullptr;
  uv_tcp_t tcp{};
  uv_timer_t delay{};
  onelayer::HttpParser parser{HTTP_REQUEST, this};
  void adopt_handles() {
    adopt(&tcp);
    adopt(&delay);
  }
  void close() { close_handles(nullptr, &tcp, &delay); }
  void on_closed();  // leaves the server's list
  bool close_after_write = false;  // last response queued: close once written
  bool waiting = false;            // a delayed response is pending; parser paused
  bool peer_done = false;          // client sent EOF
  size_t writes_pending = 0;
  std::string pending_input;       // bytes after the paused request
  std::string delayed_response;
  uint64_t delayed_start_ns = 0;
  std::string delayed_log;

  // The request being parsed (its head is the parser's).
  std::string body;
  uint64_t start_ns = 0;
  int reject_status = 0;
  const onelayer::MessageHead& head() const { return parser.head(); }

  // HttpParser::Handler.
  int on_head(onelayer::MessageHead& head) override;
  int on_body(const char* data, size_t len) override;
  int on_message_end() override;
};

struct Server {
  uv_loop_t* loop = nullptr;
  uv_tcp_t listener{};
  uv_signal_t sigint{}, sigterm{};
  std::vector<Conn*> conns;
  uint64_t flaky_count = 0;
  int port = 0;
  bool stopping = false;
  char read_buffer[64 * 1024];
};

struct Reply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  uint64_t delay_ms = 0;
};

// ---- small helpers ----

// Parses decimal digits only; false on anything else or overflow past `max`.
bool parse_uint(std::string_view s, uint64_t max, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > max) return false;
  *out = v;
  return true;
}

// Finds `name` in a query string ("a=1&b=2"); false when absent.
bool query_param(std::string_view query, std::string_view name, std::string_view* value) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) {
      *value = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
      return true;
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return false;
}

const std::string* find_header(const Conn& c, std::string_view name) {
  const onelayer::Header* h = onelayer::find_header(c.head().headers, name);
  return h != nullptr ? &h->value : nullptr;
}

Reply text(int status, std::string body) {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

// ---- the endpoints ----

Reply handle(Server& s, Conn& c) {
  const std::string& target = c.head().target;
  const std::string_view url = target;
  const size_t qpos = url.find('?');
  const std::string_view path = url.substr(0, qpos);
  const std::string_view query = qpos == std::string_view::npos ? std::string_view() : url.substr(qpos + 1);
  const std::string& method = c.head().method;

  if (path == "/hello") return text(200, "hello from the demo upstream\n");

  if (path == "/flaky") {
    const uint64_t n = s.flaky_count++ % 3;  // 0, 1 fail; 2 succeeds
    if (n < 2) return text(503, "flaky: failure " + std::to_string(n + 1) + " of 2, try again\n");
    return text(200, "flaky: third time lucky\n");
  }

  if (path == "/slow") {
    uint64_t ms = kDefaultSlowMs;
    std::string_view v;
    if (query_param(query, "ms", &v) && !parse_uint(v, UINT32_MAX, &ms)) {
      return text(400, "ms must be a whole number of milliseconds\n");
    }
    if (ms > kMaxSlowMs) ms = kMaxSlowMs;
    Reply r = text(200, "slept " + std::to_string(ms) + " ms\n");
    r.delay_ms = ms;
    return r;
  }

  if (path.rfind("/status/", 0) == 0) {
    uint64_t code = 0;
    if (!parse_uint(path.substr(8), 599, &code) || code < 200 || path.size() != 11) {
      return text(400, "status must be a code from 200 to 599\n");
    }
    return text(static_cast<int>(code), "status " + std::to_string(code) + "\n");
  }

  if (path == "/echo") {
    Reply r = text(200, c.body);
    const std::string* ct = find_header(c, "content-type");
    r.content_type = ct != nullptr ? *ct : "application/octet-stream";
    return r;
  }

  if (path == "/headers") {
    std::string out = method + " " + target + " HTTP/" + std::to_string(c.head().http_major) + "." +
                      std::to_string(c.head().http_minor) + "\n";
    for (const onelayer::Header& h : c.head().headers) out += h.name + ": " + h.value + "\n";
    return text(200, std::move(out));
  }

  if (path == "/retry-after") {
    uint64_t secs = 1;
    std::string_view v;
    if (query_param(query, "s", &v) && !parse_uint(v, 86'400, &secs)) {
      return text(400, "s must be a whole number of seconds\n");
    }
    Reply r = text(503, "busy: retry after " + std::to_string(secs) + " s\n");
    r.headers.emplace_back("Retry-After", std::to_string(secs));
    return r;
  }

  return text(404,
              "not found. Try /hello /flaky /slow?ms=N /status/NNN /echo /headers /retry-after?s=N\n");
}

// ---- connection plumbing ----

void close_conn(Conn* c);
void feed(Conn* c, const char* data, size_t len);
void on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf);
void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);

void Conn::on_closed() {
  if (server == nullptr) return;
  auto& v = server->conns;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == this) {
      v[i] = v.back();
      v.pop_back();
      break;
    }
  }
}

void close_conn(Conn* c) { c->close(); }

void on_shutdown(uv_shutdown_t* req, int) {
  Conn* c = static_cast<Conn*>(req->data);
  delete req;
  close_conn(c);
}

// Half-closes after the last response so the client reads it before the
// socket goes away, then closes.
void finish_conn(Conn* c) {
  if (c->closing()) return;
  auto* req = new uv_shutdown_t;
  req->data = c;
  if (uv_shutdown(req, reinterpret_cast<uv_stream_t*>(&c->tcp), on_shutdown) < 0) {
    delete req;
    close_conn(c);
  }
}

void on_write(void* owner, int status) {
  Conn* c = static_cast<Conn*>(owner);
  --c->writes_pending;
  if (status < 0) {
    close_conn(c);
  } else if (c->close_after_write && !c->waiting && c->writes_pending == 0) {
    finish_conn(c);
  }
}

void write(Conn* c, std::string data) {
  if (c->closing()) return;
  if (onelayer::StringWrite::start(reinterpret_cast<uv_stream_t*>(&c->tcp), std::move(data), c, on_write) < 0) {
    close_conn(c);
    return;
  }
  ++c->writes_pending;
}

std::string serialize(const Conn& c, const Reply& r, bool close) {
  const bool head = c.head().method == "HEAD";
  const bool no_body_status = r.status == 204 || r.status == 304;
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + onelayer::status_text(r.status) + "\r\n";
  if (!no_body_status) {
    out += "Content-Type: " + r.content_type + "\r\n";
  }
  if (r.status != 204) out += "Content-Length: " + std::to_string(no_body_status ? 0 : r.body.size()) + "\r\n";
  out += "x-served-by: demo:" + std::to_string(c.server != nullptr ? c.server->port : 0) + "\r\n";
  for (const auto& [k, v] : r.headers) out += k + ": " + v + "\r\n";
  if (close) {
    out += "Connection: close\r\n";
  } else if (c.head().http_major == 1 && c.head().http_minor == 0) {
    out += "Connection: keep-alive\r\n";
  }
  out += "\r\n";
  if (!head && !no_body_status) out += r.body;
  return out;
}

void log_request(const Conn& c, std::string_view method, std::string_view url, int status, size_t body_bytes,
                 uint64_t start_ns) {
  const double ms = static_cast<double>(uv_hrtime() - start_ns) / 1e6;
  std::fprintf(stderr, "demo:%d %.*s %.*s -> %d (%zu bytes in, %.1f ms)\n", c.server != nullptr ? c.server->port : 0,
               static_cast<int>(method.size()), method.data(), static_cast<int>(url.size()), url.data(), status,
               body_bytes, ms);
}

void on_delay(uv_timer_t* t) {
  Conn* c = Conn::owner_of(t);
  c->waiting = false;
  std::fprintf(stderr, "%s", c->delayed_log.c_str());
  write(c, std::move(c->delayed_response));
  c->delayed_response.clear();
  if (c->close_after_write || c->peer_done) {
    c->close_after_write = true;
    if (c->writes_pending == 0) finish_conn(c);
    return;
  }
  c->parser.resume();
  std::string rest = std::move(c->pending_input);
  c->pending_input.clear();
  if (!rest.empty()) feed(c, rest.data(), rest.size());
  if (!c->closing() && !c->waiting && !c->close_after_write) {
    // Reading stops when too much pipelined input was buffered; resume it.
    uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp), on_alloc, on_read);
  }
}

// ---- the parser's callbacks ----

int Conn::on_head(onelayer::MessageHead& h) {
  body.clear();
  start_ns = uv_hrtime();
  const std::string* expect = find_header(*this, "expect");
  if (expect != nullptr && onelayer::iequals(*expect, "100-continue") && h.http_minor == 1) {
    write(this, "HTTP/1.1 100 Continue\r\n\r\n");
  }
  return 0;
}

int Conn::on_body(const char* at, size_t len) {
  if (body.size() + len > kMaxBodyBytes) {
    reject_status = 413;
    return -1;
  }
  body.append(at, len);
  return 0;
}

int Conn::on_message_end() {
  if (server == nullptr || closing()) return HPE_PAUSED;
  Reply r = handle(*server, *this);
  const bool close = !head().keep_alive || server->stopping;
  std::string out = serialize(*this, r, close);
  const std::string& method = head().method;
  const std::string& url = head().target;
  // This server never switches protocols: a request that would is answered
  // and is the connection's last.
  if (close || parser.request_switches_protocols()) close_after_write = true;
  if (r.delay_ms > 0) {
    // Hold this response (and everything pipelined after it) until the timer.
    waiting = true;
    delayed_response = std::move(out);
    char line[512];
    std::snprintf(line, sizeof line, "demo:%d %s %.*s -> %d (%zu bytes in, %llu ms delay)\n", server->port,
                  method.c_str(), static_cast<int>(std::min<size_t>(url.size(), 300)), url.data(), r.status,
                  body.size(), static_cast<unsigned long long>(r.delay_ms));
    delayed_log = line;
    uv_timer_start(&delay, on_delay, r.delay_ms, 0);
    return HPE_PAUSED;
  }
  log_request(*this, method, url, r.status, body.size(), start_ns);
  write(this, std::move(out));
  return close_after_write ? HPE_PAUSED : 0;
}

void reject(Conn* c) {
  const bool too_large = c->parser.error() == onelayer::HttpParser::Error::head_too_large;
  const int status = too_large ? 431 : c->reject_status != 0 ? c->reject_status : 400;
  std::fprintf(stderr, "demo:%d bad request -> %d: %s\n", c->server != nullptr ? c->server->port : 0, status,
               too_large         ? "request head too large"
               : status == 413   ? "request body too large"
                                 : c->parser.error_reason());
  Reply r = text(status, std::string(onelayer::status_text(status)) + "\n");
  c->close_after_write = true;
  write(c, serialize(*c, r, true));
}

void feed(Conn* c, const char* data, size_t len) {
  const size_t used = c->parser.feed(data, len);
  const onelayer::HttpParser::Error err = c->parser.error();
  if (err == onelayer::HttpParser::Error::none || c->closing()) return;
  if (err == onelayer::HttpParser::Error::paused) {
    if (c->waiting && used < len) c->pending_input.append(data + used, len - used);
    // Otherwise paused after a final response (Connection: close, or a
    // request that would switch protocols): the rest is dropped.
    if (!c->waiting && c->close_after_write && c->writes_pending == 0) finish_conn(c);
    return;
  }
  reject(c);
}

void on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
  Conn* c = Conn::owner_of(h);
  *buf = uv_buf_init(c->server->read_buffer, sizeof c->server->read_buffer);
}

void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  Conn* c = Conn::owner_of(stream);
  if (nread == UV_EOF) {
    c->peer_done = true;
    if (c->waiting || c->writes_pending > 0) {
      c->close_after_write = true;  // answer what was asked, then close
      uv_read_stop(stream);
    } else {
      close_conn(c);
    }
    return;
  }
  if (nread < 0) {
    close_conn(c);
    return;
  }
  if (nread == 0 || c->closing() || c->close_after_write) return;
  if (c->waiting) {
    c->pending_input.append(buf->base, static_cast<size_t>(nread));
    if (c->pending_input.size() > kMaxBufferedInput) uv_read_stop(stream);  // back-pressure
    return;
  }
  feed(c, buf->base, static_cast<size_t>(nread));
}

void on_connection(uv_stream_t* listener, int status) {
  auto* s = static_cast<Server*>(listener->data);
  if (status < 0 || s->stopping) return;
  auto* c = new Conn;
  c->server = s;
  if (uv_tcp_init(s->loop, &c->tcp) < 0) {
    delete c;
    return;
  }
  uv_timer_init(s->loop, &c->delay);
  c->adopt_handles();
  s->conns.push_back(c);
  if (uv_accept(listener, reinterpret_cast<uv_stream_t*>(&c->tcp)) < 0) {
    close_conn(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  // Every field fits the head limit, which alone bounds how many there are.
  c->parser.set_limits(kMaxHeadBytes, std::numeric_limits<uint32_t>::max());
  if (uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp), on_alloc, on_read) < 0) close_conn(c);
}

void on_signal(uv_signal_t* sig, int signum) {
  auto* s = static_cast<Server*>(sig->data);
  if (s->stopping) return;
  s->stopping = true;
  std::fprintf(stderr, "demo:%d signal %d: shutting down\n", s->port, signum);
  uv_close(reinterpret_cast<uv_handle_t*>(&s->listener), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&s->sigint), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&s->sigterm), nullptr);
  for (Conn* c : std::vector<Conn*>(s->conns)) close_conn(c);
}

// ---- command line ----

struct Options {
  std::string host = "127.0.0.1";
  int port = 8081;
  std::string ports_file;
};

bool parse_listen(std::string_view v, Options* o) {
  std::string_view host, port;
  if (!v.empty() && v.front() == '[') {
    size_t close = v.find(']');
    if (close == std::string_view::npos || close + 1 >= v.size() || v[close + 1] != ':') return false;
    host = v.substr(1, close - 1);
    port = v.substr(close + 2);
  } else {
    size_t colon = v.rfind(':');
    if (colon == std::string_view::npos) {
      port = v;  // a bare port
    } else {
      host = v.substr(0, colon);
      port = v.substr(colon + 1);
    }
  }
  uint64_t p = 0;
  if (!parse_uint(port, 65535, &p)) return false;
  if (!host.empty()) o->host = std::string(host);
  o->port = static_cast<int>(p);
  return true;
}

void usage(FILE* to) {
  std::fprintf(to,
               "usage: onelayer-demo-upstream [--listen HOST:PORT] [--ports-file FILE]\n"
               "  --listen      address to serve on (default 127.0.0.1:8081; port 0 picks one)\n"
               "  --ports-file  write \"demo <port>\" there once listening\n"
               "paths: /hello /flaky /slow?ms=N /status/NNN /echo /headers /retry-after?s=N\n");
}

// Written to a temporary name first so a reader polling the file never sees
// half of it.
bool write_ports_file(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  const bool ok = std::fprintf(f, "demo %d\n", port) > 0;
  if (std::fclose(f) != 0 || !ok) return false;
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    }
    if ((a == "--listen" || a == "--ports-file") && i + 1 >= argc) {
      std::fprintf(stderr, "demo: %s needs a value\n", argv[i]);
      return 2;
    }
    if (a == "--listen") {
      if (!parse_listen(argv[++i], &opt)) {
        std::fprintf(stderr, "demo: bad --listen %s (want HOST:PORT)\n", argv[i]);
        return 2;
      }
    } else if (a == "--ports-file") {
      opt.ports_file = argv[++i];
    } else {
      std::fprintf(stderr, "demo: unknown argument %s\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }

  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error code, not a crash
  static Server server;
  uv_loop_t* loop = uv_default_loop();
  server.loop = loop;

  sockaddr_storage addr{};
  if (uv_ip4_addr(opt.host.c_str(), opt.port, reinterpret_cast<sockaddr_in*>(&addr)) != 0 &&
      uv_ip6_addr(opt.host.c_str(), opt.port, reinterpret_cast<sockaddr_in6*>(&addr)) != 0) {
    std::fprintf(stderr, "demo: --listen host must be an IP address: %s\n", opt.host.c_str());
    return 2;
  }
  uv_tcp_init(loop, &server.listener);
  server.listener.data = &server;
  int r = uv_tcp_bind(&server.listener, reinterpret_cast<const sockaddr*>(&addr), 0);
  if (r == 0) r = uv_listen(reinterpret_cast<uv_stream_t*>(&server.listener), 511, on_connection);
  if (r != 0) {
    std::fprintf(stderr, "demo: cannot listen on %s:%d: %s\n", opt.host.c_str(), opt.port, uv_strerror(r));
    return 1;
  }
  server.port = onelayer::local_port(&server.listener);
  if (!opt.ports_file.empty() && !write_ports_file(opt.ports_file, server.port)) {
    std::fprintf(stderr, "demo: cannot write %s\n", opt.ports_file.c_str());
    return 1;
  }

  uv_signal_init(loop, &server.sigint);
  uv_signal_init(loop, &server.sigterm);
  server.sigint.data = &server;
  server.sigterm.data = &server;
  uv_signal_start(&server.sigint, on_signal, SIGINT);
  uv_signal_start(&server.sigterm, on_signal, SIGTERM);

  std::fprintf(stderr, "demo: listening on %s:%d\n", opt.host.c_str(), server.port);
  uv_run(loop, UV_RUN_DEFAULT);
  const int rc = uv_loop_close(loop);
  if (rc != 0) std::fprintf(stderr, "demo: loop closed with handles open: %s\n", uv_strerror(rc));
  std::fprintf(stderr, "demo: bye\n");
  return 0;
}
