#include "shell/tls/tls_server_context.h"

#include <memory>
#include <string_view>

#include "shell/tls/tls_channel.h"
#include "shell/tls/tls_files.h"

namespace onelayer {

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

}  // namespace onelayer
