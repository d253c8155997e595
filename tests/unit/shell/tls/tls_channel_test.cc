// TlsChannel with two channels wired to each other in memory: a server with
// a certificate made here (P-256, self-signed) and a client that trusts it
// or not, checks a name or not. No socket, no loop.
#include "shell/tls/tls_channel.h"
#include "shell/tls/tls_client_context.h"

#include <doctest/doctest.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <string>

using namespace onelayer;

namespace {

struct Cert {
  EVP_PKEY* key = nullptr;
  X509* x509 = nullptr;
  explicit Cert(const char* dns) {
    key = EVP_EC_gen("P-256");
    x509 = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(x509), 1);
    X509_gmtime_adj(X509_getm_notBefore(x509), -60);
    X509_gmtime_adj(X509_getm_notAfter(x509), 3600);
    X509_set_pubkey(x509, key);
    X509_NAME* name = X509_get_subject_name(x509);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(dns), -1, -1, 0);
    X509_set_issuer_name(x509, name);
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x509, x509, nullptr, nullptr, 0);
    std::string san = std::string("DNS:") + dns;
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, NID_subject_alt_name, san.c_str());
    X509_add_ext(x509, ext, -1);
    X509_EXTENSION_free(ext);
    X509_sign(x509, key, EVP_sha256());
  }
  ~Cert() {
    X509_free(x509);
    EVP_PKEY_free(key);
  }
};

struct Pair {
  SSL_CTX* server_ctx = SSL_CTX_new(TLS_server_method());
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  Pair(const Cert& served, const Cert* trusted) {
    SSL_CTX_use_certificate(server_ctx, served.x509);
    SSL_CTX_use_PrivateKey(server_ctx, served.key);
    SSL_CTX_set_verify(client_ctx, SSL_VERIFY_PEER, nullptr);
    if (trusted) X509_STORE_add_cert(SSL_CTX_get_cert_store(client_ctx), trusted->x509);
    static const unsigned char alpn[] = "\x08http/1.1";
    SSL_CTX_set_alpn_protos(client_ctx, alpn, sizeof alpn - 1);
    SSL_CTX_set_alpn_select_cb(
        server_ctx,
        [](SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned inlen, void*) {
          static const unsigned char ours[] = "\x08http/1.1";
          unsigned char* sel = nullptr;
          if (SSL_select_next_proto(&sel, outlen, ours, sizeof ours - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
            return SSL_TLSEXT_ERR_NOACK;
          *out = sel;
          return SSL_TLSEXT_ERR_OK;
        },
        nullptr);
  }
  ~Pair() {
    SSL_CTX_free(server_ctx);
    SSL_CTX_free(client_ctx);
  }
};

// Moves pending ciphertext from one channel to the other; true if any moved.
bool shuttle(TlsChannel& from, TlsChannel& to) {
  char buf[16384];
  bool moved = false;
  while (size_t n = from.take_output(buf, sizeof buf)) {
    to.feed(buf, n);
    moved = true;
  }
  return moved;
}

// Runs both handshakes until neither has anything to say; the statuses.
std::pair<TlsChannel::Status, TlsChannel::Status> handshake(TlsChannel& c, TlsChannel& s) {
  TlsChannel::Status cs = c.handshake(), ss = TlsChannel::Status::want_more;
  for (int i = 0; i < 10; ++i) {
    bool moved = shuttle(c, s);
    if (!s.handshake_done() && ss != TlsChannel::Status::error) ss = s.handshake();
    moved |= shuttle(s, c);
    if (!c.handshake_done() && cs != TlsChannel::Status::error) cs = c.handshake();
    if (!moved) break;
  }
  return {cs, ss};
}

std::string read_all(TlsChannel& ch, TlsChannel::Status* last) {
  std::string out;
  char buf[4096];
  while (true) {
    size_t n = ch.read(buf, sizeof buf, last);
    if (n == 0) return out;
    out.append(buf, n);
  }
}

}  // namespace

TEST_CASE("tls channel: a trusted server with the right name completes, ALPN http/1.1, bytes both ways") {
  Cert cert("unit.test");
  Pair p(cert, &cert);
  TlsChannel client(p.client_ctx, TlsChannel::Role::client), server(p.server_ctx, TlsChannel::Role::server);
  client.set_sni("unit.test");
  client.set_verify_name("unit.test");
  auto [cs, ss] = handshake(client, server);
  REQUIRE(cs == TlsChannel::Status::ok);
  REQUIRE(ss == TlsChannel::Status::ok);
  CHECK(client.alpn() == "http/1.1");
  CHECK(server.alpn() == "http/1.1");
  CHECK_FALSE(client.session_reused());
  CHECK(std::string(SSL_get_servername(server.ssl(), TLSEXT_NAMETYPE_host_name)) == "unit.test");

  std::string big(300 * 1024, 'q');
  REQUIRE(client.write(big.data(), big.size()));
  CHECK(client.pending_output() > big.size());  // records add framing
  shuttle(client, server);
  TlsChannel::Status st;
  CHECK(read_all(server, &st) == big);
  CHECK(st == TlsChannel::Status::want_more);
  REQUIRE(server.write("pong", 4));
  shuttle(server, client);
  CHECK(read_all(client, &st) == "pong");

  server.shutdown();
  shuttle(server, client);
  read_all(client, &st);
  CHECK(st == TlsChannel::Status::closed);
}

TEST_CASE("tls channel: a name the certificate does not carry fails verification, as a verdict") {
  Cert cert("unit.test");
  Pair p(cert, &cert);
  TlsChannel client(p.client_ctx, TlsChannel::Role::client), server(p.server_ctx, TlsChannel::Role::server);
  client.set_verify_name("other.test");
  auto [cs, ss] = handshake(client, server);
  CHECK(cs == TlsChannel::Status::error);
  CHECK(client.verify_failed());
  CHECK(client.error_text().find("hostname mismatch") != std::string::npos);
  CHECK_FALSE(client.handshake_done());
}

TEST_CASE("tls channel: an untrusted certificate fails verification, an IP name is checked against IP SANs") {
  Cert cert("unit.test"), other("unit.test");
  Pair p(cert, &other);
  TlsChannel client(p.client_ctx, TlsChannel::Role::client), server(p.server_ctx, TlsChannel::Role::server);
  auto [cs, ss] = handshake(client, server);
  CHECK(cs == TlsChannel::Status::error);
  CHECK(client.verify_failed());
  CHECK(client.error_text().find("certificate verify failed") == 0);

  Pair q(cert, &cert);
  TlsChannel c2(q.client_ctx, TlsChannel::Role::client), s2(q.server_ctx, TlsChannel::Role::server);
  c2.set_verify_name("127.0.0.1");  // the certificate has no IP SAN
  CHECK(handshake(c2, s2).first == TlsChannel::Status::error);
  CHECK(c2.verify_failed());
}

TEST_CASE("tls channel: garbage from the peer is an error with a reason, never a verification verdict") {
  Cert cert("unit.test");
  Pair p(cert, &cert);
  TlsChannel client(p.client_ctx, TlsChannel::Role::client);
  client.set_verify_name("unit.test");
  CHECK(client.handshake() == TlsChannel::Status::want_more);
  const char junk[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
  client.feed(junk, sizeof junk - 1);
  CHECK(client.handshake() == TlsChannel::Status::error);
  CHECK_FALSE(client.verify_failed());
  CHECK(client.error_text().find("handshake: ") == 0);
  CHECK(client.error_text().size() > std::string("handshake: ").size());
  // A server fed junk fails too, and the channel stays usable for asking.
  TlsChannel server(p.server_ctx, TlsChannel::Role::server);
  server.feed(junk, sizeof junk - 1);
  CHECK(server.handshake() == TlsChannel::Status::error);
  TlsChannel::Status st;
  char buf[16];
  CHECK(server.read(buf, sizeof buf, &st) == 0);
  CHECK(st == TlsChannel::Status::error);
}

// The channel's own BIO: the SSL reads records across feeds of any size
// (a byte at a time here) and the ciphertext can be sent in place.
TEST_CASE("tls channel: ciphertext fed a byte at a time completes the handshake, output() hands it out in place") {
  Cert cert("unit.test");
  Pair p(cert, &cert);
  TlsChannel client(p.client_ctx, TlsChannel::Role::client), server(p.server_ctx, TlsChannel::Role::server);
  client.set_verify_name("unit.test");
  TlsChannel::Status cs = client.handshake(), ss = TlsChannel::Status::want_more;
  for (int round = 0; round < 10 && !(client.handshake_done() && server.handshake_done()); ++round) {
    std::string hello(client.output());
    CHECK(hello.size() == client.pending_output());
    client.drop_output();
    CHECK(client.pending_output() == 0);
    for (char byte : hello) {
      server.feed(&byte, 1);
      if (!server.handshake_done()) ss = server.handshake();
    }
    std::string back(server.output());
    server.drop_output();
    for (char byte : back) {
      client.feed(&byte, 1);
      if (!client.handshake_done()) cs = client.handshake();
    }
  }
  REQUIRE(cs == TlsChannel::Status::ok);
  REQUIRE(ss == TlsChannel::Status::ok);
  REQUIRE(client.write("ping", 4));
  std::string sent(client.output());
  client.drop_output();
  for (char byte : sent) server.feed(&byte, 1);
  TlsChannel::Status st;
  CHECK(read_all(server, &st) == "ping");
  CHECK(st == TlsChannel::Status::want_more);
}

TEST_CASE("tls channel: a session from one connection resumes the next") {
  Cert cert("unit.test");
  Pair p(cert, &cert);
  SSL_SESSION* saved = nullptr;
  {
    TlsChannel client(p.client_ctx, TlsChannel::Role::client), server(p.server_ctx, TlsChannel::Role::server);
    client.set_verify_name("unit.test");
    REQUIRE(handshake(client, server).first == TlsChannel::Status::ok);
    // TLS 1.3 tickets come after the handshake: the client reads them.
    shuttle(server, client);
    TlsChannel::Status st;
    read_all(client, &st);
    // A copy: the connection's own session is marked not resumable when it
    // is freed without close_notify (TlsClientContext keeps copies too).
    saved = SSL_SESSION_dup(SSL_get0_session(client.ssl()));
    REQUIRE(saved);
    CHECK(SSL_SESSION_is_resumable(saved) == 1);
  }
  TlsChannel client(p.client_ctx, TlsChannel::Role::client), server(p.server_ctx, TlsChannel::Role::server);
  client.set_verify_name("unit.test");
  client.set_session(saved);
  SSL_SESSION_free(saved);
  REQUIRE(handshake(client, server).first == TlsChannel::Status::ok);
  CHECK(client.session_reused());
  CHECK(server.session_reused());
}

namespace {

// A server that picks h2 when the client offers it, else http/1.1.
int prefer_h2(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned inlen,
              void*) {
  static const unsigned char ours[] = "\x02h2\x08http/1.1";
  unsigned char* sel = nullptr;
  if (SSL_select_next_proto(&sel, outlen, ours, sizeof ours - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK;
  *out = sel;
  return SSL_TLSEXT_ERR_OK;
}

// What an upstream context for `protocol` gets from that server.
std::string chosen_alpn(UpstreamProtocol protocol, bool http1_only) {
  Cert cert("unit.test");
  Pair p(cert, &cert);
  SSL_CTX_set_alpn_select_cb(p.server_ctx, prefer_h2, nullptr);
  UpstreamTls settings;
  settings.verify = false;
  std::string error, key;
  std::shared_ptr<TlsClientContext> ctx = TlsClientContext::create(settings, protocol, &error, &key);
  REQUIRE(ctx);
  std::unique_ptr<TlsChannel> client = ctx->open("unit.test", "unit.test:443", http1_only);
  TlsChannel server(p.server_ctx, TlsChannel::Role::server);
  auto [cs, ss] = handshake(*client, server);
  REQUIRE(cs == TlsChannel::Status::ok);
  REQUIRE(ss == TlsChannel::Status::ok);
  return client->alpn();
}

}  // namespace

// tests/bench/tls.sh's handshake row: every connection to the endpoint
// resumes its kept session, and the next ones open before the server's
// new ticket has come.
TEST_CASE("tls context: a connection that resumed leaves the endpoint's kept session resumable for the next") {
  Cert cert("unit.test");
  Pair p(cert, &cert);
  UpstreamTls settings;
  settings.verify = false;
  std::string error, key;
  std::shared_ptr<TlsClientContext> ctx = TlsClientContext::create(settings, UpstreamProtocol::http1, &error, &key);
  REQUIRE(ctx);
  {
    std::unique_ptr<TlsChannel> client = ctx->open("unit.test", "unit.test:443");
    TlsChannel server(p.server_ctx, TlsChannel::Role::server);
    REQUIRE(handshake(*client, server).first == TlsChannel::Status::ok);
    shuttle(server, *client);  // the tickets: the context keeps the last
    TlsChannel::Status st;
    read_all(*client, &st);
  }
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    std::unique_ptr<TlsChannel> client = ctx->open("unit.test", "unit.test:443");
    TlsChannel server(p.server_ctx, TlsChannel::Role::server);
    REQUIRE(handshake(*client, server).first == TlsChannel::Status::ok);
    CHECK(client->session_reused());  // its new ticket is never read
  }
}

TEST_CASE("tls context: auto offers h2 and http/1.1 (the server chooses), http1 and an Upgrade's connection http/1.1") {
  CHECK(chosen_alpn(UpstreamProtocol::auto_, false) == "h2");
  CHECK(chosen_alpn(UpstreamProtocol::auto_, true) == "http/1.1");
  CHECK(chosen_alpn(UpstreamProtocol::http1, false) == "http/1.1");
  CHECK(chosen_alpn(UpstreamProtocol::h2, false) == "h2");
}
