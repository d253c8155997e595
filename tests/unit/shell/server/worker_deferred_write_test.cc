// Worker::defer_write (its ConnectionHost base): writes queued inside read callbacks leave after the
// poll that follows the one that queued them, a poll that does not block,
// so bytes arriving meanwhile share their write; never held twice in a row.
// Real sockets (socketpairs) on the worker's own loop, run by hand.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <string>
#include <vector>

#include "shell/io/deferred_writer.h"
#include "shell/proxy/runtime.h"
#include "shell/server/worker.h"

using namespace onelayer;

namespace {

// A connection's output as the worker sees it: bytes gathered by read
// callbacks, written (recorded) when the worker says so.
class RecordingWriter final : public DeferredWriter {
 public:
  void write_deferred() override {
    writes.push_back(pending);
    pending.clear();
  }
  std::string pending;
  std::vector<std::string> writes;
};

// Socket pairs in a chain: a byte read on pair i queues its letter for the
// writer (as an HTTP/2 read queues frames for another connection) and sends
// a byte into pair i+1, which the worker sees on its next poll.
struct Chain {
  static constexpr int kPairs = 3;
  Worker* worker = nullptr;
  RecordingWriter writer;
  std::array<std::array<int, 2>, kPairs> fds{};
  std::array<uv_poll_t, kPairs> polls{};
  std::vector<bool> deferred;  // what each defer_write() answered

  explicit Chain(Worker& w) : worker(&w) {
    for (int i = 0; i < kPairs; ++i) {
      REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds[i].data()) == 0);
      REQUIRE(uv_poll_init(w.loop(), &polls[i], fds[i][1]) == 0);
      polls[i].data = this;
      REQUIRE(uv_poll_start(&polls[i], UV_READABLE, on_readable) == 0);
    }
  }
  ~Chain() {
    for (uv_poll_t& p : polls) uv_close(reinterpret_cast<uv_handle_t*>(&p), nullptr);
    uv_run(worker->loop(), UV_RUN_NOWAIT);  // the close callbacks
    for (auto& pair : fds) {
      close(pair[0]);
      close(pair[1]);
    }
  }

  static void on_readable(uv_poll_t* p, int, int) {
    auto* c = static_cast<Chain*>(p->data);
    const int i = static_cast<int>(p - c->polls.data());
    char byte = 0;
    REQUIRE(read(c->fds[i][1], &byte, 1) == 1);
    c->worker->enter_read();
    c->writer.pending += static_cast<char>('A' + i);
    c->deferred.push_back(c->worker->defer_write(&c->writer));
    if (i + 1 < kPairs) REQUIRE(write(c->fds[i + 1][0], "x", 1) == 1);
    c->worker->leave_read();
  }
};

// A timer far away keeps the loop alive: a poll that blocked would wait for it.
struct FarTimer {
  uv_timer_t timer{};
  bool fired = false;
  explicit FarTimer(uv_loop_t* loop) {
    uv_timer_init(loop, &timer);
    timer.data = this;
    uv_timer_start(&timer, [](uv_timer_t* t) { static_cast<FarTimer*>(t->data)->fired = true; }, 60'000, 0);
  }
  ~FarTimer() { uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr); }
};

void close_worker(Worker& w) {
  w.post_force_close();
  uv_run(w.loop(), UV_RUN_DEFAULT);
}

}  // namespace

TEST_CASE("worker: writes queued by one poll wait one poll more and take what it read along") {
  Runtime rt;
  Worker w{rt, 0};
  {
    FarTimer far(w.loop());
    Chain chain(w);
    REQUIRE(write(chain.fds[0][0], "x", 1) == 1);

    // Poll 1 reads pair 0: its letter is queued and held, not written.
    uv_run(w.loop(), UV_RUN_ONCE);
    CHECK(chain.deferred == std::vector<bool>{true});
    CHECK(chain.writer.writes.empty());
    CHECK(chain.writer.pending == "A");

    // Poll 2 returns at once with pair 1: both letters leave in one write.
    uv_run(w.loop(), UV_RUN_ONCE);
    CHECK(chain.writer.writes == std::vector<std::string>{"AB"});

    // Pair 2's letter came from poll 3, after a write: held once more, and
    // written after poll 4, which finds nothing and does not wait.
    uv_run(w.loop(), UV_RUN_ONCE);
    CHECK(chain.writer.writes == std::vector<std::string>{"AB"});
    uv_run(w.loop(), UV_RUN_ONCE);
    CHECK(chain.writer.writes == std::vector<std::string>{"AB", "C"});
    CHECK(chain.writer.pending.empty());
    CHECK_FALSE(far.fired);
    CHECK(chain.deferred == std::vector<bool>{true, true, true});
  }
  close_worker(w);
  CHECK(uv_loop_alive(w.loop()) == 0);
}

TEST_CASE("worker: a write is deferred only inside a read, queued once, and forgotten with its writer") {
  Runtime rt;
  Worker w{rt, 0};
  RecordingWriter writer;
  CHECK_FALSE(w.defer_write(&writer));
  {
    // The worker's check runs after each poll (the timer keeps the loop
    // running).
    FarTimer far(w.loop());
    // Queued twice in one read: written once, within two polls.
    w.enter_read();
    CHECK(w.defer_write(&writer));
    CHECK(w.defer_write(&writer));
    w.leave_read();
    for (int i = 0; i < 3; ++i) uv_run(w.loop(), UV_RUN_NOWAIT);
    CHECK(writer.writes.size() == 1);
    // A writer that goes away before the check is forgotten, never called.
    w.enter_read();
    CHECK(w.defer_write(&writer));
    w.leave_read();
    w.forget_write(&writer);
    for (int i = 0; i < 3; ++i) uv_run(w.loop(), UV_RUN_NOWAIT);
    CHECK(writer.writes.size() == 1);
    CHECK_FALSE(far.fired);
  }
  close_worker(w);
}
