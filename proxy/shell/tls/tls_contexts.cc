#include "shell/tls/tls_contexts.h"

#include <spdlog/spdlog.h>

#include <optional>
#include <string>

#include "shell/tls/openssl_library.h"

namespace onelayer {

std::vector<ConfigError> build_tls_contexts(const Config& cfg, TlsContexts& out) {
  std::vector<ConfigError> errors;
  auto problem = [&](const std::string& path, const std::string& key, const std::string& msg) {
    errors.push_back(ConfigError{cfg.source_path, 0, 0, key.empty() ? path : path + "." + key, msg});
  };
  out.upstreams.assign(cfg.upstreams.size(), nullptr);
  out.listeners.assign(cfg.listeners.size(), nullptr);
  // OpenSSL is opened at the config's first `tls` block: each block is an
  // error while it cannot be.
  std::string load_error;
  std::optional<bool> opened;
  auto openssl = [&](const std::string& path) {
    if (!opened) opened = OpenSslLibrary::load(&load_error);
    if (!*opened) problem(path, "", "TLS needs OpenSSL: " + load_error);
    return *opened;
  };
  for (size_t i = 0; i < cfg.upstreams.size(); ++i) {
    const Upstream& u = cfg.upstreams[i];
    if (!u.tls) continue;
    std::string path = "upstreams[" + std::to_string(i) + "].tls";
    if (!openssl(path)) continue;
    if (!u.tls->verify)
      spdlog::warn("{}: upstream {}: tls.verify is false: its certificates are not checked, so anyone on the path "
                   "can read and change its traffic",
                   cfg.source_path, u.name);
    std::string error, key;
    out.upstreams[i] = TlsClientContext::create(*u.tls, u.protocol, &error, &key);
    if (!out.upstreams[i]) problem(path, key, error);
  }
  for (size_t i = 0; i < cfg.listeners.size(); ++i) {
    const Listener& l = cfg.listeners[i];
    if (!l.tls) continue;
    std::string path = "listeners[" + std::to_string(i) + "].tls";
    if (!openssl(path)) continue;
    std::string error, key;
    out.listeners[i] = TlsServerContext::create(*l.tls, l.protocols, &error, &key);
    if (!out.listeners[i]) problem(path, key, error);
  }
  return errors;
}

}  // namespace onelayer
