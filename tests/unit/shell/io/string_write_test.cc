// StringWrite on a real socket (one end of a socketpair, the test reads the
// other): the bytes arrive whole, the owner hears once, and the write frees
// itself (the sanitizer build would see a leak).
#include "shell/io/string_write.h"

#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

using namespace onelayer;

namespace {

struct Owner {
  std::vector<int> done;  // each Done's status
};

void on_done(Owner* o, int status) { o->done.push_back(status); }

// One end of a socketpair as a libuv TCP handle on a loop of its own; the
// test reads the other end.
struct Socket {
  int fds[2] = {-1, -1};
  uv_loop_t loop;
  uv_tcp_t tcp;
  Socket() {
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    REQUIRE(uv_loop_init(&loop) == 0);
    REQUIRE(uv_tcp_init(&loop, &tcp) == 0);
    REQUIRE(uv_tcp_open(&tcp, fds[0]) == 0);
  }
  ~Socket() {
    uv_close(reinterpret_cast<uv_handle_t*>(&tcp), nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0);
    ::close(fds[1]);
  }
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&tcp); }
};

}  // namespace

TEST_CASE("StringWrite: the bytes reach the peer and the owner hears once per write, in order") {
  Socket s;
  Owner owner;
  std::string first = "HTTP/1.1 200 OK\r\n";
  CHECK(StringWrite::start<Owner, on_done>(s.stream(), first, &owner) == 0);
  CHECK(StringWrite::start<Owner, on_done>(s.stream(), "\r\n", &owner) == 0);
  uv_run(&s.loop, UV_RUN_DEFAULT);
  CHECK(owner.done == std::vector<int>{0, 0});
  char buf[64] = {};
  ssize_t n = ::recv(s.fds[1], buf, sizeof buf, MSG_DONTWAIT);
  CHECK(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0) == "HTTP/1.1 200 OK\r\n\r\n");
}

TEST_CASE("StringWrite: a write that cannot be queued returns the error and the owner never hears") {
  Socket s;
  REQUIRE(uv_shutdown(new uv_shutdown_t, s.stream(), [](uv_shutdown_t* req, int) { delete req; }) == 0);
  Owner owner;
  CHECK(StringWrite::start<Owner, on_done>(s.stream(), "late", &owner) < 0);
  uv_run(&s.loop, UV_RUN_DEFAULT);
  CHECK(owner.done.empty());
}
