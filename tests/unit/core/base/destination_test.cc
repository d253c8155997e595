#include "core/base/destination.h"

#include <doctest/doctest.h>

#include <string>

using namespace onelayer;

namespace {
Destination dst(const char* ip, uint16_t port = 80) {
  std::optional<Destination> d = parse_destination(ip, port);
  REQUIRE(d);
  return *d;
}
Cidr cidr(const char* text) {
  std::string why;
  std::optional<Cidr> c = parse_cidr(text, &why);
  INFO(why);
  REQUIRE(c);
  return *c;
}
}  // namespace

TEST_CASE("Destination: IPv4 and IPv6 literals parse and print with their port, others are refused") {
  CHECK(dst("10.1.2.3", 8080).to_string() == "10.1.2.3:8080");
  CHECK(dst("fd00::1", 443).to_string() == "[fd00::1]:443");
  CHECK(dst("10.1.2.3").family == 4);
  CHECK(dst("::1").family == 6);
  CHECK_FALSE(parse_destination("example.com", 80));
  CHECK_FALSE(parse_destination("10.1.2", 80));
  CHECK_FALSE(parse_destination("[::1]", 80));
  CHECK_FALSE(parse_destination("", 80));
}

TEST_CASE("Cidr: a block contains the addresses under its prefix and no others, of its family only") {
  Cidr ten = cidr("10.0.0.0/8");
  CHECK(ten.contains(dst("10.0.0.1")));
  CHECK(ten.contains(dst("10.255.255.255")));
  CHECK_FALSE(ten.contains(dst("11.0.0.0")));
  CHECK_FALSE(ten.contains(dst("::ffff:10.0.0.1")));
  Cidr odd = cidr("10.201.0.128/25");
  CHECK(odd.contains(dst("10.201.0.200")));
  CHECK_FALSE(odd.contains(dst("10.201.0.127")));
  Cidr v6 = cidr("fd00::/8");
  CHECK(v6.contains(dst("fd12:3456::1")));
  CHECK_FALSE(v6.contains(dst("fe80::1")));
  CHECK_FALSE(v6.contains(dst("10.0.0.1")));
  CHECK(cidr("0.0.0.0/0").contains(dst("192.0.2.1")));
  CHECK(cidr("::/0").contains(dst("2001:db8::1")));
}

TEST_CASE("Cidr: a bare address is a single host, and to_string gives the block back") {
  Cidr one = cidr("10.201.1.2");
  CHECK(one.prefix == 32);
  CHECK(one.contains(dst("10.201.1.2")));
  CHECK_FALSE(one.contains(dst("10.201.1.3")));
  CHECK(cidr("fd00::1").prefix == 128);
  CHECK(cidr("10.0.0.0/8").to_string() == "10.0.0.0/8");
  CHECK(cidr("fd00::/8").to_string() == "fd00::/8");
}

TEST_CASE("parse_cidr: bad blocks are refused with a reason a user can act on") {
  std::string why;
  CHECK_FALSE(parse_cidr("10.0.0.0/33", &why));
  CHECK(why.find("0..32") != std::string::npos);
  CHECK_FALSE(parse_cidr("fd00::/129", &why));
  CHECK(why.find("0..128") != std::string::npos);
  CHECK_FALSE(parse_cidr("10.0.0.0/", &why));
  CHECK_FALSE(parse_cidr("10.0.0.0/8x", &why));
  CHECK_FALSE(parse_cidr("inventory/8", &why));
  CHECK(why.find("CIDR") != std::string::npos);
  CHECK_FALSE(parse_cidr("10.0.0.1/8", &why));  // host bits set: probably a typo
  CHECK(why.find("10.0.0.0/8") != std::string::npos);
}
