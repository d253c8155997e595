#include "shell/conn.h"

#include <sys/socket.h>

#include <cerrno>

#include "shell/worker.h"

namespace onelayer {

Conn::Conn(Worker* w) : worker_(w) {
  uv_tcp_init(w->loop(), &tcp_);
  uv_timer_init(w->loop(), &timer_);
  adopt(&tcp_);
  adopt(&timer_);
}

ssize_t Conn::recv_now(uv_buf_t* buf) {
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(&tcp_), &fd) != 0) return UV_EBADF;
  *buf = uv_buf_init(worker_->read_buffer(), Worker::kReadBufferSize);
  ssize_t r;
  do {
    r = ::recv(fd, buf->base, buf->len, MSG_DONTWAIT);
  } while (r < 0 && errno == EINTR);
  if (r > 0) return r;
  if (r == 0) return UV_EOF;
  return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
}

void Conn::arm_timer(uint64_t ms, uv_timer_cb cb) {
  timer_cb_ = cb;
  deadline_ = uv_now(timer_.loop) + ms;
  // uv_timer_get_due_in: how long until the libuv timer fires (0: not active).
  if (!uv_is_active(reinterpret_cast<uv_handle_t*>(&timer_)) || uv_timer_get_due_in(&timer_) > ms) {
    uv_timer_start(&timer_, on_timer, ms, 0);
  }
}

void Conn::on_timer(uv_timer_t* t) {
  Conn* c = of(t);
  if (c->timer_cb_ == nullptr) return;  // disarmed since: nothing is due
  uint64_t now = uv_now(t->loop);
  if (now < c->deadline_) {  // pushed back since it was scheduled
    uv_timer_start(t, on_timer, c->deadline_ - now, 0);
    return;
  }
  uv_timer_cb cb = c->timer_cb_;
  c->timer_cb_ = nullptr;
  cb(t);
}

void Conn::close_handles(bool reset) {
  if (closing()) return;
  timer_cb_ = nullptr;
  uv_timer_stop(&timer_);
  HandleWrap::close_handles(reset ? &tcp_ : nullptr, &tcp_, &timer_);
}

}  // namespace onelayer
