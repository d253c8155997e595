// What onelayer writes into a gRPC call's attempt: grpc-timeout (time left)
// and grpc-previous-rpc-attempts on retries.
#include <doctest/doctest.h>

#include <string>

#include "core/http/http_headers.h"

using namespace onelayer;

namespace {

Config layer() {
  Config c;
  c.layer_id = "edge";
  c.propagate_baggage = false;
  return c;
}

RequestRewrite grpc_rewrite(const Config& c, InnerHops mode, bool claim, uint32_t attempt, int64_t left) {
  RequestRewrite rw{&c};
  rw.inner_hops = mode;
  rw.proto = "";
  rw.via = "";
  rw.claim_ownership = claim;
  rw.attempt = attempt;
  rw.time_left_ms = left;
  rw.grpc = true;
  return rw;
}

Headers rewritten(const Headers& in, const RequestRewrite& rw) {
  Headers out;
  rewrite_request_headers(in, rw, out);
  return out;
}

std::string value_of(const Headers& h, std::string_view name) {
  const Header* f = find_header(h, name);
  return f ? f->value : std::string("<absent>");
}

}  // namespace

TEST_CASE("GrpcAttemptCarriesTimeLeftAsGrpcTimeoutReplacingTheCallers") {
  const Config c = layer();
  const Headers in{{"content-type", "application/grpc"}, {"grpc-timeout", "600m"}};
  for (InnerHops mode : {InnerHops::forbid, InnerHops::strip, InnerHops::pass}) {
    const Headers out = rewritten(in, grpc_rewrite(c, mode, false, 1, 480));
    CHECK(count_headers(out, "grpc-timeout") == 1);
    CHECK(value_of(out, "grpc-timeout") == "480000u");
    CHECK(value_of(out, "x-request-timeout-ms") == "480");
  }
  // No time to write: the caller's passes as it came.
  CHECK(value_of(rewritten(in, grpc_rewrite(c, InnerHops::forbid, false, 1, -1)), "grpc-timeout") == "600m");
  // Not a gRPC call: grpc-timeout is not touched.
  RequestRewrite plain = grpc_rewrite(c, InnerHops::forbid, false, 1, 480);
  plain.grpc = false;
  CHECK(value_of(rewritten(in, plain), "grpc-timeout") == "600m");
}

TEST_CASE("OwnerWritesGrpcPreviousRpcAttemptsOnRetriesOnly") {
  const Config c = layer();
  const Headers in{{"grpc-previous-rpc-attempts", "5"}};
  const Headers first = rewritten(in, grpc_rewrite(c, InnerHops::forbid, true, 1, 100));
  CHECK(count_headers(first, "grpc-previous-rpc-attempts") == 0);
  const Headers third = rewritten(in, grpc_rewrite(c, InnerHops::forbid, true, 3, 100));
  CHECK(count_headers(third, "grpc-previous-rpc-attempts") == 1);
  CHECK(value_of(third, "grpc-previous-rpc-attempts") == "2");
  CHECK(value_of(third, "x-retry-attempt") == "3");
  // A layer that does not own retries passes the owner's count unchanged.
  const Headers inner = rewritten({{"grpc-previous-rpc-attempts", "1"}}, grpc_rewrite(c, InnerHops::forbid, false, 1, 100));
  CHECK(value_of(inner, "grpc-previous-rpc-attempts") == "1");
}

TEST_CASE("GrpcFieldsAreTheSameOnTheSerializedPath") {
  const Config c = layer();
  const Headers in{{"Host", "svc"}, {"grpc-timeout", "1S"}};
  const RequestRewrite rw = grpc_rewrite(c, InnerHops::forbid, true, 2, 250);
  std::string text;
  append_rewritten_request_headers(in, rw, text);
  std::string listed;
  append_serialized(rewritten(in, rw), listed);
  CHECK(text == listed);
  CHECK(text.find("grpc-timeout: 250000u\r\n") != std::string::npos);
  CHECK(text.find("grpc-previous-rpc-attempts: 1\r\n") != std::string::npos);
  CHECK(text.find("1S") == std::string::npos);
}
