// Certificates made in memory for the TLS unit tests (P-256): a CA, leaves
// it signs with the subjectAltNames asked for, written to PEM files when a
// test needs files.
#pragma once

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <string>

namespace onelayer::test {

struct TestCert {
  EVP_PKEY* key = nullptr;
  X509* x509 = nullptr;

  // `cn`: the subject CN; `san`: an OpenSSL subjectAltName value
  // ("URI:spiffe://a,DNS:b") or "" for none; `issuer`: the CA that signs
  // it, or nullptr for a self-signed CA; `days_left` < 0: expired.
  TestCert(const char* cn, const std::string& san, const TestCert* issuer, long days_left = 1) {
    key = EVP_EC_gen("P-256");
    x509 = X509_new();
    static long serial = 1;
    ASN1_INTEGER_set(X509_get_serialNumber(x509), ++serial);
    X509_gmtime_adj(X509_getm_notBefore(x509), days_left < 0 ? -3 * 86400 : -60);
    X509_gmtime_adj(X509_getm_notAfter(x509), days_left * 86400);
    X509_set_pubkey(x509, key);
    X509_NAME* name = X509_get_subject_name(x509);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
    X509_set_issuer_name(x509, issuer ? X509_get_subject_name(issuer->x509) : name);
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, issuer ? issuer->x509 : x509, x509, nullptr, nullptr, 0);
    auto add = [&](int nid, const char* value) {
      X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, nid, value);
      X509_add_ext(x509, ext, -1);
      X509_EXTENSION_free(ext);
    };
    if (!issuer) add(NID_basic_constraints, "critical,CA:TRUE");
    if (!san.empty()) add(NID_subject_alt_name, san.c_str());
    X509_sign(x509, issuer ? issuer->key : key, EVP_sha256());
  }
  ~TestCert() {
    X509_free(x509);
    EVP_PKEY_free(key);
  }
  TestCert(const TestCert&) = delete;
  TestCert& operator=(const TestCert&) = delete;

  void write(const std::string& cert_path, const std::string& key_path) const {
    std::FILE* f = std::fopen(cert_path.c_str(), "w");
    PEM_write_X509(f, x509);
    std::fclose(f);
    if (key_path.empty()) return;
    f = std::fopen(key_path.c_str(), "w");
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
  }
};

}  // namespace onelayer::test
