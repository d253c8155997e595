#include "shell/io/socket_address.h"

#include <arpa/inet.h>
#include <doctest/doctest.h>

using namespace onelayer;

TEST_CASE("IpLiteralsOfBothFamiliesCarryThePortAndNamesAreNotLiterals") {
  sockaddr_storage ss{};
  REQUIRE(ip_literal_address("127.0.0.1", 8080, &ss));
  CHECK(ss.ss_family == AF_INET);
  CHECK(address_port(ss) == 8080);
  CHECK(address_length(ss) == sizeof(sockaddr_in));
  REQUIRE(ip_literal_address("::1", 443, &ss));
  CHECK(ss.ss_family == AF_INET6);
  CHECK(address_port(ss) == 443);
  CHECK(address_length(ss) == sizeof(sockaddr_in6));
  sockaddr_storage untouched{};
  CHECK_FALSE(ip_literal_address("localhost", 80, &untouched));
  CHECK_FALSE(ip_literal_address("[::1]", 80, &untouched));
  CHECK_FALSE(ip_literal_address("127.0.0.1:80", 80, &untouched));
  CHECK(untouched.ss_family == 0);
}

TEST_CASE("BlockingResolveTakesLiteralsAsTheyAreAndNamesTheHostItCannotResolve") {
  sockaddr_storage ss{};
  CHECK(resolve_address_blocking("10.1.2.3", 9, &ss).empty());
  CHECK(address_port(ss) == 9);
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, text, sizeof text);
  CHECK(std::string(text) == "10.1.2.3");
  std::string err = resolve_address_blocking("no such host.invalid", 80, &ss);
  CHECK(err.rfind("cannot resolve no such host.invalid: ", 0) == 0);
}

TEST_CASE("LocalPortReadsBackThePortTheKernelChoseForPortZero") {
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  uv_tcp_t tcp;
  REQUIRE(uv_tcp_init(&loop, &tcp) == 0);
  CHECK(local_port(&tcp) == 0);  // not bound: nothing to read
  sockaddr_storage ss{};
  REQUIRE(ip_literal_address("127.0.0.1", 0, &ss));
  REQUIRE(uv_tcp_bind(&tcp, reinterpret_cast<const sockaddr*>(&ss), 0) == 0);
  const uint16_t port = local_port(&tcp);
  CHECK(port != 0);
  sockaddr_storage bound{};
  int len = sizeof bound;
  REQUIRE(uv_tcp_getsockname(&tcp, reinterpret_cast<sockaddr*>(&bound), &len) == 0);
  CHECK(address_port(bound) == port);
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp), nullptr);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&loop) == 0);
}
