#include "shell/tls/tls_channel.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <climits>

namespace onelayer {

TlsChannel::TlsChannel(SSL_CTX* ctx, Role role) {
  ssl_ = SSL_new(ctx);
  in_ = BIO_new(BIO_s_mem());
  out_ = BIO_new(BIO_s_mem());
  // An empty memory BIO says "retry" rather than EOF: the SSL then asks
  // for more input instead of failing.
  BIO_set_mem_eof_return(in_, -1);
  BIO_set_mem_eof_return(out_, -1);
  SSL_set_bio(ssl_, in_, out_);  // the SSL owns both BIOs from here
  SSL_set_app_data(ssl_, this);
  if (role == Role::client) {
    SSL_set_connect_state(ssl_);
  } else {
    SSL_set_accept_state(ssl_);
  }
}

TlsChannel::~TlsChannel() { SSL_free(ssl_); }

void TlsChannel::set_sni(const std::string& sni) {
  if (!sni.empty()) SSL_set_tlsext_host_name(ssl_, sni.c_str());
}

void TlsChannel::set_verify_name(const std::string& name) {
  if (name.empty()) return;
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
  // An IP literal is checked against the certificate's IP SANs, a name
  // against its DNS names (no partial wildcards such as f*.example.com).
  if (X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) != 1) {
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    SSL_set1_host(ssl_, name.c_str());
  }
}

void TlsChannel::set_session(SSL_SESSION* s) {
  if (s) SSL_set_session(ssl_, s);
}

void TlsChannel::feed(const char* data, size_t len) {
  while (len > 0) {
    int chunk = len > INT_MAX ? INT_MAX : static_cast<int>(len);
    int n = BIO_write(in_, data, chunk);
    if (n <= 0) return;  // a memory BIO only fails without memory
    data += n;
    len -= static_cast<size_t>(n);
  }
}

TlsChannel::Status TlsChannel::fail(int ret, const char* what) {
  int err = SSL_get_error(ssl_, ret);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return Status::want_more;
  if (err == SSL_ERROR_ZERO_RETURN) return Status::closed;
  if (!done_ && (SSL_get_verify_mode(ssl_) & SSL_VERIFY_PEER) != 0) {
    long v = SSL_get_verify_result(ssl_);
    verify_failed_ = v != X509_V_OK;
    if (verify_failed_) {
      error_ = std::string("certificate verify failed: ") + X509_verify_cert_error_string(v);
      ERR_clear_error();
      return Status::error;
    }
  }
  unsigned long e = ERR_get_error();
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    const char* reason = ERR_reason_error_string(e);
    error_ = std::string(what) + ": " + (reason ? reason : buf);
  } else if (err == SSL_ERROR_SYSCALL) {
    error_ = std::string(what) + ": the peer closed the connection";
  } else {
    error_ = std::string(what) + ": TLS error " + std::to_string(err);
  }
  ERR_clear_error();
  return Status::error;
}

// OpenSSL's error queue (one per thread) must be empty before an SSL call
// whose failure SSL_get_error reads. A handshake step clears it first (the
// set-up before it, set_verify_name's X509_VERIFY_PARAM_set1_ip_asc on a
// name, may leave an entry) and again once done; every failure clears it in
// fail(), and SSL_get_error answers "want more" only with an empty queue.
// So reads and writes on an established channel, the calls made for every
// request, need no clear of their own (it is a few hundred instructions
// each: tests/bench/profile.sh --tls).
TlsChannel::Status TlsChannel::handshake() {
  if (done_) return Status::ok;
  ERR_clear_error();
  int r = SSL_do_handshake(ssl_);
  if (r == 1) {
    done_ = true;
    ERR_clear_error();
    return Status::ok;
  }
  return fail(r, "handshake");
}

size_t TlsChannel::read(char* buf, size_t cap, Status* st) {
  size_t got = 0;
  int r = SSL_read_ex(ssl_, buf, cap, &got);
  if (r == 1) {
    *st = Status::ok;
    return got;
  }
  *st = fail(r, "read");
  return 0;
}

bool TlsChannel::write(const char* data, size_t len) {
  if (len == 0) return true;
  size_t done = 0;
  // Memory BIOs grow as needed, so a write is taken whole or fails.
  if (SSL_write_ex(ssl_, data, len, &done) == 1 && done == len) return true;
  fail(0, "write");
  return false;
}

size_t TlsChannel::pending_output() const { return BIO_ctrl_pending(out_); }

size_t TlsChannel::take_output(char* buf, size_t cap) {
  int chunk = cap > INT_MAX ? INT_MAX : static_cast<int>(cap);
  int n = BIO_read(out_, buf, chunk);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

void TlsChannel::shutdown() {
  ERR_clear_error();
  if (done_) SSL_shutdown(ssl_);
  ERR_clear_error();
}

std::string TlsChannel::alpn() const {
  const unsigned char* p = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(ssl_, &p, &len);
  return p ? std::string(reinterpret_cast<const char*>(p), len) : std::string();
}

}  // namespace onelayer
