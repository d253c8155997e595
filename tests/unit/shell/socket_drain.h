// What the test's end of a socketpair holds now (tests that run
// connections on real sockets and read what they wrote).
#pragma once

#include <sys/socket.h>

#include <string>
#include <vector>

namespace onelayer::test {

// What the end holds now, one string per recv(2): on a SOCK_SEQPACKET end,
// one per send(2) of the other.
inline std::vector<std::string> sends(int fd) {
  std::vector<std::string> out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) break;
    out.emplace_back(buf, static_cast<size_t>(n));
  }
  return out;
}

// Everything the end holds now, as one string.
inline std::string drain(int fd) {
  std::string got;
  for (const std::string& part : sends(fd)) got += part;
  return got;
}

}  // namespace onelayer::test
