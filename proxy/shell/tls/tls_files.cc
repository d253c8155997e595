#include "shell/tls/tls_files.h"

#include <openssl/err.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace onelayer {

std::string openssl_reason(const char* fallback) {
  unsigned long e = ERR_peek_last_error();
  const char* r = e ? ERR_reason_error_string(e) : nullptr;
  std::string out = r ? r : fallback;
  ERR_clear_error();
  return out;
}

bool readable(const std::string& path, std::string* why) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    *why = std::strerror(errno);
    return false;
  }
  std::fclose(f);
  return true;
}

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

}  // namespace onelayer
