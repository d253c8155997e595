// The gRPC parts of the retry block: gRPC status names in retry_on and
// retry.idempotent.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "config_test_util.h"

using namespace onelayer;
using onelayer::test::check_round_trip;
using onelayer::test::errors_of;
using onelayer::test::load_ok;
using onelayer::test::with_retry;

namespace {

const RetryPolicy& only_policy(const ConfigPtr& c) { return c->listeners[0].routes[0].retry; }

}  // namespace

TEST_CASE("DefaultRetryOnRetriesGrpcUnavailableAndRoutesAreNotIdempotent") {
  const RetryOn on;
  CHECK(on.grpc_statuses == std::vector<GrpcStatus>{GrpcStatus::unavailable});
  ConfigPtr c = load_ok(with_retry("          max_attempts: 3"));
  CHECK(only_policy(c).retry_on.has_grpc_status(GrpcStatus::unavailable));
  CHECK_FALSE(only_policy(c).retry_on.has_grpc_status(GrpcStatus::internal));
  CHECK_FALSE(only_policy(c).idempotent);
  const std::string yaml = config_to_yaml(*c);
  CHECK(yaml.find("retry_on: [connect-failure, reset, timeout, 429, 502, 503, 504, unavailable]") !=
        std::string::npos);
  CHECK(yaml.find("idempotent: false") != std::string::npos);
}

TEST_CASE("RetryOnTakesGrpcStatusNamesBesideHttpOnes") {
  ConfigPtr c = load_ok(with_retry(
      "          retry_on: [reset, 503, cancelled, deadline-exceeded, internal, resource-exhausted, unavailable, "
      "internal]\n          idempotent: true"));
  const RetryPolicy& p = only_policy(c);
  CHECK(p.retry_on.grpc_statuses ==
        std::vector<GrpcStatus>{GrpcStatus::cancelled, GrpcStatus::deadline_exceeded, GrpcStatus::internal,
                                GrpcStatus::resource_exhausted, GrpcStatus::unavailable});  // the repeat once
  CHECK(p.retry_on.statuses == std::vector<int>{503});
  CHECK(p.retry_on.reset);
  CHECK_FALSE(p.retry_on.connect_failure);
  CHECK(p.idempotent);
  check_round_trip(*c);
}

TEST_CASE("RetryOnListWithoutGrpcNamesRetriesNoGrpcStatus") {
  ConfigPtr c = load_ok(with_retry("          retry_on: [503]"));
  CHECK(only_policy(c).retry_on.grpc_statuses.empty());
  check_round_trip(*c);
}

TEST_CASE("OtherGrpcNamesAndWrongSpellingsAreErrors") {
  for (const char* word : {"UNAVAILABLE", "deadline_exceeded", "not-found", "ok", "aborted"}) {
    INFO(word);
    auto errors = errors_of(with_retry(std::string("          retry_on: [") + word + "]"));
    REQUIRE(errors.size() == 1);
    CHECK(errors[0].find("retry.retry_on[0]: must be connect-failure, reset, timeout, a status code (100-599) "
                         "or a gRPC status (cancelled, deadline-exceeded, internal, resource-exhausted, "
                         "unavailable)") != std::string::npos);
  }
}

TEST_CASE("RetryIdempotentMustBeABoolean") {
  auto errors = errors_of(with_retry("          idempotent: maybe"));
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].find("retry.idempotent: expected true or false") != std::string::npos);
  ConfigPtr c = load_ok(with_retry("          idempotent: true"));
  Config changed = *c;
  changed.listeners[0].routes[0].retry.idempotent = false;
  CHECK_FALSE(changed.same_settings(*c));
}
