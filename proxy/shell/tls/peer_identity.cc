#include "shell/tls/peer_identity.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

namespace onelayer {

bool usable_identity(const std::string& name) {
  if (name.empty() || name.size() > 1024) return false;
  for (char c : name) {
    if (c <= ' ' || c >= 0x7f) return false;
  }
  return true;
}

namespace {

std::string text_of(const ASN1_STRING* s) {
  if (s == nullptr) return {};
  const unsigned char* data = ASN1_STRING_get0_data(s);
  int len = ASN1_STRING_length(s);
  if (data == nullptr || len <= 0) return {};
  return std::string(reinterpret_cast<const char*>(data), static_cast<size_t>(len));
}

// The first subjectAltName of `type` (GEN_URI, GEN_DNS), or "".
std::string first_san(X509* cert, int type) {
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) {
    ERR_clear_error();  // a malformed extension leaves an entry: the channel's reads need an empty queue
    return {};
  }
  std::string out;
  const int n = sk_GENERAL_NAME_num(names);
  for (int i = 0; i < n; ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names, i);
    if (g->type != type) continue;
    // URI and DNS names are both IA5Strings.
    out = text_of(type == GEN_URI ? g->d.uniformResourceIdentifier : g->d.dNSName);
    break;
  }
  GENERAL_NAMES_free(names);
  return out;
}

std::string subject_cn(X509* cert) {
  X509_NAME* subject = X509_get_subject_name(cert);
  if (subject == nullptr) return {};
  int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (at < 0) return {};
  return text_of(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at)));
}

}  // namespace

std::string verified_peer_identity(SSL* ssl) {
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) return {};
  // Each in turn only when present: a certificate whose first URI SAN is
  // unusable has no identity rather than a weaker one.
  std::string id = first_san(cert, GEN_URI);
  if (id.empty()) id = first_san(cert, GEN_DNS);
  if (id.empty()) id = subject_cn(cert);
  return usable_identity(id) ? id : std::string();
}

}  // namespace onelayer
