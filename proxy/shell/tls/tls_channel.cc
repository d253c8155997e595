#include "shell/tls/tls_channel.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <cstring>

namespace onelayer {

// The BIO between a channel's SSL and its two strings: reads take from
// in_ (none there: "retry", so the SSL asks for more input rather than
// failing), writes append to out_ (always whole).
class TlsChannel::Bio {
 public:
  // nullptr only without memory (the SSL then fails its first step).
  static BIO* make(TlsChannel* ch) {
    const BIO_METHOD* m = method();
    BIO* b = m ? BIO_new(m) : nullptr;
    if (b) BIO_set_data(b, ch);
    return b;
  }

 private:
  static const BIO_METHOD* method() {
    // Once per process, after OpenSSL is loaded (the first channel).
    static BIO_METHOD* m = [] {
      BIO_METHOD* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "onelayer TLS channel");
      if (!made) return made;
      BIO_meth_set_read_ex(made, read);
      BIO_meth_set_write_ex(made, write);
      BIO_meth_set_ctrl(made, ctrl);
      BIO_meth_set_create(made, [](BIO* b) {
        BIO_set_init(b, 1);
        return 1;
      });
      return made;
    }();
    return m;
  }
  static TlsChannel* of(BIO* b) { return static_cast<TlsChannel*>(BIO_get_data(b)); }
  static int read(BIO* b, char* buf, size_t cap, size_t* got) {
    TlsChannel* ch = of(b);
    BIO_clear_retry_flags(b);
    size_t avail = ch->in_.size() - ch->in_at_;
    if (avail == 0) {
      BIO_set_retry_read(b);
      *got = 0;
      return 0;
    }
    size_t n = avail < cap ? avail : cap;
    std::memcpy(buf, ch->in_.data() + ch->in_at_, n);
    ch->in_at_ += n;
    if (ch->in_at_ == ch->in_.size()) release(ch->in_, ch->in_at_);
    *got = n;
    return 1;
  }
  static int write(BIO* b, const char* data, size_t len, size_t* done) {
    BIO_clear_retry_flags(b);
    of(b)->out_.append(data, len);
    *done = len;
    return 1;
  }
  static long ctrl(BIO* b, int cmd, long, void*) {
    TlsChannel* ch = of(b);
    switch (cmd) {
      case BIO_CTRL_FLUSH:
        return 1;  // out_ is where the bytes go
      case BIO_CTRL_PENDING:
        return static_cast<long>(ch->in_.size() - ch->in_at_);
      case BIO_CTRL_WPENDING:
        return static_cast<long>(ch->pending_output());
      default:
        return 0;  // no EOF, no kTLS, nothing else
    }
  }

 public:
  // A drained buffer: emptied, and given back when it grew past a record
  // or two (an idle connection keeps no large buffer; most keep none past
  // a request's size).
  static void release(std::string& buf, size_t& at) {
    at = 0;
    if (buf.capacity() > kKeptCapacity) {
      std::string().swap(buf);
    } else {
      buf.clear();
    }
  }
  static constexpr size_t kKeptCapacity = 16 * 1024;
};

TlsChannel::TlsChannel(SSL_CTX* ctx, Role role) {
  ssl_ = SSL_new(ctx);
  BIO* bio = Bio::make(this);
  SSL_set_bio(ssl_, bio, bio);  // the SSL owns the BIO from here (one reference for both)
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

void TlsChannel::feed(const char* data, size_t len) { in_.append(data, len); }

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
  // The channel's BIO takes every write whole, so a write is taken whole or fails.
  if (SSL_write_ex(ssl_, data, len, &done) == 1 && done == len) return true;
  fail(0, "write");
  return false;
}

size_t TlsChannel::take_output(char* buf, size_t cap) {
  size_t n = pending_output() < cap ? pending_output() : cap;
  std::memcpy(buf, out_.data() + out_at_, n);
  out_at_ += n;
  if (out_at_ == out_.size()) Bio::release(out_, out_at_);
  return n;
}

void TlsChannel::drop_output() { Bio::release(out_, out_at_); }

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
