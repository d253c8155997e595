#include "shell/admin/admin_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>

#include "core/callers/bearer_token.h"
#include "core/http/http_headers.h"
#include "core/base/http_status.h"
#include "shell/http1/http_parser.h"
#include "shell/io/handle_wrap.h"
#include "shell/io/socket_address.h"
#include "shell/io/string_write.h"

namespace onelayer {

// One admin client. Owns two handles (the socket and its idle timer); the
// object is deleted only when both close callbacks have run (HandleWrap).
// Its requests are parsed by the proxy's HTTP/1 parser, with the admin
// listener's limits; the parser hands it each request (HttpParser::Handler).
struct AdminServer::Conn : HandleWrap<AdminServer::Conn>, HttpParser::Handler {
  AdminServer* server = nullptr;  // null once the server is destroyed
  uv_tcp_t tcp{};
  uv_timer_t idle{};
  HttpParser parser{HTTP_REQUEST, this};
  bool counted = false;        // counts toward serving_
  bool peer_loopback = false;  // the client's address is 127.0.0.0/8 or ::1 (or ::ffff:127.x)
  std::string peer;            // the client's address, for log lines
  bool close_after_write = false;  // no more requests: close once writes are done
  bool lingering = false;      // FIN sent: discard input until EOF or the timer
  size_t writes_pending = 0;

  // The request being parsed: its body's size so far, and the status a
  // limit stops it with.
  size_t body_bytes = 0;
  int reject_status = 0;

  // Both handles are initialized (uv_*_init) and belong to this object now.
  void adopt_handles() {
    adopt(&tcp);
    adopt(&idle);
  }
  void close() { close_handles(nullptr, &tcp, &idle); }
  void on_closed();

  // HttpParser::Handler.
  int on_head(MessageHead& head) override;
  int on_body(const char* data, size_t len) override;
  int on_message_end() override;
};

namespace {

constexpr int kBacklog = 128;
constexpr uint64_t kMaxLingerMs = 2'000;
constexpr size_t kReadBufferBytes = 64 * 1024;

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::string allow;  // for 405
  bool ask_for_token = false;  // 401: WWW-Authenticate: Bearer
};

Response text(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Response method_not_allowed(const char* allow) {
  Response r = text(405, "method not allowed\n");
  r.allow = allow;
  return r;
}

std::string with_newline(std::string s) {
  if (!s.empty() && s.back() != '\n') s += '\n';
  return s;
}

// The peer's address as text, and whether it is a loopback address.
std::string peer_of(const uv_tcp_t* tcp, bool* loopback) {
  *loopback = false;
  sockaddr_storage ss{};
  int len = sizeof ss;
  if (uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char ip[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    *loopback = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    uv_ip4_name(in, ip, sizeof ip);
  } else if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    const uint8_t* b = in6->sin6_addr.s6_addr;
    static const uint8_t kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    *loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) || (std::memcmp(b, kV4Mapped, 12) == 0 && b[12] == 127);
    uv_ip6_name(in6, ip, sizeof ip);
  }
  return ip;
}

}  // namespace

// libuv trampolines, plus the per-connection logic they and the parser
// drive.
struct AdminServer::Callbacks {
  // The request's head is complete: its body, if any, follows.
  static int on_head(Conn* c) {
    c->body_bytes = 0;
    return 0;
  }

  static int on_body(Conn* c, size_t len) {
    c->body_bytes += len;
    if (c->server != nullptr && c->body_bytes > c->server->limits_.max_body_bytes) {
      c->reject_status = 413;
      return -1;
    }
    return 0;
  }

  static int on_message_end(Conn* c) {
    if (c->server == nullptr || c->closing()) return HPE_PAUSED;
    const MessageHead& head = c->parser.head();
    Response r = dispatch(*c->server, *c, head);
    spdlog::debug("admin: {} {} -> {}", head.method, head.target, r.status);
    const bool close = !head.keep_alive;
    send(c, r, head.method == "HEAD", close, head.http_major == 1 && head.http_minor == 0);
    // Anything pipelined after a request that closes the connection is
    // ignored; so is what follows one that would switch protocols (the
    // admin listener never switches: the answer was its last).
    if (close || c->parser.request_switches_protocols()) {
      c->close_after_write = true;
      return HPE_PAUSED;
    }
    return 0;
  }

  // Whether this request may change state: nullopt when it may, else the
  // refusal. The peer check comes first: a remote peer learns nothing
  // about the token from a 403.
  static std::optional<Response> refuse_mutation(const AdminServer& s, const MessageHead& head, const Conn& c,
                                                 std::string_view path) {
    if (!c.peer_loopback && !s.guard_.allow_remote_mutations) {
      spdlog::warn("admin: {} from {} refused: state-changing endpoints answer loopback peers only "
                   "(admin.allow_remote_mutations)",
                   path, c.peer);
      return text(403, "forbidden: this endpoint changes state and answers loopback clients only\n");
    }
    const Header* authorization = find_header(head.headers, "authorization");
    if (!s.guard_.token.empty() &&
        !bearer_token_matches(authorization ? std::string_view(authorization->value) : std::string_view(), s.guard_.token)) {
      // The header's value is never logged: it may be a token one character off.
      spdlog::warn("admin: {} from {} refused: {}", path, c.peer,
                   authorization ? "the bearer token does not match admin.token_file"
                                       : "no Authorization header (admin.token_file is set)");
      Response r = text(401, "unauthorized: send Authorization: Bearer <the token in admin.token_file>\n");
      r.ask_for_token = true;
      return r;
    }
    return std::nullopt;
  }

  static Response dispatch(AdminServer& s, const Conn& c, const MessageHead& head) {
    const std::string& url = head.target;
    const std::string& method = head.method;
    const std::string_view path = std::string_view(url).substr(0, url.find('?'));
    const bool get = method == "GET" || method == "HEAD";
    const Hooks& h = s.hooks_;
    try {
      if (path == "/healthz") {
        return get ? text(200, "ok") : method_not_allowed("GET, HEAD");
      }
      if (path == "/ready") {
        if (!get) return method_not_allowed("GET, HEAD");
        return (!h.ready || h.ready()) ? text(200, "ready") : text(503, "not ready");
      }
      if (path == "/config") {
        if (!get) return method_not_allowed("GET, HEAD");
        Response r = text(200, h.config_yaml ? h.config_yaml() : std::string());
        r.content_type = "text/yaml; charset=utf-8";
        return r;
      }
      if (path == "/metrics") {
        if (!get) return method_not_allowed("GET, HEAD");
        Response r = text(200, h.metrics_text ? h.metrics_text() : std::string());
        r.content_type = "text/plain; version=0.0.4; charset=utf-8";
        return r;
      }
      if (path == "/fleet" && h.fleet) {
        return get ? text(200, h.fleet()) : method_not_allowed("GET, HEAD");
      }
      if (path == "/fault") {
        const char* name = method == "POST" ? "POST" : method == "DELETE" ? "DELETE" : get ? "GET" : nullptr;
        if (!name) return method_not_allowed("GET, HEAD, POST, DELETE");
        if (!get) {
          if (std::optional<Response> no = refuse_mutation(s, head, c, path)) return *no;
        }
        if (!h.fault) return text(501, "fault drills are not available\n");
        size_t q = url.find('?');
        auto [status, body] = h.fault(name, q == std::string::npos ? std::string_view{} : std::string_view(url).substr(q + 1));
        return text(status, with_newline(std::move(body)));
      }
      if (path == "/reload") {
        if (method != "POST") return method_not_allowed("POST");
        if (std::optional<Response> no = refuse_mutation(s, head, c, path)) return *no;
        if (!h.reload) return text(501, "reload is not available\n");
        auto [ok, message] = h.reload();
        return text(ok ? 200 : 500, with_newline(std::move(message)));
      }
    } catch (const std::exception& e) {
      spdlog::error("admin: {} failed: {}", path, e.what());
      return text(500, with_newline(std::string("internal error: ") + e.what()));
    } catch (...) {
      spdlog::error("admin: {} failed", path);
      return text(500, "internal error\n");
    }
    return text(404, "not found\n");
  }

  static void send(Conn* c, const Response& r, bool head_only, bool close, bool http10) {
    std::string out;
    out.reserve(160 + r.body.size());
    out += "HTTP/1.1 ";
    out += std::to_string(r.status);
    out += ' ';
    out += status_text(r.status);
    out += "\r\nContent-Type: ";
    out += r.content_type;
    out += "\r\nContent-Length: ";
    out += std::to_string(r.body.size());
    out += "\r\nCache-Control: no-store\r\n";
    if (!r.allow.empty()) out += "Allow: " + r.allow + "\r\n";
    if (r.ask_for_token) out += "WWW-Authenticate: Bearer realm=\"onelayer admin\"\r\n";
    if (close) {
      out += "Connection: close\r\n";
    } else if (http10) {
      out += "Connection: keep-alive\r\n";  // HTTP/1.0 closes unless told otherwise
    }
    out += "\r\n";
    if (!head_only) out += r.body;
    write(c, std::move(out));
  }

  static void write(Conn* c, std::string data) {
    if (StringWrite::start(reinterpret_cast<uv_stream_t*>(&c->tcp), std::move(data), c, on_write) < 0) {
      close_conn(c);
      return;
    }
    ++c->writes_pending;
  }

  static void on_write(void* owner, int status) {
    Conn* c = static_cast<Conn*>(owner);
    --c->writes_pending;
    if (status < 0) {
      close_conn(c);
    } else if (c->close_after_write && c->writes_pending == 0) {
      linger(c);
    }
  }

  // Sends FIN and drains what the client still sends before closing, so the
  // client reads our last response instead of a reset (closing a socket with
  // unread input makes the kernel send RST).
  static void linger(Conn* c) {
    if (c->closing() || c->lingering) return;
    c->lingering = true;
    auto* req = new uv_shutdown_t;
    req->data = c;
    if (uv_shutdown(req, reinterpret_cast<uv_stream_t*>(&c->tcp), on_shutdown) < 0) {
      delete req;
      close_conn(c);
      return;
    }
    uint64_t ms = c->server != nullptr ? std::min(c->server->limits_.idle_timeout_ms, kMaxLingerMs) : 0;
    uv_timer_start(&c->idle, on_idle, ms, 0);
  }

  static void on_shutdown(uv_shutdown_t* req, int status) {
    Conn* c = static_cast<Conn*>(req->data);
    delete req;
    if (status < 0) close_conn(c);
  }

  static void on_idle(uv_timer_t* t) { close_conn(Conn::owner_of(t)); }

  static void on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
    Conn* c = Conn::owner_of(h);
    if (c->server == nullptr) {
      *buf = uv_buf_init(nullptr, 0);  // makes libuv report UV_ENOBUFS: the read callback closes
      return;
    }
    auto& b = c->server->read_buffer_;
    *buf = uv_buf_init(b.data(), static_cast<unsigned>(b.size()));
  }

  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
    Conn* c = Conn::owner_of(stream);
    if (nread < 0) {
      close_conn(c);  // EOF, reset, or no buffer
      return;
    }
    if (nread == 0 || c->closing() || c->lingering || c->close_after_write || c->server == nullptr) return;
    uv_timer_start(&c->idle, on_idle, c->server->limits_.idle_timeout_ms, 0);
    c->parser.feed(buf->base, static_cast<size_t>(nread));
    const HttpParser::Error err = c->parser.error();
    if (err == HttpParser::Error::none || err == HttpParser::Error::paused || c->closing()) return;
    reject(c, err);
  }

  // A limit or a parse error stopped the request: its status, then close.
  // A head over the limit before its first field is a request target too
  // long (414); later, a head too large (431).
  static void reject(Conn* c, HttpParser::Error err) {
    int status = c->reject_status != 0 ? c->reject_status : 400;
    if (err == HttpParser::Error::head_too_large) status = c->parser.head().headers.empty() ? 414 : 431;
    spdlog::warn("admin: rejecting request with {}: {}", status,
                 err == HttpParser::Error::head_too_large ? "request head too large"
                 : status == 413                         ? "request body too large"
                                                         : c->parser.error_reason());
    Response r = text(status, with_newline(status_text(status)));
    send(c, r, false, true, false);
    c->close_after_write = true;
  }

  static void on_connection(uv_stream_t* listener, int status) {
    auto* s = static_cast<AdminServer*>(listener->data);
    if (status < 0) {
      spdlog::warn("admin: accept failed: {}", uv_strerror(status));
      return;
    }
    if (s != nullptr && !s->closing_) s->accept_one();
  }

  static void close_conn(Conn* c) { c->close(); }

  static void on_listener_closed(uv_handle_t* h) {
    auto* tcp = reinterpret_cast<uv_tcp_t*>(h);
    auto* s = static_cast<AdminServer*>(h->data);
    if (s != nullptr) s->listener_closed(tcp);
    delete tcp;
  }
};

AdminServer::AdminServer(uv_loop_t* loop, Hooks hooks) : AdminServer(loop, std::move(hooks), Limits{}) {}

AdminServer::AdminServer(uv_loop_t* loop, Hooks hooks, Limits limits)
    : loop_(loop), hooks_(std::move(hooks)), limits_(limits), read_buffer_(kReadBufferBytes) {}

AdminServer::~AdminServer() {
  if (!closing_) close(nullptr);
  // Whatever is still closing frees itself later without calling back here.
  for (uv_tcp_t* t : closing_listeners_) t->data = nullptr;
  for (Conn* c : connections_) c->server = nullptr;
}

int AdminServer::listen(const HostPort& addr) {
  if (closing_) return UV_EINVAL;
  if (listener_ != nullptr) return UV_EBUSY;
  sockaddr_storage ss{};
  if (std::string err = resolve_address_blocking(addr.host.empty() ? "127.0.0.1" : addr.host, addr.port, &ss);
      !err.empty()) {
    spdlog::error("admin: {}", err);
    return UV_EAI_NONAME;
  }
  auto* tcp = new uv_tcp_t;
  int r = uv_tcp_init(loop_, tcp);
  if (r < 0) {
    delete tcp;  // never registered with the loop
    return r;
  }
  tcp->data = this;
  r = uv_tcp_bind(tcp, reinterpret_cast<const sockaddr*>(&ss), 0);
  if (r == 0) r = uv_listen(reinterpret_cast<uv_stream_t*>(tcp), kBacklog, Callbacks::on_connection);
  if (r < 0) {
    spdlog::error("admin: cannot listen on {}:{}: {}", addr.host, addr.port, uv_strerror(r));
    closing_listeners_.push_back(tcp);
    uv_close(reinterpret_cast<uv_handle_t*>(tcp), Callbacks::on_listener_closed);
    return r;
  }
  listener_ = tcp;
  port_ = local_port(tcp);
  spdlog::info("admin: listening on {}:{}", addr.host, port_);
  return 0;
}

int AdminServer::port() const { return listener_ != nullptr ? port_ : 0; }

void AdminServer::accept_one() {
  auto* c = new Conn;
  c->server = this;
  if (uv_tcp_init(loop_, &c->tcp) < 0) {
    delete c;
    return;
  }
  uv_timer_init(loop_, &c->idle);
  c->adopt_handles();
  connections_.push_back(c);
  if (uv_accept(reinterpret_cast<uv_stream_t*>(listener_), reinterpret_cast<uv_stream_t*>(&c->tcp)) < 0) {
    Callbacks::close_conn(c);
    return;
  }
  if (serving_ >= limits_.max_connections) {
    spdlog::warn("admin: {} connections open, closing a new one", serving_);
    Callbacks::close_conn(c);
    return;
  }
  c->counted = true;
  ++serving_;
  c->peer = peer_of(&c->tcp, &c->peer_loopback);
  uv_tcp_nodelay(&c->tcp, 1);
  // Every field fits the head limit, which alone bounds how many there are.
  c->parser.set_limits(limits_.max_head_bytes, std::numeric_limits<uint32_t>::max());
  uv_timer_start(&c->idle, Callbacks::on_idle, limits_.idle_timeout_ms, 0);
  if (uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp), Callbacks::on_alloc, Callbacks::on_read) < 0) {
    Callbacks::close_conn(c);
  }
}

int AdminServer::Conn::on_head(MessageHead&) { return Callbacks::on_head(this); }
int AdminServer::Conn::on_body(const char*, size_t len) { return Callbacks::on_body(this, len); }
int AdminServer::Conn::on_message_end() { return Callbacks::on_message_end(this); }

void AdminServer::Conn::on_closed() {
  if (server != nullptr) server->conn_closed(this);
}

void AdminServer::conn_closed(Conn* c) {
  if (c->counted) --serving_;
  auto it = std::find(connections_.begin(), connections_.end(), c);
  if (it != connections_.end()) {
    *it = connections_.back();
    connections_.pop_back();
  }
  maybe_finish_close();
}

void AdminServer::listener_closed(uv_tcp_t* handle) {
  auto it = std::find(closing_listeners_.begin(), closing_listeners_.end(), handle);
  if (it != closing_listeners_.end()) closing_listeners_.erase(it);
  maybe_finish_close();
}

void AdminServer::close(std::function<void()> on_closed) {
  if (on_closed) on_closed_.push_back(std::move(on_closed));
  if (!closing_) {
    closing_ = true;
    if (listener_ != nullptr) {
      closing_listeners_.push_back(listener_);
      uv_close(reinterpret_cast<uv_handle_t*>(listener_), Callbacks::on_listener_closed);
      listener_ = nullptr;
    }
    for (Conn* c : connections_) Callbacks::close_conn(c);
  }
  maybe_finish_close();
}

void AdminServer::maybe_finish_close() {
  if (!closing_ || listener_ != nullptr || !closing_listeners_.empty() || !connections_.empty()) return;
  // Callbacks may destroy this server: move them out first.
  auto callbacks = std::move(on_closed_);
  on_closed_.clear();
  for (auto& cb : callbacks) cb();
}

std::string read_admin_token(const std::string& path, std::string* error) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *error = "cannot read \"" + path + "\": " + std::strerror(errno);
    return "";
  }
  std::ostringstream text;
  text << f.rdbuf();
  std::string token = text.str();
  auto blank = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'; };
  while (!token.empty() && blank(token.back())) token.pop_back();
  size_t start = 0;
  while (start < token.size() && blank(token[start])) ++start;
  token.erase(0, start);
  if (token.empty()) {
    *error = "\"" + path + "\" holds no token";
    return "";
  }
  for (char ch : token) {
    if (static_cast<unsigned char>(ch) <= ' ' || ch == 0x7f) {
      *error = "\"" + path + "\" holds more than one word or a control character";
      return "";
    }
  }
  return token;
}

AdminServer::Guard admin_guard_for(const Config& cfg, std::vector<ConfigError>& errors) {
  AdminServer::Guard guard;
  guard.allow_remote_mutations = cfg.admin_allow_remote_mutations;
  if (cfg.admin_token_file.empty()) return guard;
  std::string error;
  guard.token = read_admin_token(cfg.admin_token_file, &error);
  if (guard.token.empty()) errors.push_back(ConfigError{cfg.source_path, 0, 0, "admin.token_file", error});
  return guard;
}

}  // namespace onelayer
