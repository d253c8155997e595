// Everything the test's end of a socketpair holds now (tests that run
// connections on real sockets and read what they wrote).
#pragma once

#include <sys/socket.h>

#include <string>

namespace onelayer::test {

inline std::string drain(int fd) {
  std::string got;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

}  // namespace onelayer::test
