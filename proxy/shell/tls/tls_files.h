// What TlsClientContext and TlsServerContext share to build an SSL_CTX from
// a config's files and to load them again (certificate rotation): free
// functions, internal to shell/tls. Errors come back as text for a config
// error that names the offending key.
#pragma once

#include <openssl/ssl.h>

#include <mutex>
#include <string>

namespace onelayer {

// The last OpenSSL reason, or `fallback`; clears the error queue.
std::string openssl_reason(const char* fallback);

// Whether `path` can be opened for reading; else *why says why.
bool readable(const std::string& path, std::string* why);

// Loads a certificate chain and its key into ctx; false with *error and
// *key (the offending key's name) set.
bool load_pair(SSL_CTX* ctx, const std::string& cert, const std::string& key_file, std::string* error,
               std::string* key);

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

}  // namespace onelayer
