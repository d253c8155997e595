#include <doctest/doctest.h>

#include <string>

#include "core/base/grpc_timeout.h"

using namespace onelayer;
using namespace std::chrono_literals;

TEST_CASE("GrpcTimeoutParsesEveryUnitToWholeMilliseconds") {
  struct Case {
    const char* text;
    int64_t ms;
  };
  for (const Case& c : {Case{"2H", 7'200'000}, Case{"3M", 180'000}, Case{"5S", 5'000}, Case{"600m", 600},
                        Case{"600000u", 600}, Case{"60000000n", 60}, Case{"99999999H", 99'999'999LL * 3'600'000},
                        Case{"0S", 0}}) {
    INFO(c.text);
    CHECK(parse_grpc_timeout(c.text) == Millis{c.ms});
  }
  CHECK_FALSE(parse_grpc_timeout("600000000n"));  // 9 digits
}

TEST_CASE("GrpcTimeoutRoundsSubMillisecondPartsUp") {
  CHECK(parse_grpc_timeout("1n") == Millis{1});
  CHECK(parse_grpc_timeout("1u") == Millis{1});
  CHECK(parse_grpc_timeout("1001u") == Millis{2});
  CHECK(parse_grpc_timeout("1000000n") == Millis{1});
  CHECK(parse_grpc_timeout("0n") == Millis{0});
}

TEST_CASE("GrpcTimeoutGarbageIsIgnored") {
  for (auto bad : {"", "S", "5", "123456789S", "5s", "5 S", " 5S", "5S ", "-5S", "+5S", "5.0S", "5h", "5x", "m5"})
    CHECK_FALSE(parse_grpc_timeout(bad));
}

TEST_CASE("GrpcTimeoutFormatTakesTheFinestUnitThatFitsEightDigits") {
  CHECK(format_grpc_timeout(1ns) == "1n");
  CHECK(format_grpc_timeout(99'999'999ns) == "99999999n");
  CHECK(format_grpc_timeout(100'000'000ns) == "100000u");
  CHECK(format_grpc_timeout(600ms) == "600000u");
  CHECK(format_grpc_timeout(99'999'999us) == "99999999u");
  CHECK(format_grpc_timeout(100s) == "100000m");
  CHECK(format_grpc_timeout(15s) == "15000000u");
  CHECK(format_grpc_timeout(std::chrono::hours{30}) == "108000S");
  CHECK(format_grpc_timeout(std::chrono::hours{40000}) == "2400000M");
}

TEST_CASE("GrpcTimeoutFormatRoundsDownButNeverToZero") {
  CHECK(format_grpc_timeout(100'000'999ns) == "100000u");  // 100000.999us, down
  CHECK(format_grpc_timeout(Millis{99'999'999} + 999us) == "99999999m");
  CHECK(format_grpc_timeout(Millis{100'000'001}) == "100000S");
  CHECK(format_grpc_timeout(1ns) == "1n");
  CHECK(format_grpc_timeout(0ns) == "0n");
  CHECK(format_grpc_timeout(-5ms) == "0n");
  // Whatever is formatted parses back to at most the time left (ms granularity).
  for (int64_t ms : {1LL, 7LL, 599LL, 600LL, 99'999LL, 100'000LL, 123'456'789LL, 9'000'000'000LL}) {
    auto back = parse_grpc_timeout(format_grpc_timeout(Millis{ms}));
    REQUIRE(back);
    CHECK(*back <= Millis{ms});
    CHECK(*back > Millis{0});
    CHECK(format_grpc_timeout(Millis{ms}).size() <= 9);
  }
}
