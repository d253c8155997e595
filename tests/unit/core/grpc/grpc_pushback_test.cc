#include <doctest/doctest.h>

#include "core/grpc/grpc_pushback.h"
#include "core/http/retry_after.h"

using namespace onelayer;

TEST_CASE("GrpcPushbackNonNegativeIntegerIsAnExactWait") {
  CHECK(parse_grpc_pushback("300") == GrpcPushback{false, Millis{300}});
  CHECK(parse_grpc_pushback("0") == GrpcPushback{false, Millis{0}});
  CHECK(parse_grpc_pushback(" 42\t") == GrpcPushback{false, Millis{42}});
  CHECK(parse_grpc_pushback("99999999999999999999999") == GrpcPushback{false, kRetryAfterSaturation});
}

TEST_CASE("GrpcPushbackNegativeOrGarbageMeansDoNotRetry") {
  for (auto bad : {"-1", "-300", "", "  ", "1.5", "+3", "3ms", "abc", "1 2"}) {
    const GrpcPushback p = parse_grpc_pushback(bad);
    CHECK(p.stop);
    CHECK(p.wait == Millis{0});
  }
}
