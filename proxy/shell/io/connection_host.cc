#include "shell/io/connection_host.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "shell/io/conn.h"

namespace onelayer {

namespace {

// A write that libuv could not complete at once: owns its bytes.
struct PendingWrite {
  uv_write_t req;
  std::string data;
};

}  // namespace

ConnectionHost::ConnectionHost(Metrics& metrics) : metrics_(metrics) {
  uv_loop_init(&loop_);
  timers_.emplace(&loop_);
}

bool ConnectionHost::defer_write(DeferredWriter* w) {
  if (reading_ == 0 && !(writing_deferred_ && w != writing_turn_)) return false;
  if (!w->write_deferred_queued_) {
    w->write_deferred_queued_ = true;
    deferred_writes_.push_back(w);
  }
  return true;
}

void ConnectionHost::forget_write(DeferredWriter* w) {
  if (!w->write_deferred_queued_) return;
  w->write_deferred_queued_ = false;
  for (DeferredWriter*& q : deferred_writes_)
    if (q == w) q = nullptr;
  for (DeferredWriter*& q : writing_now_)
    if (q == w) q = nullptr;
}

void ConnectionHost::write_deferred_writers() {
  writing_now_.swap(deferred_writes_);
  for (size_t i = 0; i < writing_now_.size(); ++i) {
    DeferredWriter* w = writing_now_[i];
    if (!w) continue;
    w->write_deferred_queued_ = false;
    writing_turn_ = w;
    w->write_deferred();
  }
  writing_turn_ = nullptr;
  writing_now_.clear();
}

// Writes what the socket takes now, with send(2) on one buffer (small
// pieces are gathered into one first) and sendmsg(2) on several: for a
// socket they do what libuv's write(2)/writev(2) do, without the file layer
// in between, which costs about a quarter of a microsecond per call on
// loopback (measured with tests/bench/syscall_cost.c). Returns the bytes
// written (0: would block) or a libuv error.
static ssize_t send_now(uv_stream_t* s, const uv_buf_t* parts, unsigned n, size_t total, char* gather,
                        size_t gather_size) {
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(s), &fd) != 0) return UV_EBADF;
  const char* one = parts[0].base;
  if (n > 1 && total <= gather_size) {
    size_t at = 0;
    for (unsigned i = 0; i < n; ++i) {
      std::memcpy(gather + at, parts[i].base, parts[i].len);
      at += parts[i].len;
    }
    one = gather;
  }
  ssize_t r;
  do {
    if (n == 1 || one == gather) {
      r = ::send(fd, one, total, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      msghdr m{};
      m.msg_iov = reinterpret_cast<iovec*>(const_cast<uv_buf_t*>(parts));  // uv_buf_t is an iovec on Unix
      m.msg_iovlen = n;
      r = ::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
  } while (r < 0 && errno == EINTR);
  if (r >= 0) return r;
  return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;  // libuv errors are -errno on Unix
}

int ConnectionHost::write(Conn* c, const uv_buf_t* parts, unsigned n) {
  if (c->tls()) return write_tls(c, parts, n);  // encrypt, then send
  return write_raw(c, parts, n);
}

// Small pieces are encrypted together (one TLS record, one send); the
// ciphertext then leaves by the plain path.
int ConnectionHost::write_tls(Conn* c, const uv_buf_t* parts, unsigned n) {
  if (c->closing()) return UV_ECANCELED;
  size_t total = 0;
  for (unsigned i = 0; i < n; ++i) total += parts[i].len;
  if (n > 1 && total <= kGatherSize) {
    size_t at = 0;
    for (unsigned i = 0; i < n; ++i) {
      std::memcpy(gather_buf_.get() + at, parts[i].base, parts[i].len);
      at += parts[i].len;
    }
    if (!c->tls()->write(gather_buf_.get(), total)) return UV_EPROTO;
  } else {
    for (unsigned i = 0; i < n; ++i)
      if (!c->tls()->write(parts[i].base, parts[i].len)) return UV_EPROTO;
  }
  return flush_tls(c);
}

int ConnectionHost::flush_tls(Conn* c) {
  TlsChannel* t = c->tls();
  if (!t) return 0;
  std::string_view out = t->output();
  if (out.empty()) return 0;
  if (c->closing()) return UV_ECANCELED;
  // Sent from the channel's own buffer: write_raw copies what the socket
  // does not take at once.
  uv_buf_t b = uv_buf_init(const_cast<char*>(out.data()), static_cast<unsigned>(out.size()));
  int rc = write_raw(c, &b, 1);
  t->drop_output();
  return rc;
}

int ConnectionHost::write_raw(Conn* c, const uv_buf_t* parts, unsigned n) {
  if (c->closing()) return UV_ECANCELED;
  uv_stream_t* s = c->stream();
  size_t total = 0;
  for (unsigned i = 0; i < n; ++i) total += parts[i].len;
  ssize_t done = 0;
  // Nothing queued and not connecting: the bytes may go out now, in order.
  if (s->write_queue_size == 0 && !c->connecting() && total > 0) {
    done = send_now(s, parts, n, total, gather_buf_.get(), kGatherSize);
    if (done < 0) return static_cast<int>(done);
  }
  if (static_cast<size_t>(done) == total) return 0;
  auto* pw = new PendingWrite;
  pw->data.reserve(total - done);
  size_t skip = static_cast<size_t>(done);
  for (unsigned i = 0; i < n; ++i) {
    if (skip >= parts[i].len) {
      skip -= parts[i].len;
      continue;
    }
    pw->data.append(parts[i].base + skip, parts[i].len - skip);
    skip = 0;
  }
  pw->req.data = c;
  uv_buf_t b = uv_buf_init(pw->data.data(), static_cast<unsigned>(pw->data.size()));
  int rc = uv_write(&pw->req, s, &b, 1, [](uv_write_t* req, int status) {
    auto* pw = reinterpret_cast<PendingWrite*>(req);
    Conn* c = static_cast<Conn*>(req->data);
    delete pw;
    c->on_write_done(status);
  });
  if (rc != 0) {
    delete pw;
    return rc;
  }
  return 0;
}

}  // namespace onelayer
