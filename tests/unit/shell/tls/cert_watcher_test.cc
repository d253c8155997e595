// CertWatcher on a real loop and real files: a replaced certificate is
// loaded, a broken one is refused and the old one kept, and every handle
// is closed afterwards (uv_loop_close succeeds).
#include "shell/tls/cert_watcher.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/config/config.h"
#include "shell/tls/tls_channel.h"
#include "test_certs.h"

using namespace onelayer;
using test::TestCert;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/onelayer-cert-watcher-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string file(const char* name) const { return path + "/" + name; }
};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// Runs the loop until `done` or about two seconds have passed.
template <class Done>
void run_until(uv_loop_t* loop, Done done) {
  uv_timer_t guard;
  uv_timer_init(loop, &guard);
  uv_timer_start(&guard, [](uv_timer_t*) {}, 20, 20);
  for (int i = 0; i < 100 && !done(); ++i) uv_run(loop, UV_RUN_ONCE);
  uv_close(reinterpret_cast<uv_handle_t*>(&guard), nullptr);
  uv_run(loop, UV_RUN_NOWAIT);
}

// The CN of the certificate a server channel from `ctx` presents.
std::string served_cn(TlsServerContext& ctx) {
  std::unique_ptr<TlsChannel> ch = ctx.open();
  X509* cert = SSL_get_certificate(ch->ssl());
  char cn[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
  return cn;
}

}  // namespace

TEST_CASE("FilesFingerprintFollowsContentsAndTellsMissingFromEmpty") {
  TempDir d;
  write_text(d.file("a"), "one");
  write_text(d.file("b"), "two");
  const uint64_t first = files_fingerprint({d.file("a"), d.file("b")});
  CHECK(first == files_fingerprint({d.file("a"), d.file("b")}));
  CHECK(first != files_fingerprint({d.file("b"), d.file("a")}));
  write_text(d.file("b"), "twO");
  CHECK(first != files_fingerprint({d.file("a"), d.file("b")}));
  write_text(d.file("e"), "");
  CHECK(files_fingerprint({d.file("e")}) != files_fingerprint({d.file("missing")}));
}

TEST_CASE("CertWatcherLoadsAReplacedCertificateKeepsTheOldOnABrokenOneAndClosesEveryHandle") {
  TempDir d;
  TestCert ca("unit ca", "", nullptr);
  TestCert first("first.test", "DNS:server.test", &ca);
  TestCert second("second.test", "DNS:server.test", &ca);
  first.write(d.file("server.pem"), d.file("server.key"));
  Config cfg;
  Listener& l = cfg.listeners.emplace_back();
  l.name = "in";
  l.tls = ListenerTls{d.file("server.pem"), d.file("server.key"), "", false};
  TlsContexts tls;
  REQUIRE(build_tls_contexts(cfg, tls).empty());
  REQUIRE(served_cn(*tls.listeners[0]) == "first.test");

  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    CertWatcher w(&loop);
    w.watch(cfg, tls);
    // Key first, then the certificate, each renamed into place.
    second.write(d.file(".k"), "");
    second.write(d.file(".c"), d.file(".k"));
    std::rename(d.file(".k").c_str(), d.file("server.key").c_str());
    std::rename(d.file(".c").c_str(), d.file("server.pem").c_str());
    run_until(&loop, [&] { return w.rotations() >= 1 && served_cn(*tls.listeners[0]) == "second.test"; });
    CHECK(served_cn(*tls.listeners[0]) == "second.test");
    // A truncated certificate: refused, the second one stays.
    write_text(d.file(".c"), "-----BEGIN CERTIFICATE-----\nMIIB\n");
    std::rename(d.file(".c").c_str(), d.file("server.pem").c_str());
    run_until(&loop, [&] { return w.refusals() >= 1; });
    CHECK(w.refusals() == 1);
    CHECK(served_cn(*tls.listeners[0]) == "second.test");
    // A change elsewhere in the directory reloads nothing.
    const uint64_t rotations = w.rotations();
    write_text(d.file("unrelated.txt"), "x");
    run_until(&loop, [] { return false; });
    CHECK(w.rotations() == rotations);
    CHECK(w.refusals() == 1);
    w.close();
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&loop) == 0);
}
