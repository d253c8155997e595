// ParkedConnections: one worker's client connections that have been idle
// on keep-alive for a while, each held as its socket alone. A Http1ServerConnection is
// ~430 bytes (most of it libuv's uv_tcp_t); a parked connection is a
// 40-byte record: the socket, its listener, and its idle deadline in the
// worker's TimerList. The sockets wait in an epoll set of their own, watched
// by one uv_poll_t; when one becomes readable (a request, EOF, an error), it
// leaves the set and the worker makes it a Http1ServerConnection again (Worker::unpark),
// which reads it as any connection.
//
// A parked connection still counts as open (its listener's connections, the
// active-connections gauge): it holds a descriptor. It is closed when its
// idle time runs out, at drain and at forced close.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "shell/http1/http1_server_host.h"
#include "shell/io/timer_list.h"

namespace onelayer {

class Worker;
class WorkerListener;

class ParkedConnections {
 public:
  // How long a keep-alive connection is idle before it is parked: long
  // enough that a client sending requests back to back never parks (parking
  // and waking cost a few system calls each), short next to idle_timeout.
  // The connection knows it as Http1ServerHost::kParkAfterMs.
  static constexpr uint64_t kParkAfterMs = Http1ServerHost::kParkAfterMs;
  // After connections were parked, their freed memory goes back to the
  // system this much later (one release for a whole burst of parkings).
  static constexpr uint64_t kReleaseAfterMs = 100;

  explicit ParkedConnections(Worker* w);
  ParkedConnections(const ParkedConnections&) = delete;
  ParkedConnections& operator=(const ParkedConnections&) = delete;
  ~ParkedConnections();

  // Takes `fd` (an idle client socket of `l`, owned from now on); it is
  // closed after `idle_left_ms` unless it becomes readable first. False if
  // the set cannot take it (the caller still owns `fd`).
  bool park(int fd, WorkerListener* l, uint64_t idle_left_ms);
  // Closes every parked socket (drain, forced close).
  void close_all();
  // Closes every parked socket and the poll handle (the worker stops).
  void close();
  size_t size() const { return parked_.size(); }

 private:
  struct Parked : TimerList::Entry {
    WorkerListener* listener;
    int fd;
    uint32_t index;  // in parked_
  };

  // The pending release of freed memory (release_freed_memory()).
  struct MemoryRelease : TimerList::Entry {};

  static void on_readable(uv_poll_t* p, int status, int events);
  static void on_release(TimerList::Entry* e);
  static void on_idle_timeout(TimerList::Entry* e);
  void wake_ready();
  // Takes `p` out of the set and frees it; its socket stays open.
  int unlink(Parked* p, WorkerListener** listener);
  void close_one(Parked* p);

  Worker* w_;
  int epfd_ = -1;
  uv_poll_t poll_;
  bool poll_open_ = false;
  std::vector<Parked*> parked_;
  MemoryRelease release_;
};

}  // namespace onelayer
