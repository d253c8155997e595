// One connection's TLS, in memory: the connection feeds it the ciphertext
// it read from its socket and sends the ciphertext it hands out; plaintext
// goes in and comes out here. No socket, no loop: the event loop stays the
// connection's (the shape of Node's TLSWrap and h2o's socket layer), and
// two channels can be wired to each other in memory in tests.
//
// The SSL reads and writes the ciphertext through a BIO of the channel's
// own (TlsChannel::Bio) that keeps it in two strings, rather than through
// OpenSSL's memory BIOs, whose buffers are zeroed as they grow and
// cleansed when freed (ciphertext is no secret): about a thousand
// instructions a keep-alive request and tens of thousands a handshake
// (tests/bench/profile.sh --tls, --tls-handshake).
#pragma once

#include <openssl/ssl.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace onelayer {

class TlsChannel {
 public:
  enum class Role { client, server };
  // What a step of the channel came to.
  enum class Status {
    ok,          // done (the handshake is complete, or the data was taken)
    want_more,   // needs more ciphertext from the peer
    closed,      // the peer sent close_notify
    error,       // the connection cannot go on; error_text() says why
  };

  TlsChannel(SSL_CTX* ctx, Role role);
  ~TlsChannel();
  TlsChannel(const TlsChannel&) = delete;
  TlsChannel& operator=(const TlsChannel&) = delete;

  // Client settings, before the first handshake step. `sni` empty: none
  // sent. `verify_name`: the name (or IP address) the peer's certificate
  // must carry; empty with verification on means any name.
  void set_sni(const std::string& sni);
  void set_verify_name(const std::string& name);
  void set_session(SSL_SESSION* s);  // resumption; the channel takes its own reference
  // Where a new session for resumption is filed (TlsClientContext).
  void set_session_key(std::string key) { session_key_ = std::move(key); }
  const std::string& session_key() const { return session_key_; }
  static TlsChannel* of(const SSL* ssl) { return static_cast<TlsChannel*>(SSL_get_app_data(ssl)); }

  // Ciphertext from the peer.
  void feed(const char* data, size_t len);
  // Drives the handshake as far as the fed bytes allow.
  Status handshake();
  bool handshake_done() const { return done_; }
  // Decrypts into buf (at most cap bytes): >0 bytes, or 0 with *st telling
  // want_more, closed or error.
  size_t read(char* buf, size_t cap, Status* st);
  // Plaintext to send; false on error (error_text()).
  bool write(const char* data, size_t len);
  // Ciphertext waiting to be sent.
  size_t pending_output() const { return out_.size() - out_at_; }
  // Moves up to cap bytes of pending ciphertext into buf; returns the count.
  size_t take_output(char* buf, size_t cap);
  // The pending ciphertext in place, for a sender that copies what it
  // cannot send at once; then drop_output() forgets it all.
  std::string_view output() const { return std::string_view(out_).substr(out_at_); }
  void drop_output();
  // Sends close_notify (its ciphertext is then pending).
  void shutdown();

  // After a failed handshake: was it the peer's certificate that did not
  // verify (a verdict, not a network failure)?
  bool verify_failed() const { return verify_failed_; }
  const std::string& error_text() const { return error_; }
  std::string alpn() const;        // the protocol the peer chose; "" none
  bool session_reused() const { return SSL_session_reused(ssl_) == 1; }
  // The client's verified identity on a server channel (shell/tls/
  // peer_identity.h), set by its connection when the handshake ends.
  void set_peer_identity(std::string id) { peer_identity_ = std::move(id); }
  const std::string& peer_identity() const { return peer_identity_; }
  SSL* ssl() { return ssl_; }

 private:
  class Bio;  // the SSL's BIO onto in_ and out_ (tls_channel.cc)
  Status fail(int ret, const char* what);

  SSL* ssl_ = nullptr;
  std::string in_;    // ciphertext from the peer, the SSL reads it from in_at_
  size_t in_at_ = 0;
  std::string out_;   // ciphertext for the peer, the SSL writes it; sent from out_at_
  size_t out_at_ = 0;
  bool done_ = false;
  bool verify_failed_ = false;
  std::string error_;
  std::string session_key_;
  std::string peer_identity_;
};

}  // namespace onelayer
