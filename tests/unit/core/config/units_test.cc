#include "core/config/units.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

using namespace onelayer;
using namespace std::chrono_literals;

TEST_CASE("parse_duration: every unit and decimal fractions give exact milliseconds") {
  CHECK(parse_duration("250ms") == Millis{250});
  CHECK(parse_duration("1s") == Millis{1000});
  CHECK(parse_duration("1.5s") == Millis{1500});
  CHECK(parse_duration("0.25s") == Millis{250});
  CHECK(parse_duration("2m") == Millis{120'000});
  CHECK(parse_duration("1h") == Millis{3'600'000});
  CHECK(parse_duration("0.5m") == Millis{30'000});
  CHECK(parse_duration("0ms") == Millis{0});
  CHECK(parse_duration("1.500s") == Millis{1500});
  CHECK(parse_duration("1.5000000000000000000000s") == Millis{1500});
}

TEST_CASE("parse_duration: no unit, signs, spaces, unknown units and garbage are rejected") {
  CHECK_FALSE(parse_duration(""));
  CHECK_FALSE(parse_duration("250"));
  CHECK_FALSE(parse_duration("-5s"));
  CHECK_FALSE(parse_duration("+5s"));
  CHECK_FALSE(parse_duration(" 5s"));
  CHECK_FALSE(parse_duration("5 s"));
  CHECK_FALSE(parse_duration("5s "));
  CHECK_FALSE(parse_duration("5S"));
  CHECK_FALSE(parse_duration("5d"));
  CHECK_FALSE(parse_duration("10us"));
  CHECK_FALSE(parse_duration("1h30m"));
  CHECK_FALSE(parse_duration("s"));
  CHECK_FALSE(parse_duration(".5s"));
  CHECK_FALSE(parse_duration("5.s"));
  CHECK_FALSE(parse_duration("1e3ms"));
  CHECK_FALSE(parse_duration("abc"));
}

TEST_CASE("parse_duration: values finer than a millisecond are rejected, not rounded") {
  CHECK_FALSE(parse_duration("0.5ms"));
  CHECK_FALSE(parse_duration("1.0005s"));
  CHECK(parse_duration("1.001s") == Millis{1001});
}

TEST_CASE("parse_duration: values beyond 64-bit milliseconds overflow to rejection") {
  CHECK(parse_duration("9223372036854775807ms") == Millis{std::numeric_limits<int64_t>::max()});
  CHECK_FALSE(parse_duration("9223372036854775808ms"));
  CHECK_FALSE(parse_duration("99999999999999999999ms"));
  CHECK_FALSE(parse_duration("9223372036854775807s"));
  CHECK_FALSE(parse_duration("5124095576030432h"));
}

TEST_CASE("format_duration: uses the largest unit that divides exactly") {
  CHECK(format_duration(Millis{0}) == "0ms");
  CHECK(format_duration(Millis{250}) == "250ms");
  CHECK(format_duration(Millis{1500}) == "1500ms");
  CHECK(format_duration(Millis{2000}) == "2s");
  CHECK(format_duration(Millis{90'000}) == "90s");
  CHECK(format_duration(Millis{120'000}) == "2m");
  CHECK(format_duration(Millis{7'200'000}) == "2h");
}

TEST_CASE("format_duration then parse_duration gives the value back") {
  for (int64_t ms : {int64_t{0}, int64_t{1}, int64_t{999}, int64_t{1000}, int64_t{61'000},
                     int64_t{3'600'000}, int64_t{3'601'000}, std::numeric_limits<int64_t>::max()}) {
    CAPTURE(ms);
    CHECK(parse_duration(format_duration(Millis{ms})) == Millis{ms});
  }
}

TEST_CASE("parse_size: plain bytes, decimal and binary units") {
  CHECK(parse_size("0") == uint64_t{0});
  CHECK(parse_size("1024") == uint64_t{1024});
  CHECK(parse_size("100B") == uint64_t{100});
  CHECK(parse_size("64KiB") == uint64_t{64 * 1024});
  CHECK(parse_size("1MiB") == uint64_t{1024 * 1024});
  CHECK(parse_size("1GiB") == uint64_t{1024 * 1024 * 1024});
  CHECK(parse_size("10KB") == uint64_t{10'000});
  CHECK(parse_size("10kB") == uint64_t{10'000});
  CHECK(parse_size("1MB") == uint64_t{1'000'000});
  CHECK(parse_size("1.5KiB") == uint64_t{1536});
}

TEST_CASE("parse_size: garbage, signs, fractions of a byte and overflow are rejected") {
  CHECK_FALSE(parse_size(""));
  CHECK_FALSE(parse_size("KiB"));
  CHECK_FALSE(parse_size("-1"));
  CHECK_FALSE(parse_size("1 KiB"));
  CHECK_FALSE(parse_size("1kib"));
  CHECK_FALSE(parse_size("1.5"));
  CHECK_FALSE(parse_size("1.1KiB"));  // 1126.4 bytes
  CHECK_FALSE(parse_size("0x10"));
  CHECK_FALSE(parse_size("16EiB"));
  CHECK(parse_size("18446744073709551615") == std::numeric_limits<uint64_t>::max());
  CHECK_FALSE(parse_size("18446744073709551616"));
  CHECK_FALSE(parse_size("16777216TiB"));
}

TEST_CASE("format_size: binary units when exact, plain bytes otherwise, and round trips") {
  CHECK(format_size(0) == "0");
  CHECK(format_size(1000) == "1000");
  CHECK(format_size(65536) == "64KiB");
  CHECK(format_size(16 * 1024 * 1024) == "16MiB");
  CHECK(format_size(1536) == "1536");
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{1024}, uint64_t{1536},
                     uint64_t{1} << 40, std::numeric_limits<uint64_t>::max()}) {
    CAPTURE(n);
    CHECK(parse_size(format_size(n)) == n);
  }
}

TEST_CASE("parse_host_port: IPv4, bracketed IPv6 and DNS names") {
  auto v4 = parse_host_port("127.0.0.1:80");
  REQUIRE(v4);
  CHECK(v4->host == "127.0.0.1");
  CHECK(v4->port == 80);

  auto v6 = parse_host_port("[::1]:8080");
  REQUIRE(v6);
  CHECK(v6->host == "::1");
  CHECK(v6->port == 8080);
  CHECK(v6->to_string() == "[::1]:8080");

  auto dns = parse_host_port("inventory.svc:8080");
  REQUIRE(dns);
  CHECK(dns->host == "inventory.svc");
  CHECK(dns->port == 8080);
  CHECK(dns->to_string() == "inventory.svc:8080");

  auto zero = parse_host_port("127.0.0.1:0");
  REQUIRE(zero);
  CHECK(zero->port == 0);
  CHECK(parse_host_port("h:65535")->port == 65535);
}

TEST_CASE("parse_host_port: missing or bad ports and malformed hosts are rejected") {
  CHECK_FALSE(parse_host_port(""));
  CHECK_FALSE(parse_host_port("127.0.0.1"));
  CHECK_FALSE(parse_host_port("127.0.0.1:"));
  CHECK_FALSE(parse_host_port(":80"));
  CHECK_FALSE(parse_host_port("h:65536"));
  CHECK_FALSE(parse_host_port("h:-1"));
  CHECK_FALSE(parse_host_port("h:8o"));
  CHECK_FALSE(parse_host_port("h:123456"));
  CHECK_FALSE(parse_host_port("::1:80"));
  CHECK_FALSE(parse_host_port("[::1]"));
  CHECK_FALSE(parse_host_port("[::1]80"));
  CHECK_FALSE(parse_host_port("[::1:80"));
  CHECK_FALSE(parse_host_port("[]:80"));
  CHECK_FALSE(parse_host_port("[example.com]:80"));
  CHECK_FALSE(parse_host_port("bad host:80"));
  CHECK_FALSE(parse_host_port("a..b:80"));
  CHECK_FALSE(parse_host_port("http://h:80"));
}

TEST_CASE("format_double: shortest round-trip text, Prometheus spelling for NaN and infinities") {
  CHECK(format_double(0.5) == "0.5");
  CHECK(format_double(3) == "3");
  CHECK(format_double(0.1) == "0.1");
  CHECK(format_double(1e21) == "1e+21");
  CHECK(format_double(std::numeric_limits<double>::quiet_NaN()) == "NaN");
  CHECK(format_double(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(format_double(-std::numeric_limits<double>::infinity()) == "-Inf");
}
