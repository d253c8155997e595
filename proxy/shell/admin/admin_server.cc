#include "shell/admin/admin_server.h"

#include <llhttp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>

#include "core/callers/bearer_token.h"
#include "core/http/http_headers.h"
#include "core/base/http_status.h"
#include "shell/io/handle_wrap.h"
#include "shell/io/socket_address.h"

namespace onelayer {

// One admin client. Owns two handles (the socket and its idle timer); the
// object is deleted only when both close callbacks have run (HandleWrap).
struct AdminServer::Conn : HandleWrap<AdminServer::Conn> {
  AdminServer* server = nullptr;  // null once the server is destroyed
  uv_tcp_t tcp{};
  uv_timer_t idle{};
  llhttp_t parser{};
  bool counted = false;        // counts toward serving_
  bool peer_loopback = false;  // the client's address is 127.0.0.0/8 or ::1 (or ::ffff:127.x)
  std::string peer;            // the client's address, for log lines
  bool close_after_write = false;  // no more requests: close once writes are done
  bool lingering = false;      // FIN sent: discard input until EOF or the timer
  size_t writes_pending = 0;

  // The request being parsed.
  std::string url;
  size_t head_bytes = 0;
  size_t body_bytes = 0;
  bool keep_alive = true;
  int reject_status = 0;  // set when a limit stops the parser
  std::string field;          // the header name being read (its pieces joined)
  bool in_authorization = false;  // the value being read is Authorization's
  std::string authorization;  // the request's Authorization value (the first one)
  bool has_authorization = false;

  // Both handles are initialized (uv_*_init) and belong to this object now.
  void adopt_handles() {
    adopt(&tcp);
    adopt(&idle);
  }
  void close() { close_handles(nullptr, &tcp, &idle); }
  void on_closed();
};

namespace {

constexpr int kBacklog = 128;
constexpr uint64_t kMaxLingerMs = 2'000;
constexpr size_t kReadBufferBytes = 64 * 1024;

struct WriteReq {
  uv_write_t req{};
  std::string data;
};

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

int bound_port(const uv_tcp_t* tcp) {
  sockaddr_storage ss{};
  int len = sizeof ss;
  if (uv_tcp_getsockname(tcp, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

}  // namespace

// libuv and llhttp trampolines, plus the per-connection logic they drive.
struct AdminServer::Callbacks {
  static const llhttp_settings_t& settings() {
    static const llhttp_settings_t s = [] {
      llhttp_settings_t st;
      llhttp_settings_init(&st);
      st.on_message_begin = on_message_begin;
      st.on_url = on_url;
      st.on_header_field = on_header_field;
      st.on_header_value = on_header_value;
      st.on_header_field_complete = on_header_field_complete;
      st.on_header_value_complete = on_header_value_complete;
      st.on_headers_complete = on_headers_complete;
      st.on_body = on_body;
      st.on_message_complete = on_message_complete;
      return st;
    }();
    return s;
  }

  static Conn* conn_of(llhttp_t* p) { return static_cast<Conn*>(p->data); }

  // Head limit counts the request line and header bytes as llhttp reports
  // them, plus ": " and CRLF per field, so it tracks the wire size closely.
  static int add_head_bytes(Conn* c, size_t n) {
    c->head_bytes += n;
    if (c->server != nullptr && c->head_bytes > c->server->limits_.max_head_bytes) {
      if (c->reject_status == 0) c->reject_status = 431;
      llhttp_set_error_reason(&c->parser, "request head too large");
      return HPE_USER;
    }
    return 0;
  }

  static int on_message_begin(llhttp_t* p) {
    Conn* c = conn_of(p);
    c->url.clear();
    c->head_bytes = 0;
    c->body_bytes = 0;
    c->keep_alive = true;
    c->field.clear();
    c->in_authorization = false;
    c->authorization.clear();
    c->has_authorization = false;
    return 0;
  }

  static int on_url(llhttp_t* p, const char* at, size_t len) {
    Conn* c = conn_of(p);
    if (c->server != nullptr && c->url.size() + len > c->server->limits_.max_head_bytes) {
      c->reject_status = 414;
      llhttp_set_error_reason(&c->parser, "request target too long");
      return HPE_USER;
    }
    c->url.append(at, len);
    return add_head_bytes(c, len);
  }

  // Header names and values count toward the head limit; only the name
  // being read and Authorization's value are kept (the head limit bounds
  // both).
  static int on_header_field(llhttp_t* p, const char* at, size_t len) {
    Conn* c = conn_of(p);
    if (int r = add_head_bytes(c, len); r != 0) return r;
    c->field.append(at, len);
    return 0;
  }
  static int on_header_field_complete(llhttp_t* p) {
    Conn* c = conn_of(p);
    c->in_authorization = !c->has_authorization && iequals(c->field, "authorization");
    c->field.clear();
    return add_head_bytes(c, 4);
  }
  static int on_header_value(llhttp_t* p, const char* at, size_t len) {
    Conn* c = conn_of(p);
    if (int r = add_head_bytes(c, len); r != 0) return r;
    if (c->in_authorization) c->authorization.append(at, len);
    return 0;
  }
  static int on_header_value_complete(llhttp_t* p) {
    Conn* c = conn_of(p);
    if (c->in_authorization) c->has_authorization = true;
    c->in_authorization = false;
    return 0;
  }

  static int on_headers_complete(llhttp_t* p) {
    conn_of(p)->keep_alive = llhttp_should_keep_alive(p) != 0;
    return 0;
  }

  static int on_body(llhttp_t* p, const char*, size_t len) {
    Conn* c = conn_of(p);
    c->body_bytes += len;
    if (c->server != nullptr && c->body_bytes > c->server->limits_.max_body_bytes) {
      c->reject_status = 413;
      llhttp_set_error_reason(&c->parser, "request body too large");
      return HPE_USER;
    }
    return 0;
  }

  static int on_message_complete(llhttp_t* p) {
    Conn* c = conn_of(p);
    if (c->server == nullptr || c->closing()) return HPE_PAUSED;
    const bool head_only = p->method == HTTP_HEAD;
    Response r = dispatch(*c->server, *c, static_cast<llhttp_method_t>(p->method), c->url);
    spdlog::debug("admin: {} {} -> {}", llhttp_method_name(static_cast<llhttp_method_t>(p->method)), c->url, r.status);
    const bool close = !c->keep_alive;
    send(c, r, head_only, close, p->http_major == 1 && p->http_minor == 0);
    if (close) {
      // Anything pipelined after a request that closes the connection is ignored.
      c->close_after_write = true;
      return HPE_PAUSED;
    }
    return 0;
  }

  // Whether this request may change state: nullopt when it may, else the
  // refusal. The peer check comes first: a remote peer learns nothing
  // about the token from a 403.
  static std::optional<Response> refuse_mutation(const AdminServer& s, const Conn& c, std::string_view path) {
    if (!c.peer_loopback && !s.guard_.allow_remote_mutations) {
      spdlog::warn("admin: {} from {} refused: state-changing endpoints answer loopback peers only "
                   "(admin.allow_remote_mutations)",
                   path, c.peer);
      return text(403, "forbidden: this endpoint changes state and answers loopback clients only\n");
    }
    if (!s.guard_.token.empty() && !bearer_token_matches(c.authorization, s.guard_.token)) {
      // The header's value is never logged: it may be a token one character off.
      spdlog::warn("admin: {} from {} refused: {}", path, c.peer,
                   c.has_authorization ? "the bearer token does not match admin.token_file"
                                       : "no Authorization header (admin.token_file is set)");
      Response r = text(401, "unauthorized: send Authorization: Bearer <the token in admin.token_file>\n");
      r.ask_for_token = true;
      return r;
    }
    return std::nullopt;
  }

  static Response dispatch(AdminServer& s, const Conn& c, llhttp_method_t method, const std::string& url) {
    const std::string_view path = std::string_view(url).substr(0, url.find('?'));
    const bool get = method == HTTP_GET || method == HTTP_HEAD;
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
        const char* name = method == HTTP_POST ? "POST" : method == HTTP_DELETE ? "DELETE" : get ? "GET" : nullptr;
        if (!name) return method_not_allowed("GET, HEAD, POST, DELETE");
        if (method != HTTP_GET && method != HTTP_HEAD) {
          if (std::optional<Response> no = refuse_mutation(s, c, path)) return *no;
        }
        if (!h.fault) return text(501, "fault drills are not available\n");
        size_t q = url.find('?');
        auto [status, body] = h.fault(name, q == std::string::npos ? std::string_view{} : std::string_view(url).substr(q + 1));
        return text(status, with_newline(std::move(body)));
      }
      if (path == "/reload") {
        if (method != HTTP_POST) return method_not_allowed("POST");
        if (std::optional<Response> no = refuse_mutation(s, c, path)) return *no;
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
    auto* w = new WriteReq;
    w->data = std::move(data);
    w->req.data = c;
    uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
    int r = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&c->tcp), &buf, 1, on_write);
    if (r < 0) {
      delete w;
      close_conn(c);
      return;
    }
    ++c->writes_pending;
  }

  static void on_write(uv_write_t* req, int status) {
    auto* w = reinterpret_cast<WriteReq*>(req);
    Conn* c = static_cast<Conn*>(req->data);
    delete w;
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
    const llhttp_errno_t err = llhttp_execute(&c->parser, buf->base, static_cast<size_t>(nread));
    if (err == HPE_OK || err == HPE_PAUSED || c->closing()) return;
    if (err == HPE_PAUSED_UPGRADE) {
      // The request was answered; the admin listener never switches protocols.
      c->close_after_write = true;
      if (c->writes_pending == 0) linger(c);
      return;
    }
    reject(c, err);
  }

  static void reject(Conn* c, llhttp_errno_t err) {
    const int status = c->reject_status != 0 ? c->reject_status : 400;
    spdlog::warn("admin: rejecting request with {}: {} ({})", status, llhttp_errno_name(err),
                 c->parser.reason != nullptr ? c->parser.reason : "");
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
  port_ = bound_port(tcp);
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
  llhttp_init(&c->parser, HTTP_REQUEST, &Callbacks::settings());
  c->parser.data = c;
  uv_timer_start(&c->idle, Callbacks::on_idle, limits_.idle_timeout_ms, 0);
  if (uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp), Callbacks::on_alloc, Callbacks::on_read) < 0) {
    Callbacks::close_conn(c);
  }
}

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
