// One listening socket of one worker (a SO_REUSEPORT socket handed in by the
// server). Its connections keep a pointer to it (its name, their count: the
// ServerListener they see), so
// it outlives its handle: it is freed once its handle has closed and its last
// connection has gone, whichever comes last.
#pragma once

#include <uv.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "shell/stream/server_listener.h"

namespace onelayer {

class Worker;

class WorkerListener : public ServerListener {
 public:
  enum class State : uint8_t { listening, closing, closed };

  // Listens on `fd` (taken over) on `w`'s loop, each new connection to
  // `on_connection` with the handle's data being this. Failure: null and the
  // libuv error in `*err`.
  static WorkerListener* open(Worker* w, uv_loop_t* loop, std::string name, int fd, uv_connection_cb on_connection,
                              int* err);
  // The listener a listening handle belongs to.
  static WorkerListener* of(uv_stream_t* server) { return static_cast<WorkerListener*>(server->data); }

  // Stops accepting and closes the handle; idempotent.
  void close();
  void connection_opened() { ++connections_; }
  // One of its connections has gone; after close(), the last one frees this.
  void connection_closed();

  State state() const { return state_; }
  bool listening() const { return state_ == State::listening; }
  Worker* worker() const { return worker_; }

  // WorkerListener objects alive in the process (tests).
  static size_t live() { return live_.load(std::memory_order_relaxed); }

  // Only for a listener still listening when its worker's loop is gone (a
  // worker that never ran); every other one frees itself.
  ~WorkerListener();

 private:
  WorkerListener(Worker* w, std::string name);
  static void on_handle_closed(uv_handle_t* h);
  void free_if_unused();

  uv_tcp_t tcp_;
  Worker* worker_;
  State state_ = State::listening;
  static std::atomic<size_t> live_;
};

}  // namespace onelayer
