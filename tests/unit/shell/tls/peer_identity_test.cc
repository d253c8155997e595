// The caller identity a server channel reads from a verified client
// certificate: URI SAN first, then DNS SAN, then subject CN; nothing for a
// certificate that does not verify or a client that sent none.
#include "shell/tls/peer_identity.h"

#include <doctest/doctest.h>

#include <string>

#include "shell/tls/tls_channel.h"
#include "test_certs.h"

using namespace onelayer;
using test::TestCert;

namespace {

// A server that asks for a client certificate verified against `ca`, and a
// client presenting `client` (or none); both handshakes driven in memory.
struct MtlsPair {
  SSL_CTX* server_ctx = SSL_CTX_new(TLS_server_method());
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  MtlsPair(const TestCert& server, const TestCert& ca, const TestCert* client) {
    SSL_CTX_use_certificate(server_ctx, server.x509);
    SSL_CTX_use_PrivateKey(server_ctx, server.key);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(server_ctx), ca.x509);
    SSL_CTX_set_verify(server_ctx, SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_verify(client_ctx, SSL_VERIFY_NONE, nullptr);
    if (client) {
      SSL_CTX_use_certificate(client_ctx, client->x509);
      SSL_CTX_use_PrivateKey(client_ctx, client->key);
    }
  }
  ~MtlsPair() {
    SSL_CTX_free(server_ctx);
    SSL_CTX_free(client_ctx);
  }
  // The server's verdict: the identity, or "(failed)" when its handshake did not complete.
  std::string identity() {
    TlsChannel c(client_ctx, TlsChannel::Role::client), s(server_ctx, TlsChannel::Role::server);
    char buf[16384];
    c.handshake();
    for (int i = 0; i < 10; ++i) {
      while (size_t n = c.take_output(buf, sizeof buf)) s.feed(buf, n);
      if (s.handshake() == TlsChannel::Status::error) return "(failed)";
      while (size_t n = s.take_output(buf, sizeof buf)) c.feed(buf, n);
      c.handshake();
      if (s.handshake_done() && c.handshake_done()) break;
    }
    // TLS 1.3: the client's certificate is checked on the server's last step.
    while (size_t n = c.take_output(buf, sizeof buf)) s.feed(buf, n);
    if (s.handshake() != TlsChannel::Status::ok) return "(failed)";
    return verified_peer_identity(s.ssl());
  }
};

}  // namespace

TEST_CASE("PeerIdentityIsTheFirstUriSanThenTheFirstDnsSanThenTheCn") {
  TestCert ca("unit ca", "", nullptr);
  TestCert server("server.test", "DNS:server.test", &ca);
  TestCert spiffe("web-cn", "DNS:web.test,URI:spiffe://cluster/ns/web/sa/frontend,URI:spiffe://second", &ca);
  TestCert dns("billing-cn", "DNS:billing.test,DNS:second.test", &ca);
  TestCert cn_only("cn-only.test", "", &ca);
  TestCert email_only("mail-cn.test", "email:a@b.test", &ca);
  CHECK(MtlsPair(server, ca, &spiffe).identity() == "spiffe://cluster/ns/web/sa/frontend");
  CHECK(MtlsPair(server, ca, &dns).identity() == "billing.test");
  CHECK(MtlsPair(server, ca, &cn_only).identity() == "cn-only.test");
  CHECK(MtlsPair(server, ca, &email_only).identity() == "mail-cn.test");
}

TEST_CASE("PeerIdentityIsEmptyWithoutACertificateAndAnUnverifiedOneFailsTheHandshake") {
  TestCert ca("unit ca", "", nullptr);
  TestCert other_ca("other ca", "", nullptr);
  TestCert server("server.test", "DNS:server.test", &ca);
  TestCert stranger("stranger", "URI:spiffe://cluster/ns/web/sa/frontend", &other_ca);
  TestCert expired("expired", "URI:spiffe://cluster/ns/web/sa/frontend", &ca, -1);
  CHECK(MtlsPair(server, ca, nullptr).identity() == "");
  CHECK(MtlsPair(server, ca, &stranger).identity() == "(failed)");
  CHECK(MtlsPair(server, ca, &expired).identity() == "(failed)");
}

TEST_CASE("UsableIdentityIsVisibleAsciiUpTo1024Bytes") {
  CHECK(usable_identity("spiffe://cluster/ns/web/sa/frontend"));
  CHECK_FALSE(usable_identity(""));
  CHECK_FALSE(usable_identity("with space"));
  CHECK_FALSE(usable_identity("line\r\nx-injected: 1"));
  CHECK_FALSE(usable_identity(std::string("caf\xc3\xa9")));
  CHECK(usable_identity(std::string(1024, 'a')));
  CHECK_FALSE(usable_identity(std::string(1025, 'a')));
}
