#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netdb.h>

#include <cstring>
#include <string>
#include <vector>

#include "shell/proxy/endpoint_state.h"

using namespace onelayer;

namespace {

// A resolver's answer, built by hand: what getaddrinfo gives for a name in
// /etc/hosts, in the order given.
struct Answer {
  std::vector<sockaddr_storage> storage;
  std::vector<addrinfo> list;

  explicit Answer(const std::vector<std::string>& ips) : storage(ips.size()), list(ips.size()) {
    for (size_t i = 0; i < ips.size(); ++i) {
      addrinfo& a = list[i];
      if (ips[i].find(':') != std::string::npos) {
        auto* s6 = reinterpret_cast<sockaddr_in6*>(&storage[i]);
        s6->sin6_family = AF_INET6;
        REQUIRE(inet_pton(AF_INET6, ips[i].c_str(), &s6->sin6_addr) == 1);
        a.ai_family = AF_INET6;
        a.ai_addrlen = sizeof(sockaddr_in6);
      } else {
        auto* s4 = reinterpret_cast<sockaddr_in*>(&storage[i]);
        s4->sin_family = AF_INET;
        REQUIRE(inet_pton(AF_INET, ips[i].c_str(), &s4->sin_addr) == 1);
        a.ai_family = AF_INET;
        a.ai_addrlen = sizeof(sockaddr_in);
      }
      a.ai_addr = reinterpret_cast<sockaddr*>(&storage[i]);
      a.ai_next = i + 1 < ips.size() ? &list[i + 1] : nullptr;
    }
  }
};

std::string text(const sockaddr_storage& ss) {
  char ip[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, ip, sizeof ip);
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, ip, sizeof ip);
  }
  return ip;
}

}  // namespace

TEST_CASE("ResolvedAddressesPutIpv4FirstAndKeepEachFamilysOrder") {
  Answer a({"::1", "127.0.0.1", "fd00::2", "10.0.0.2"});
  std::vector<std::string> got;
  for (const sockaddr_storage& ss : resolved_addresses(a.list.data())) got.push_back(text(ss));
  CHECK(got == std::vector<std::string>{"127.0.0.1", "10.0.0.2", "::1", "fd00::2"});
}

TEST_CASE("ResolvedAddressesOfAnIpv6OnlyAnswerKeepTheirOrder") {
  Answer a({"fd00::2", "::1"});
  std::vector<std::string> got;
  for (const sockaddr_storage& ss : resolved_addresses(a.list.data())) got.push_back(text(ss));
  CHECK(got == std::vector<std::string>{"fd00::2", "::1"});
}
