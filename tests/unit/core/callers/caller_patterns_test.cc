#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/callers/caller_patterns.h"

using namespace onelayer;

TEST_CASE("ExactPatternMatchesOnlyThatIdentity") {
  const std::string web = "spiffe://cluster/ns/web/sa/frontend";
  CHECK(caller_pattern_matches(web, web));
  CHECK_FALSE(caller_pattern_matches(web, web + "x"));
  CHECK_FALSE(caller_pattern_matches(web, "spiffe://cluster/ns/web/sa/frontenD"));
  CHECK_FALSE(caller_pattern_matches(web, "spiffe://cluster/ns/web/sa"));
}

TEST_CASE("StarSuffixPatternMatchesEveryIdentityWithThatPrefix") {
  CHECK(caller_pattern_matches("spiffe://cluster/ns/*", "spiffe://cluster/ns/web/sa/frontend"));
  CHECK(caller_pattern_matches("spiffe://cluster/ns/*", "spiffe://cluster/ns/"));
  CHECK_FALSE(caller_pattern_matches("spiffe://cluster/ns/*", "spiffe://cluster/nsx/web"));
  CHECK_FALSE(caller_pattern_matches("spiffe://cluster/ns/*", "spiffe://other/ns/web"));
  CHECK(caller_pattern_matches("*", "client.test"));
}

TEST_CASE("NoIdentityMatchesNoPatternButAnEmptyListAllowsEveryone") {
  CHECK_FALSE(caller_pattern_matches("*", ""));
  CHECK_FALSE(caller_pattern_matches("", ""));
  CHECK_FALSE(callers_allow({"*"}, ""));
  CHECK(callers_allow({}, ""));
  CHECK(callers_allow({}, "anyone"));
  const std::vector<std::string> list{"a.test", "spiffe://c/ns/orders/*"};
  CHECK(callers_allow(list, "a.test"));
  CHECK(callers_allow(list, "spiffe://c/ns/orders/sa/x"));
  CHECK_FALSE(callers_allow(list, "b.test"));
}

TEST_CASE("PatternProblemsNameEmptyPatternsAndInnerStars") {
  CHECK(caller_pattern_problem("spiffe://c/ns/*") == "");
  CHECK(caller_pattern_problem("*") == "");
  CHECK(caller_pattern_problem("a.test") == "");
  CHECK(caller_pattern_problem("") != "");
  CHECK(caller_pattern_problem("*.test") != "");
  CHECK(caller_pattern_problem("spiffe://*/ns") != "");
}
