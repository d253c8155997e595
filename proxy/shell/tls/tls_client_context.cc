#include "shell/tls/tls_client_context.h"

#include <arpa/inet.h>

#include <algorithm>
#include <memory>

#include "shell/tls/tls_channel.h"
#include "shell/tls/tls_files.h"

namespace onelayer {

namespace {

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

}  // namespace onelayer
