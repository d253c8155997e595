#include "shell/io/conn.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>


namespace onelayer {

Conn::Conn(ConnectionHost* host) : host_(host) {
  uv_tcp_init(host->loop(), &tcp_);
  adopt(&tcp_);
}

ssize_t Conn::recv_now(uv_buf_t* buf) {
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(&tcp_), &fd) != 0) return UV_EBADF;
  *buf = uv_buf_init(host_->read_buffer(), ConnectionHost::kReadBufferSize);
  ssize_t r;
  do {
    r = ::recv(fd, buf->base, buf->len, MSG_DONTWAIT);
  } while (r < 0 && errno == EINTR);
  if (r > 0) return r;
  if (r == 0) return UV_EOF;
  return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
}

int Conn::duplicate_socket() {
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(&tcp_), &fd) != 0) {
    errno = EBADF;
    return -1;
  }
  return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

void Conn::arm_timer(uint64_t ms, TimerCallback cb) { host_->timers().arm(*this, ms, cb); }

void Conn::disarm_timer() { host_->timers().disarm(*this); }

void Conn::close_handles(bool reset) {
  if (closing()) return;
  disarm_timer();
  HandleWrap::close_handles(reset ? &tcp_ : nullptr, &tcp_);
}

}  // namespace onelayer
