#include "shell/server/worker_listener.h"

namespace onelayer {

std::atomic<size_t> WorkerListener::live_{0};

WorkerListener::WorkerListener(Worker* w, std::string name) : ServerListener(std::move(name)), worker_(w) {
  live_.fetch_add(1, std::memory_order_relaxed);
}

WorkerListener::~WorkerListener() { live_.fetch_sub(1, std::memory_order_relaxed); }

WorkerListener* WorkerListener::open(Worker* w, uv_loop_t* loop, std::string name, int fd,
                                     uv_connection_cb on_connection, int* err) {
  auto* l = new WorkerListener(w, std::move(name));
  uv_tcp_init(loop, &l->tcp_);
  l->tcp_.data = l;
  int rc = uv_tcp_open(&l->tcp_, fd);
  if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&l->tcp_), 1024, on_connection);
  if (rc != 0) {
    *err = rc;
    l->close();  // frees it once the handle has closed
    return nullptr;
  }
  return l;
}

void WorkerListener::close() {
  if (state_ != State::listening) return;
  state_ = State::closing;
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), on_handle_closed);
}

void WorkerListener::on_handle_closed(uv_handle_t* h) {
  auto* l = static_cast<WorkerListener*>(h->data);
  l->state_ = State::closed;
  l->free_if_unused();
}

void WorkerListener::connection_closed() {
  --connections_;
  free_if_unused();
}

void WorkerListener::free_if_unused() {
  if (state_ == State::closed && connections_ == 0) delete this;
}

}  // namespace onelayer
