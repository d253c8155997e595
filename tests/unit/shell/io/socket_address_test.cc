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

TEST_CASE("BoundPortIsThePortAListenerOnPortZeroGotAndZeroForASocketNotBound") {
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  uv_tcp_t listener, unbound;
  REQUIRE(uv_tcp_init(&loop, &listener) == 0);
  REQUIRE(uv_tcp_init(&loop, &unbound) == 0);
  sockaddr_storage any{};
  REQUIRE(ip_literal_address("127.0.0.1", 0, &any));
  REQUIRE(uv_tcp_bind(&listener, reinterpret_cast<const sockaddr*>(&any), 0) == 0);
  REQUIRE(uv_listen(reinterpret_cast<uv_stream_t*>(&listener), 1, [](uv_stream_t*, int) {}) == 0);
  sockaddr_storage got{};
  int len = sizeof got;
  REQUIRE(uv_tcp_getsockname(&listener, reinterpret_cast<sockaddr*>(&got), &len) == 0);
  CHECK(bound_port(&listener) != 0);
  CHECK(bound_port(&listener) == address_port(got));
  CHECK(bound_port(&unbound) == 0);
  uv_close(reinterpret_cast<uv_handle_t*>(&listener), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&unbound), nullptr);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&loop) == 0);
}
