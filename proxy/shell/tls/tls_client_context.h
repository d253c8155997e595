// An upstream's TLS settings made ready for connections: one SSL_CTX per
// upstream with a `tls` block (verification against the system store or
// `ca_file`, client certificate, ALPN) and the last session each endpoint
// gave, for resumption. Shared by every worker (SSL_CTX is thread-safe once
// set up; the sessions have their own lock).
//
// The files behind it can be loaded again while it is in use (certificate
// rotation, docs/tls.md): reload_files() builds a new SSL_CTX from the same
// settings and, when every file loads, new handshakes use it; connections
// already open keep the one they started with (each SSL holds a reference
// to its SSL_CTX).
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/config/config.h"

namespace onelayer {

class TlsChannel;

class TlsClientContext {
 public:
  ~TlsClientContext();
  // nullptr with *error set when a file does not load.
  static std::shared_ptr<TlsClientContext> create(const UpstreamTls& tls, UpstreamProtocol protocol,
                                                  std::string* error, std::string* error_key);
  const UpstreamTls& settings() const { return tls_; }
  // The files it loads (ca_file, cert_file, key_file; those given).
  std::vector<std::string> files() const;
  // Loads them again: true when they all did (the kept sessions are
  // dropped, so the next handshakes are full ones); false with *error and
  // the context unchanged.
  bool reload_files(std::string* error);
  // The SNI sent to an endpoint (`sni`, else its host name; never an IP
  // literal) and the name its certificate must carry ("" with verify off).
  std::string sni_for(const std::string& host) const;
  std::string verify_name_for(const std::string& host) const;
  // A channel for a new connection to `endpoint_key` ("host:port"), with
  // SNI, the name check and the last session that endpoint gave, if any.
  // `http1_only`: its handshake offers ALPN http/1.1 alone (an `auto`
  // upstream's Upgrade request, which only HTTP/1.1 can carry).
  std::unique_ptr<TlsChannel> open(const std::string& host, const std::string& endpoint_key,
                                   bool http1_only = false);
  // The upstream's `protocol` this context was made for, and whether its
  // handshakes offer h2 (auto: the server may choose either).
  UpstreamProtocol protocol() const { return protocol_; }
  bool negotiates() const { return protocol_ == UpstreamProtocol::auto_; }

 private:
  TlsClientContext() = default;
  static int on_new_session(SSL* ssl, SSL_SESSION* s);
  SSL_CTX* build(std::string* error, std::string* error_key);

  SSL_CTX* ctx_ = nullptr;  // guarded by mu_ once shared
  UpstreamTls tls_;
  UpstreamProtocol protocol_ = UpstreamProtocol::http1;
  bool offers_h2_ = false;
  std::mutex mu_;
  std::unordered_map<std::string, SSL_SESSION*> sessions_;  // endpoint -> last session (one reference each)
};

}  // namespace onelayer
