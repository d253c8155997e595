// The keys of mutual TLS on listeners, caller patterns and the admin guard:
// values as written, the errors of bad ones, and the YAML round trip.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "../config_test_util.h"
#include "core/config/config_loader.h"

using namespace onelayer;

namespace {

std::string listener(std::string_view tls, std::string_view extra, std::string_view match = "",
                     std::string_view top = "") {
  std::string y(top);
  y += "listeners:\n  - name: in\n    listen: 127.0.0.1:0\n";
  y += tls;
  y += extra;
  y += "    routes:\n      - name: r\n        upstream: up\n";
  y += match;
  y += "upstreams:\n  - name: up\n    endpoints: [127.0.0.1:8080]\n";
  return y;
}

const char* kMtls = "    tls: { cert_file: /s.pem, key_file: /s.key, client_ca_file: /ca.pem }\n";

bool any_contains(const std::vector<std::string>& errors, std::string_view what) {
  for (const std::string& e : errors) {
    if (e.find(what) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("ConfigCallersDefaultsAreNoClientCaAnyCallerNoHeaderAndAnOpenAdmin") {
  ConfigPtr c = test::load_ok(listener("    tls: { cert_file: /s.pem, key_file: /s.key }\n", ""));
  const Listener& l = c->listeners[0];
  REQUIRE(l.tls);
  CHECK(l.tls->client_ca_file.empty());
  CHECK_FALSE(l.tls->require_client_cert);
  CHECK(l.allowed_callers.empty());
  CHECK(l.caller_header.empty());
  CHECK(l.routes[0].match.callers.empty());
  CHECK(c->admin_token_file.empty());
  CHECK_FALSE(c->admin_allow_remote_mutations);
}

TEST_CASE("ConfigCallersEveryKeyAsWrittenSurvivesTheRoundTrip") {
  ConfigPtr c = test::load_ok(listener(
      "    tls: { cert_file: /s.pem, key_file: /s.key, client_ca_file: /ca.pem, require_client_cert: true }\n",
      "    allowed_callers: [\"spiffe://cluster/ns/*\", billing.test, \"*\"]\n    caller_header: X-OneLayer-Caller\n",
      "        match: { methods: [POST], callers: [\"spiffe://cluster/ns/web/sa/frontend\"] }\n",
      "admin: { listen: 127.0.0.1:0, token_file: /run/token, allow_remote_mutations: true }\n"));
  const Listener& l = c->listeners[0];
  CHECK(l.tls->client_ca_file == "/ca.pem");
  CHECK(l.tls->require_client_cert);
  CHECK(l.allowed_callers == std::vector<std::string>{"spiffe://cluster/ns/*", "billing.test", "*"});
  CHECK(l.caller_header == "x-onelayer-caller");
  CHECK(l.routes[0].match.callers == std::vector<std::string>{"spiffe://cluster/ns/web/sa/frontend"});
  CHECK(c->admin_token_file == "/run/token");
  CHECK(c->admin_allow_remote_mutations);
  test::check_round_trip(*c);
}

TEST_CASE("ConfigCallersNeedAClientCaFile") {
  std::vector<std::string> e = test::errors_of(listener(
      "    tls: { cert_file: /s.pem, key_file: /s.key, require_client_cert: true }\n",
      "    allowed_callers: [a.test]\n    caller_header: x-caller\n", "        match: { callers: [a.test] }\n"));
  CHECK(any_contains(e, "require_client_cert needs client_ca_file"));
  CHECK(any_contains(e, "allowed_callers needs tls.client_ca_file"));
  CHECK(any_contains(e, "caller_header needs tls.client_ca_file"));
  CHECK(any_contains(e, "route \"r\": match.callers needs tls.client_ca_file"));
  // Without any tls block at all, too.
  e = test::errors_of(listener("", "    allowed_callers: [a.test]\n"));
  CHECK(any_contains(e, "allowed_callers needs tls.client_ca_file"));
}

TEST_CASE("ConfigCallersRefuseEmptyPatternsAndInnerStars") {
  std::vector<std::string> e = test::errors_of(listener(kMtls, "    allowed_callers: [\"*.test\"]\n"));
  CHECK(any_contains(e, "allowed_callers[0]: '*' may only end a caller pattern"));
  e = test::errors_of(listener(kMtls, "", "        match: { callers: [\"\"] }\n"));
  CHECK(any_contains(e, "a caller pattern is empty"));
  e = test::errors_of(listener(kMtls, "    allowed_callers: []\n"));
  CHECK_FALSE(e.empty());
  e = test::errors_of(listener(kMtls, "    caller_header: \"bad header\"\n"));
  CHECK(any_contains(e, "caller_header"));
}

TEST_CASE("ConfigCallersAdminKeysAreCheckedAsFileNameAndBool") {
  std::vector<std::string> e =
      test::errors_of(listener("", "", "", "admin: { token_file: \"\", allow_remote_mutations: maybe }\n"));
  CHECK(any_contains(e, "admin.token_file"));
  CHECK(any_contains(e, "admin.allow_remote_mutations"));
}

TEST_CASE("ConfigCallersHeaderCannotBeOneThatFramesOrRoutesTheMessage") {
  for (const char* name : {"Content-Length", "host", "transfer-encoding", "x-retry-owner", "via"}) {
    std::vector<std::string> e =
        test::errors_of(listener(kMtls, std::string("    caller_header: ") + name + "\n"));
    CHECK_MESSAGE(any_contains(e, "is a header HTTP or onelayer itself uses"), name);
  }
}
