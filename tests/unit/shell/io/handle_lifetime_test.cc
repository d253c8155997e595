// HandleWrap and WorkerListener: who frees what, and when. Every loop test
// ends with uv_loop_close() == 0 (no handle left behind).
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shell/io/handle_wrap.h"
#include "shell/server/worker_listener.h"

using namespace onelayer;

namespace {

int listening_socket() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(listen(fd, 16) == 0);
  return fd;
}

void ignore_connection(uv_stream_t*, int) {}

WorkerListener* open_listener(uv_loop_t* loop) {
  int err = 0;
  WorkerListener* l = WorkerListener::open(nullptr, loop, "public", listening_socket(), ignore_connection, &err);
  REQUIRE(l != nullptr);
  return l;
}

struct Events {
  int closed = 0;
  int deleted = 0;
};

// A socket and a timer, like a connection.
class TwoHandles final : public HandleWrap<TwoHandles> {
 public:
  TwoHandles(uv_loop_t* loop, Events* ev) : ev_(ev) {
    uv_tcp_init(loop, &tcp_);
    uv_timer_init(loop, &timer_);
    adopt(&tcp_);
    adopt(&timer_);
  }
  ~TwoHandles() { ++ev_->deleted; }
  bool close(bool reset = false) { return close_handles(reset ? &tcp_ : nullptr, &tcp_, &timer_); }
  void on_closed() {
    CHECK(handle_state() == State::closed);
    CHECK(ev_->deleted == 0);  // told before it is freed
    ++ev_->closed;
  }
  uv_timer_t* timer() { return &timer_; }

 private:
  uv_tcp_t tcp_;
  uv_timer_t timer_;
  Events* ev_;
};

}  // namespace

TEST_CASE("HandleOwnerIsFreedOnceAfterItsLastHandleClosedAndCloseIsIdempotent") {
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  Events ev;
  auto* o = new TwoHandles(&loop, &ev);
  CHECK(TwoHandles::owner_of(o->timer()) == o);
  CHECK(o->handle_state() == TwoHandles::State::open);
  CHECK(o->close());
  CHECK(o->handle_state() == TwoHandles::State::closing);
  CHECK(o->closing());
  CHECK_FALSE(o->close());  // a second close does nothing
  CHECK_FALSE(o->close(true));
  CHECK(ev.deleted == 0);   // never freed inside the caller's stack
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(ev.closed == 1);
  CHECK(ev.deleted == 1);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("HandleOwnerClosedWithAResetIsFreedLikeAnyOther") {
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  Events ev;
  auto* o = new TwoHandles(&loop, &ev);
  CHECK(o->close(true));  // a TCP handle without a socket: falls back to uv_close
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(ev.closed == 1);
  CHECK(ev.deleted == 1);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("ClosedListenerIsFreedWhenItsLastConnectionHasGone") {
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  const size_t before = WorkerListener::live();
  WorkerListener* l = open_listener(&loop);
  CHECK(WorkerListener::live() == before + 1);
  l->connection_opened();
  l->connection_opened();
  l->close();
  l->close();  // idempotent
  CHECK(l->state() == WorkerListener::State::closing);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(l->state() == WorkerListener::State::closed);
  CHECK(l->name() == "public");  // its connections may still read it
  l->connection_closed();
  CHECK(WorkerListener::live() == before + 1);
  l->connection_closed();  // the last one frees it
  CHECK(WorkerListener::live() == before);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("ListenerWithoutConnectionsAtCloseIsFreedByItsCloseCallback") {
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  const size_t before = WorkerListener::live();
  WorkerListener* l = open_listener(&loop);
  l->connection_opened();
  l->close();
  l->connection_closed();  // gone before the handle closed: not freed yet
  CHECK(WorkerListener::live() == before + 1);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(WorkerListener::live() == before);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("ReloadsThatRemoveAndAddAListenerLeaveNoListenerObjectBehind") {
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  const size_t before = WorkerListener::live();
  for (int i = 0; i < 200; ++i) {
    WorkerListener* l = open_listener(&loop);
    l->connection_opened();  // a connection outlives the reload ...
    l->close();
    uv_run(&loop, UV_RUN_NOWAIT);
    l->connection_closed();  // ... then goes
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(WorkerListener::live() == before);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("ListenerThatCannotListenIsReportedAndFreed") {
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  const size_t before = WorkerListener::live();
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);  // listen(2) fails on a datagram socket
  int err = 0;
  CHECK(WorkerListener::open(nullptr, &loop, "bad", fd, ignore_connection, &err) == nullptr);
  CHECK(err < 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(WorkerListener::live() == before);
  CHECK(uv_loop_close(&loop) == 0);
}
