#include "shell/io/socket_address.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <cstring>

namespace onelayer {

static void set_port(sockaddr_storage* ss, uint16_t port) {
  if (ss->ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(ss)->sin_port = htons(port);
  } else if (ss->ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(ss)->sin6_port = htons(port);
  }
}

bool ip_literal_address(const std::string& host, uint16_t port, sockaddr_storage* out) {
  sockaddr_storage ss{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
  } else {
    return false;
  }
  set_port(&ss, port);
  *out = ss;
  return true;
}

std::string resolve_address_blocking(const std::string& host, uint16_t port, sockaddr_storage* out) {
  if (ip_literal_address(host, port, out)) return {};
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0) return "cannot resolve " + host + ": " + gai_strerror(rc);
  std::string err = "cannot resolve " + host + ": no IPv4 or IPv6 address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    *out = sockaddr_storage{};
    std::memcpy(out, ai->ai_addr, ai->ai_addrlen);
    set_port(out, port);
    err.clear();
    break;
  }
  freeaddrinfo(res);
  return err;
}

socklen_t address_length(const sockaddr_storage& ss) {
  return ss.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

uint16_t address_port(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(ss).sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(ss).sin6_port);
  return 0;
}

uint16_t local_port(const uv_tcp_t* tcp) {
  sockaddr_storage ss{};
  int len = sizeof ss;
  if (uv_tcp_getsockname(tcp, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  return address_port(ss);
}

}  // namespace onelayer
