#include <doctest/doctest.h>

#include "core/http/retry_after.h"

using namespace onelayer;
using namespace std::chrono;
using namespace std::chrono_literals;

namespace {

// Friday 2024-03-01 12:00:00 UTC.
const system_clock::time_point kNow = sys_days{2024y / March / 1} + 12h;

std::optional<Millis> parse(std::string_view v, system_clock::time_point now = kNow) {
  return parse_retry_after(v, now);
}

}  // namespace

TEST_CASE("RetryAfterDelaySecondsGivesMilliseconds") {
  CHECK(parse("120") == Millis{120'000});
  CHECK(parse("0") == Millis{0});
  CHECK(parse("007") == Millis{7'000});
  CHECK(parse(" \t5 ") == Millis{5'000});
}

TEST_CASE("RetryAfterImfFixdateIsRelativeToNow") {
  CHECK(parse("Fri, 01 Mar 2024 12:00:30 GMT") == Millis{30'000});
  CHECK(parse("Sat, 02 Mar 2024 12:00:00 GMT") == Millis{86'400'000});
  CHECK(parse("Fri, 01 Mar 2024 12:00:00 GMT") == Millis{0});
}

TEST_CASE("RetryAfterDateRoundsUpAgainstSubSecondNow") {
  CHECK(parse("Fri, 01 Mar 2024 12:00:01 GMT", kNow + 300ms) == Millis{700});
}

TEST_CASE("RetryAfterObsoleteRfc850DateIsAccepted") {
  CHECK(parse("Friday, 01-Mar-24 12:01:00 GMT") == Millis{60'000});
}

TEST_CASE("RetryAfterObsoleteAsctimeDateIsAccepted") {
  CHECK(parse("Fri Mar  1 12:00:10 2024") == Millis{10'000});
  CHECK(parse("Sat Mar 02 12:00:00 2024") == Millis{86'400'000});  // 2DIGIT form of the day
}

TEST_CASE("RetryAfterRfc850TwoDigitYearFollowsFiftyYearRule") {
  const auto in_2026 = sys_days{2026y / March / 1} + 12h - kNow;
  CHECK(parse("Sunday, 01-Mar-26 12:00:00 GMT") == duration_cast<Millis>(in_2026));
  // 2074 is exactly 50 years ahead: still this century (and saturated).
  CHECK(parse("Thursday, 01-Mar-74 12:00:00 GMT") == kRetryAfterSaturation);
  // 2075 would be more than 50 years ahead: read as 1975, in the past.
  CHECK(parse("Saturday, 01-Mar-75 12:00:00 GMT") == Millis{0});
  CHECK(parse("Sunday, 06-Nov-94 08:49:37 GMT") == Millis{0});
}

TEST_CASE("RetryAfterDateInThePastGivesZero") {
  CHECK(parse("Sun, 06 Nov 1994 08:49:37 GMT") == Millis{0});
  CHECK(parse("Sun Nov  6 08:49:37 1994") == Millis{0});
  CHECK(parse("Thu, 29 Feb 2024 23:59:59 GMT") == Millis{0});  // leap day exists
}

TEST_CASE("RetryAfterGarbageNegativeAndEmptyAreIgnored") {
  for (std::string_view v : {"", "   ", "abc", "-5", "+5", "1.5", "5s", "5 5", "0x10", "1e3",
                             "Fri, 01 Mar 2024 12:00:30 UTC", "fri, 01 mar 2024 12:00:30 gmt",
                             "Fri, 1 Mar 2024 12:00:30 GMT", "Fri, 01 Mar 2024 12:00 GMT",
                             "Fri, 01 Mar 2024 12:00:30 GMT x", "Fri 01 Mar 2024 12:00:30 GMT",
                             "Friday, 01-Mar-2024 12:00:30 GMT", "Fri Mar 1 12:00:10 2024",
                             "Fri, 29 Feb 2023 12:00:00 GMT", "Fri, 31 Apr 2024 12:00:00 GMT",
                             "Fri, 01 Mar 2024 24:00:00 GMT", "Fri, 01 Mar 2024 12:60:00 GMT",
                             "Fri, 00 Mar 2024 12:00:00 GMT", "Fri, 01 Foo 2024 12:00:00 GMT"}) {
    CAPTURE(v);
    CHECK_FALSE(parse(v).has_value());
  }
}

TEST_CASE("RetryAfterHugeValuesSaturateWithoutOverflow") {
  CHECK(parse("99999999999999999999999999999999") == kRetryAfterSaturation);
  CHECK(parse("1000000000") == kRetryAfterSaturation);
  CHECK(parse("999999999") == Millis{999'999'999'000});
  CHECK(parse("Fri, 31 Dec 9999 23:59:59 GMT") == kRetryAfterSaturation);
  CHECK_FALSE(parse("99999999999999999999999x").has_value());
}
