#include "shell/server/parked_connections.h"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "shell/memory/freed_memory.h"
#include "shell/server/worker.h"
#include "shell/server/worker_listener.h"

namespace onelayer {

ParkedConnections::ParkedConnections(Worker* w) : w_(w) {
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) {
    spdlog::warn("worker {}: no epoll set for idle connections ({}): they stay whole", w->index(), errno);
    return;
  }
  if (uv_poll_init(w->loop(), &poll_, epfd_) != 0) {
    ::close(epfd_);
    epfd_ = -1;
    return;
  }
  poll_.data = this;
  poll_open_ = true;
}

ParkedConnections::~ParkedConnections() {
  // The loop is gone: only descriptors are left to release.
  for (Parked* p : parked_) {
    ::close(p->fd);
    delete p;
  }
  if (epfd_ >= 0) ::close(epfd_);
}

bool ParkedConnections::park(int fd, WorkerListener* l, uint64_t idle_left_ms) {
  if (!poll_open_) return false;
  auto* p = new Parked;
  p->listener = l;
  p->fd = fd;
  epoll_event ev{};
  // One-shot: the first readiness wakes it; it leaves the set then anyway.
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
  ev.data.ptr = p;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    delete p;
    return false;
  }
  p->index = static_cast<uint32_t>(parked_.size());
  parked_.push_back(p);
  if (parked_.size() == 1) uv_poll_start(&poll_, UV_READABLE, on_readable);
  w_->timers().arm(*p, idle_left_ms, on_idle_timeout);
  // The Http1ServerConnection this socket leaves is freed just after: its pages (and the
  // blocks the worker keeps for reuse) go back once the burst of parkings
  // is over.
  if (!release_.armed()) w_->timers().arm(release_, kReleaseAfterMs, on_release);
  return true;
}

void ParkedConnections::on_release(TimerList::Entry*) { release_freed_memory(); }

int ParkedConnections::unlink(Parked* p, WorkerListener** listener) {
  epoll_ctl(epfd_, EPOLL_CTL_DEL, p->fd, nullptr);
  Parked* last = parked_.back();
  parked_[p->index] = last;
  last->index = p->index;
  parked_.pop_back();
  if (parked_.empty() && poll_open_) uv_poll_stop(&poll_);
  int fd = p->fd;
  *listener = p->listener;
  delete p;  // disarms its timer
  return fd;
}

void ParkedConnections::close_one(Parked* p) {
  WorkerListener* l;
  ::close(unlink(p, &l));
  w_->parked_closed(l);
}

void ParkedConnections::on_idle_timeout(TimerList::Entry* e) {
  auto* p = static_cast<Parked*>(e);
  p->listener->worker()->parked().close_one(p);
}

void ParkedConnections::on_readable(uv_poll_t* poll, int status, int) {
  auto* self = static_cast<ParkedConnections*>(poll->data);
  if (status < 0) return;
  self->wake_ready();
}

void ParkedConnections::wake_ready() {
  epoll_event evs[64];
  int n;
  do {
    n = epoll_wait(epfd_, evs, 64, 0);
    for (int i = 0; i < n; ++i) {
      WorkerListener* l;
      int fd = unlink(static_cast<Parked*>(evs[i].data.ptr), &l);
      w_->unpark(l, fd);
    }
  } while (n == 64);
}

void ParkedConnections::close_all() {
  while (!parked_.empty()) close_one(parked_.back());
}

void ParkedConnections::close() {
  close_all();
  if (!poll_open_) return;
  poll_open_ = false;
  uv_poll_stop(&poll_);
  uv_close(reinterpret_cast<uv_handle_t*>(&poll_), [](uv_handle_t* h) {
    ::close(static_cast<ParkedConnections*>(h->data)->epfd_);
    static_cast<ParkedConnections*>(h->data)->epfd_ = -1;
  });
}

}  // namespace onelayer
