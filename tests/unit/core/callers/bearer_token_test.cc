#include <doctest/doctest.h>

#include <string>

#include "core/callers/bearer_token.h"

using namespace onelayer;

TEST_CASE("constant_time_equal is plain equality of bytes and length") {
  CHECK(constant_time_equal("", ""));
  CHECK(constant_time_equal("s3cret", "s3cret"));
  CHECK_FALSE(constant_time_equal("s3cret", "s3creT"));
  CHECK_FALSE(constant_time_equal("s3cret", "s3cre"));
  CHECK_FALSE(constant_time_equal("s3cre", "s3cret"));
  CHECK_FALSE(constant_time_equal("", "x"));
  // A prefix padded with NUL bytes is still not equal (length counts).
  CHECK_FALSE(constant_time_equal(std::string("ab\0", 3), "ab"));
}

TEST_CASE("BearerTokenMatchesTheSchemeInAnyCaseWithBlanksAround") {
  CHECK(bearer_token_matches("Bearer s3cret", "s3cret"));
  CHECK(bearer_token_matches("bearer s3cret", "s3cret"));
  CHECK(bearer_token_matches("BEARER   s3cret  ", "s3cret"));
  CHECK(bearer_token_matches(" Bearer\ts3cret", "s3cret"));
}

TEST_CASE("BearerTokenRefusesOtherSchemesWrongTokensAndAnEmptyToken") {
  CHECK_FALSE(bearer_token_matches("Basic s3cret", "s3cret"));
  CHECK_FALSE(bearer_token_matches("Bearers3cret", "s3cret"));
  CHECK_FALSE(bearer_token_matches("Bearer", "s3cret"));
  CHECK_FALSE(bearer_token_matches("Bearer ", "s3cret"));
  CHECK_FALSE(bearer_token_matches("", "s3cret"));
  CHECK_FALSE(bearer_token_matches("s3cret", "s3cret"));
  CHECK_FALSE(bearer_token_matches("Bearer s3cre", "s3cret"));
  CHECK_FALSE(bearer_token_matches("Bearer s3cret2", "s3cret"));
  CHECK_FALSE(bearer_token_matches("Bearer s3 cret", "s3cret"));
  // No token configured never matches, not even an empty bearer.
  CHECK_FALSE(bearer_token_matches("Bearer ", ""));
  CHECK_FALSE(bearer_token_matches("", ""));
}
