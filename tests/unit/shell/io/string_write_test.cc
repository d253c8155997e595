// StringWrite: the string lives until libuv is done, the owner hears once,
// and a write that cannot start says so at once and never calls back.
#include "shell/io/string_write.h"

#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

using namespace onelayer;

namespace {

struct Owner {
  std::vector<int> statuses;
};

void record(void* owner, int status) { static_cast<Owner*>(owner)->statuses.push_back(status); }

}  // namespace

TEST_CASE("AStringWriteKeepsItsStringUntilWrittenAndTellsItsOwnerOnce") {
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  int fds[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  uv_pipe_t pipe;
  REQUIRE(uv_pipe_init(&loop, &pipe, 0) == 0);
  REQUIRE(uv_pipe_open(&pipe, fds[0]) == 0);

  Owner owner;
  {
    std::string body(100'000, 'x');  // larger than a socket buffer: written over several polls
    body += "end";
    REQUIRE(StringWrite::start(reinterpret_cast<uv_stream_t*>(&pipe), std::move(body), &owner, record) == 0);
  }  // the caller's string is gone; the write holds its own
  std::string received;
  char buf[65536];
  while (received.size() < 100'003) {
    uv_run(&loop, UV_RUN_NOWAIT);
    ssize_t n = read(fds[1], buf, sizeof buf);
    if (n > 0) received.append(buf, static_cast<size_t>(n));
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  CHECK(received.size() == 100'003);
  CHECK(received.compare(100'000, 3, "end") == 0);
  CHECK(owner.statuses == std::vector<int>{0});

  uv_close(reinterpret_cast<uv_handle_t*>(&pipe), nullptr);
  uv_run(&loop, UV_RUN_DEFAULT);
  close(fds[1]);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("AStringWriteThatCannotStartReturnsTheErrorAndNeverCallsBack") {
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  uv_tcp_t tcp;  // never connected: no descriptor to write to
  REQUIRE(uv_tcp_init(&loop, &tcp) == 0);
  Owner owner;
  CHECK(StringWrite::start(reinterpret_cast<uv_stream_t*>(&tcp), "lost", &owner, record) < 0);
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp), nullptr);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(owner.statuses.empty());
  CHECK(uv_loop_close(&loop) == 0);
}
