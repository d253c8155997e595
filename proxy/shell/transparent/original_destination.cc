#include "shell/transparent/original_destination.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace onelayer {

// <linux/netfilter_ipv4.h> and <linux/netfilter_ipv6/ip6_tables.h> define
// both as 80; those headers clash with glibc's, so the value is written here.
static constexpr int kSoOriginalDst = 80;
static constexpr int kIp6tSoOriginalDst = 80;

static bool from_sockaddr(const sockaddr_storage& ss, Destination* out) {
  *out = Destination{};
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    out->family = 4;
    std::memcpy(out->addr.data(), &a.sin_addr, 4);
    out->port = ntohs(a.sin_port);
    return true;
  }
  if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    out->family = 6;
    std::memcpy(out->addr.data(), &a.sin6_addr, 16);
    out->port = ntohs(a.sin6_port);
    return true;
  }
  return false;
}

bool read_local_address(uv_tcp_t* tcp, Destination* out) {
  sockaddr_storage ss{};
  int len = sizeof ss;
  if (uv_tcp_getsockname(tcp, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
  return from_sockaddr(ss, out);
}

int read_original_destination(uv_tcp_t* tcp, Destination* out) {
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(tcp), &fd) != 0) return -EBADF;
  Destination local;
  if (!read_local_address(tcp, &local)) return -errno;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  int rc = local.family == 6 ? getsockopt(fd, SOL_IPV6, kIp6tSoOriginalDst, &ss, &len)
                             : getsockopt(fd, SOL_IP, kSoOriginalDst, &ss, &len);
  if (rc != 0) return -errno;
  if (!from_sockaddr(ss, out)) return -EAFNOSUPPORT;
  return 0;
}

}  // namespace onelayer
