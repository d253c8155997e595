#include <doctest/doctest.h>

#include "core/grpc/grpc_protocol.h"

using namespace onelayer;

TEST_CASE("GrpcContentTypesAreApplicationGrpcWithOptionalFormat") {
  for (auto ct : {"application/grpc", "application/grpc+proto", "application/grpc+json", "Application/GRPC",
                  " application/grpc ", "application/grpc; charset=utf-8", "application/grpc ;x=y"})
    CHECK(is_grpc_content_type(ct));
  for (auto ct : {"", "application/grpc-web", "application/grpc-web+proto", "application/grpcx", "application/json",
                  "text/grpc", "application/grp", "application/grpc foo"})
    CHECK_FALSE(is_grpc_content_type(ct));
}

TEST_CASE("GrpcRequestIsReadFromTheContentTypeField") {
  CHECK(is_grpc_request({{"Host", "a"}, {"Content-Type", "application/grpc"}}));
  CHECK_FALSE(is_grpc_request({{"Host", "a"}}));
  CHECK_FALSE(is_grpc_request({{"content-type", "application/json"}, {"x", "application/grpc"}}));
}
