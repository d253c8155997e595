// The admin HTTP listener (docs/operations.md "Admin listener"): /healthz, /ready,
// /config, /metrics and POST /reload on its own address, served on one libuv
// loop. It answers from hooks the runtime provides and never touches proxy
// state itself, so it cannot be reached through a proxy listener. Requests
// that change state (POST /reload, POST and DELETE /fault) pass the Guard
// first (docs/security.md "The admin port").
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/config/config.h"
#include "core/config/config_loader.h"

namespace onelayer {

class AdminServer {
 public:
  // Hooks run on the loop thread. An empty hook answers: ready -> true,
  // config_yaml / metrics_text -> empty body, reload -> 501. A hook that
  // throws gets a 500 answer; nothing escapes into libuv.
  struct Hooks {
    std::function<bool()> ready;                            // /ready 200 or 503
    std::function<std::string()> config_yaml;               // GET /config
    std::function<std::pair<bool, std::string>()> reload;  // POST /reload -> 200 or 500 with the errors
    std::function<std::string()> metrics_text;              // GET /metrics
    // GET, POST and DELETE /fault (fault drills): method name and the raw
    // query string in, status and text body out. Empty: 501.
    std::function<std::pair<int, std::string>(std::string_view method, std::string_view query)> fault;
    std::function<std::string()> fleet;  // GET /fleet (fleet budgets' view); empty: 404
  };

  struct Limits {
    size_t max_head_bytes = 16 * 1024;  // request line + header names and values
    size_t max_body_bytes = 64 * 1024;  // admin requests carry no useful body
    size_t max_connections = 64;        // more are accepted and closed at once
    uint64_t idle_timeout_ms = 30'000;  // no bytes from the client for this long: close
  };

  // Who may call the endpoints that change state. Read-only ones stay open.
  struct Guard {
    std::string token;                    // "": none asked for; else `Authorization: Bearer <token>` (401 without)
    bool allow_remote_mutations = false;  // false: 403 to peers other than loopback addresses
  };

  AdminServer(uv_loop_t* loop, Hooks hooks);
  AdminServer(uv_loop_t* loop, Hooks hooks, Limits limits);
  // Starts close() if it was not called. Handles still closing then free
  // themselves in their close callbacks when the loop next runs; on_closed is
  // not called after destruction.
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Binds and listens. `addr.host` is an IP literal or a name resolved once
  // here (blocking: call at startup). Returns 0 or a negative libuv error
  // (UV_EBUSY when already listening, UV_EINVAL after close()).
  int listen(const HostPort& addr);
  int port() const;  // the bound port (useful with port 0), 0 when not listening
  // Applies to requests answered from now on (start and every reload).
  void set_guard(Guard guard) { guard_ = std::move(guard); }
  // Closes the listener and every connection; on_closed runs once all their
  // handles are closed (on a later loop turn). Idempotent: a later call adds
  // its callback, or runs it at once when everything is already closed.
  void close(std::function<void()> on_closed);

  // Connections being served (rejected ones over the limit not included).
  size_t connection_count() const { return serving_; }

  // Internals shared with the callbacks in admin_server.cc.
  struct Conn;
  struct Callbacks;

 private:
  void accept_one();
  void conn_closed(Conn* conn);
  void listener_closed(uv_tcp_t* handle);
  void maybe_finish_close();

  uv_loop_t* loop_;
  Hooks hooks_;
  Limits limits_;
  Guard guard_;
  uv_tcp_t* listener_ = nullptr;             // owned; freed in its close callback
  std::vector<uv_tcp_t*> closing_listeners_;  // closed, close callback not yet run
  int port_ = 0;
  bool closing_ = false;
  size_t serving_ = 0;
  std::vector<Conn*> connections_;  // every connection until its handles are closed
  std::vector<std::function<void()>> on_closed_;
  std::vector<char> read_buffer_;  // one per server: each read is parsed before the next
};

// The admin token in `path` (admin.token_file): the file's text without
// surrounding blanks and line ends. "" with *error set when it cannot be
// read or holds no token. The token itself is never put in *error.
std::string read_admin_token(const std::string& path, std::string* error);

// The guard `cfg` asks for, with its token read from admin.token_file; a
// file that cannot be read adds an error naming that key to `errors`.
AdminServer::Guard admin_guard_for(const Config& cfg, std::vector<ConfigError>& errors);

}  // namespace onelayer
