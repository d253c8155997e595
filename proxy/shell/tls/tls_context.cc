#include "shell/tls/tls_context.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include "shell/tls/openssl_library.h"
#include "shell/tls/tls_channel.h"

namespace onelayer {

namespace {

// The last OpenSSL reason, or `fallback`; clears the error queue.
std::string openssl_reason(const char* fallback) {
  unsigned long e = ERR_peek_last_error();
  const char* r = e ? ERR_reason_error_string(e) : nullptr;
  std::string out = r ? r : fallback;
  ERR_clear_error();
  return out;
}

// Whether `path` can be opened for reading; else *why says why.
bool readable(const std::string& path, std::string* why) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    *why = std::strerror(errno);
    return false;
  }
  std::fclose(f);
  return true;
}

// Loads a certificate chain and its key into ctx; false with *error and
// *key (the offending key's name) set.
bool load_pair(SSL_CTX* ctx, const std::string& cert, const std::string& key_file, std::string* error,
               std::string* key) {
  std::string why;
  if (!readable(cert, &why)) {
    *key = "cert_file";
    *error = "cannot load \"" + cert + "\": " + why;
    return false;
  }
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1) {
    *key = "cert_file";
    *error = "cannot load \"" + cert + "\": " + openssl_reason("not a PEM certificate");
    return false;
  }
  if (!readable(key_file, &why)) {
    *key = "key_file";
    *error = "cannot load \"" + key_file + "\": " + why;
    return false;
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    *key = "key_file";
    std::string reason = openssl_reason("not a PEM private key");
    *error = reason == "key values mismatch" ? "\"" + key_file + "\" is not the key of \"" + cert + "\""
                                             : "cannot load \"" + key_file + "\": " + reason;
    return false;
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    *key = "key_file";
    *error = "\"" + key_file + "\" is not the key of \"" + cert + "\"";
    ERR_clear_error();
    return false;
  }
  return true;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// ALPN as the wire wants it: length-prefixed names.
std::string alpn_wire(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    out.push_back(static_cast<char>(n.size()));
    out += n;
  }
  return out;
}

// Certificate rotation: a context built anew from the files by `build`
// takes the place of `ctx` (under `mu`, with `under_lock` run there too)
// and the old one is freed; connections still open hold their own
// references. False with *error ("key: why") and nothing changed when the
// files do not load.
template <class Build, class UnderLock>
bool replace_ctx(std::mutex& mu, SSL_CTX*& ctx, std::string* error, Build build, UnderLock under_lock) {
  std::string key;
  SSL_CTX* fresh = build(error, &key);
  if (!fresh) {
    if (!key.empty()) *error = key + ": " + *error;
    return false;
  }
  SSL_CTX* old = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    old = ctx;
    ctx = fresh;
    under_lock();
  }
  SSL_CTX_free(old);
  return true;
}

}  // namespace

TlsClientContext::~TlsClientContext() {
  for (auto& [k, s] : sessions_) SSL_SESSION_free(s);
  SSL_CTX_free(ctx_);
}

std::shared_ptr<TlsClientContext> TlsClientContext::create(const UpstreamTls& tls, UpstreamProtocol protocol,
                                                           std::string* error, std::string* error_key) {
  std::shared_ptr<TlsClientContext> c(new TlsClientContext);
  c->tls_ = tls;
  c->protocol_ = protocol;
  c->ctx_ = c->build(error, error_key);
  if (!c->ctx_) return nullptr;
  return c;
}

std::vector<std::string> TlsClientContext::files() const {
  std::vector<std::string> out;
  for (const std::string* f : {&tls_.ca_file, &tls_.cert_file, &tls_.key_file}) {
    if (!f->empty()) out.push_back(*f);
  }
  return out;
}

bool TlsClientContext::reload_files(std::string* error) {
  return replace_ctx(mu_, ctx_, error, [this](std::string* e, std::string* k) { return build(e, k); }, [this] {
    // A session from before may have been made with the old key or CA.
    for (auto& [k, sess] : sessions_) SSL_SESSION_free(sess);
    sessions_.clear();
  });
}

// A new SSL_CTX from tls_ and protocol_; nullptr with *error set.
SSL_CTX* TlsClientContext::build(std::string* error, std::string* error_key) {
  const UpstreamTls& tls = tls_;
  const UpstreamProtocol protocol = protocol_;
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> holder(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!holder) {
    *error_key = "";
    *error = "cannot create a TLS context: " + openssl_reason("out of memory");
    return nullptr;
  }
  SSL_CTX* ctx = holder.get();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (tls.verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (!tls.ca_file.empty()) {
      std::string why;
      if (!readable(tls.ca_file, &why) || SSL_CTX_load_verify_locations(ctx, tls.ca_file.c_str(), nullptr) != 1) {
        *error_key = "ca_file";
        *error = "cannot load \"" + tls.ca_file + "\": " + (why.empty() ? openssl_reason("no PEM certificates") : why);
        return nullptr;
      }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      *error_key = "verify";
      *error = "cannot load the system certificate store: " + openssl_reason("unknown error");
      return nullptr;
    }
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  if (!tls.cert_file.empty() && !load_pair(ctx, tls.cert_file, tls.key_file, error, error_key)) return nullptr;
  // ALPN follows `protocol` unless `alpn` is given: h2 offers h2 alone,
  // http1 http/1.1 alone, auto both with h2 first (the server's choice
  // decides what the connection speaks).
  std::vector<std::string> alpn = tls.alpn;
  if (alpn.empty()) {
    if (protocol == UpstreamProtocol::h2) {
      alpn = {"h2"};
    } else if (protocol == UpstreamProtocol::auto_) {
      alpn = {"h2", "http/1.1"};
    } else {
      alpn = {"http/1.1"};
    }
  }
  offers_h2_ = std::find(alpn.begin(), alpn.end(), "h2") != alpn.end();
  std::string wire = alpn_wire(alpn);
  SSL_CTX_set_alpn_protos(ctx, reinterpret_cast<const unsigned char*>(wire.data()), static_cast<unsigned>(wire.size()));
  // Client sessions are kept here per endpoint, not in OpenSSL's cache
  // (which a client never looks up by itself).
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx, on_new_session);
  SSL_CTX_set_app_data(ctx, this);
  return holder.release();
}

int TlsClientContext::on_new_session(SSL* ssl, SSL_SESSION* s) {
  auto* self = static_cast<TlsClientContext*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
  TlsChannel* ch = TlsChannel::of(ssl);
  if (!self || !ch || ch->session_key().empty()) return 0;
  // A copy: OpenSSL marks the connection's own session not resumable when
  // the connection closes without close_notify (every pooled connection
  // that an idle timeout or the upstream ends).
  SSL_SESSION* copy = SSL_SESSION_dup(s);
  if (!copy) return 0;
  std::lock_guard<std::mutex> lock(self->mu_);
  SSL_SESSION*& slot = self->sessions_[ch->session_key()];
  if (slot) SSL_SESSION_free(slot);
  slot = copy;
  return 0;  // OpenSSL keeps (and frees) its own reference
}

std::string TlsClientContext::sni_for(const std::string& host) const {
  if (!tls_.sni.empty()) return tls_.sni;
  return is_ip_literal(host) ? std::string() : host;
}

std::string TlsClientContext::verify_name_for(const std::string& host) const {
  if (!tls_.verify) return {};
  return tls_.sni.empty() ? host : tls_.sni;
}

std::unique_ptr<TlsChannel> TlsClientContext::open(const std::string& host, const std::string& endpoint_key,
                                                   bool http1_only) {
  std::lock_guard<std::mutex> lock(mu_);
  auto ch = std::make_unique<TlsChannel>(ctx_, TlsChannel::Role::client);
  if (http1_only && offers_h2_) {
    static const std::string wire = alpn_wire({"http/1.1"});
    SSL_set_alpn_protos(ch->ssl(), reinterpret_cast<const unsigned char*>(wire.data()),
                        static_cast<unsigned>(wire.size()));
  }
  ch->set_sni(sni_for(host));
  ch->set_verify_name(verify_name_for(host));
  ch->set_session_key(endpoint_key);
  auto it = sessions_.find(endpoint_key);
  if (it != sessions_.end()) {
    // A copy for this connection: once a TLS 1.3 handshake that resumed a
    // session is done, OpenSSL marks that session not resumable (it would
    // have tickets used once). Given the kept one itself, every connection
    // opened before the server's next ticket arrived would make a full
    // handshake (the origin's signature, our certificate checks): a few
    // percent of tests/bench/tls.sh's handshake row.
    SSL_SESSION* own = SSL_SESSION_dup(it->second);
    if (own) {
      ch->set_session(own);
      SSL_SESSION_free(own);
    }
  }
  return ch;
}

TlsServerContext::~TlsServerContext() { SSL_CTX_free(ctx_); }

// What a listener offers, in its order of preference (the wire form).
static const std::string_view kAlpnBoth("\x02h2\x08http/1.1", 12);
static const std::string_view kAlpnH2("\x02h2", 3);
static const std::string_view kAlpnHttp1("\x08http/1.1", 9);

static int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                       unsigned inlen, void* arg) {
  // The first of ours the client offers; none: no ALPN at all (the client
  // then speaks what it would without it, and the first bytes decide).
  const auto* ours = static_cast<const std::string_view*>(arg);
  unsigned char* sel = nullptr;
  if (SSL_select_next_proto(&sel, outlen, reinterpret_cast<const unsigned char*>(ours->data()),
                            static_cast<unsigned>(ours->size()), in, inlen) == OPENSSL_NPN_NEGOTIATED) {
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

std::shared_ptr<TlsServerContext> TlsServerContext::create(const ListenerTls& tls,
                                                           const ListenerProtocols& protocols, std::string* error,
                                                           std::string* error_key) {
  std::shared_ptr<TlsServerContext> c(new TlsServerContext);
  c->tls_ = tls;
  c->protocols_ = protocols;
  c->ctx_ = c->build(error, error_key);
  if (!c->ctx_) return nullptr;
  return c;
}

SSL_CTX* TlsServerContext::build(std::string* error, std::string* error_key) const {
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> holder(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!holder) {
    *error_key = "";
    *error = "cannot create a TLS context: " + openssl_reason("out of memory");
    return nullptr;
  }
  SSL_CTX* ctx = holder.get();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (!load_pair(ctx, tls_.cert_file, tls_.key_file, error, error_key)) return nullptr;
  if (!tls_.client_ca_file.empty()) {
    std::string why;
    if (!readable(tls_.client_ca_file, &why) ||
        SSL_CTX_load_verify_locations(ctx, tls_.client_ca_file.c_str(), nullptr) != 1) {
      *error_key = "client_ca_file";
      *error = "cannot load \"" + tls_.client_ca_file + "\": " +
               (why.empty() ? openssl_reason("no PEM certificates") : why);
      return nullptr;
    }
    int mode = SSL_VERIFY_PEER | (tls_.require_client_cert ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0);
    SSL_CTX_set_verify(ctx, mode, nullptr);
    // A resumed session keeps the verified certificate; OpenSSL resumes
    // one only within the same session id context when it verifies peers.
    static const unsigned char kSessionContext[] = "onelayer-listener";
    SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
  }
  const std::string_view* ours = protocols_.h2c ? (protocols_.http1 ? &kAlpnBoth : &kAlpnH2) : &kAlpnHttp1;
  SSL_CTX_set_alpn_select_cb(ctx, select_alpn, const_cast<std::string_view*>(ours));
  return holder.release();
}

std::vector<std::string> TlsServerContext::files() const {
  std::vector<std::string> out{tls_.cert_file, tls_.key_file};
  if (!tls_.client_ca_file.empty()) out.push_back(tls_.client_ca_file);
  return out;
}

bool TlsServerContext::reload_files(std::string* error) {
  return replace_ctx(mu_, ctx_, error, [this](std::string* e, std::string* k) { return build(e, k); }, [] {});
}

std::unique_ptr<TlsChannel> TlsServerContext::open() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::make_unique<TlsChannel>(ctx_, TlsChannel::Role::server);
}

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
