// A listener's TLS settings made ready for connections: one SSL_CTX per
// listener with a `tls` block (its certificate, the client CA for mutual
// TLS, ALPN after its `protocols`). Shared by every worker (SSL_CTX is
// thread-safe once set up).
//
// Its files can be loaded again while it is in use (certificate rotation,
// docs/tls.md), as TlsClientContext's: new handshakes use the new SSL_CTX,
// connections already open keep theirs.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/config/config.h"

namespace onelayer {

class TlsChannel;

class TlsServerContext {
 public:
  ~TlsServerContext();
  // ALPN follows the listener's `protocols`: h2 (preferred) when it
  // speaks h2c, http/1.1 when it speaks http1.
  // With client_ca_file, a client certificate is asked for and verified
  // against it (required with require_client_cert); one that does not
  // verify ends the handshake.
  static std::shared_ptr<TlsServerContext> create(const ListenerTls& tls, const ListenerProtocols& protocols,
                                                  std::string* error, std::string* error_key);
  std::unique_ptr<TlsChannel> open();
  // The files it loads (cert_file, key_file, client_ca_file if given).
  std::vector<std::string> files() const;
  // As TlsClientContext::reload_files.
  bool reload_files(std::string* error);

 private:
  TlsServerContext() = default;
  SSL_CTX* build(std::string* error, std::string* error_key) const;

  ListenerTls tls_;
  ListenerProtocols protocols_;
  std::mutex mu_;
  SSL_CTX* ctx_ = nullptr;  // guarded by mu_ once shared
};

}  // namespace onelayer
