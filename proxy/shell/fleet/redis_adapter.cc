#include "shell/fleet/redis_adapter.h"

#include <cstdlib>
#include <new>

#include <hiredis/hiredis.h>

namespace onelayer::fleet {
namespace {

struct Events {
  redisAsyncContext* context = nullptr;
  uv_poll_t handle{};
  int events = 0;
  void (*on_oversize)(redisAsyncContext*, void*) = nullptr;
  void* data = nullptr;
};

// hiredis's own reply builders, wrapped with the bounds below.
redisReplyObjectFunctions* g_defaults = nullptr;

void* bounded_string(const redisReadTask* task, char* s, size_t len) {
  if (len > kMaxString) return nullptr;  // hiredis: protocol error, disconnect
  return g_defaults->createString(task, s, len);
}

void* bounded_array(const redisReadTask* task, int elements) {
  if (elements < 0 || elements > kMaxElements) return nullptr;
  return g_defaults->createArray(task, elements);
}

void* pass_integer(const redisReadTask* task, long long v) { return g_defaults->createInteger(task, v); }
void* pass_nil(const redisReadTask* task) { return g_defaults->createNil(task); }
void pass_free(void* obj) { g_defaults->freeObject(obj); }

redisReplyObjectFunctions g_bounded = {bounded_string, bounded_array, pass_integer, pass_nil, pass_free};

void on_poll(uv_poll_t* handle, int status, int events) {
  auto* p = static_cast<Events*>(handle->data);
  if (p->context == nullptr) return;
  // A socket error (a refused connect, a reset) comes as a status, with
  // libuv no longer polling: hiredis finds the error itself when it reads
  // or writes, so hand it the events it was waiting for. Ignored, the link
  // would sit until the sync deadline and be counted a timeout.
  if (status != 0) events = p->events;
  if (events & UV_READABLE) {
    redisAsyncHandleRead(p->context);
    // The read may have freed the context (an error disconnects it).
    if (p->context != nullptr && p->context->c.reader != nullptr &&
        p->context->c.reader->len - p->context->c.reader->pos > kMaxReplyBuffer) {
      p->on_oversize(p->context, p->data);
      return;  // the owner freed the context: `p` is closing
    }
  }
  if (p->context != nullptr && (events & UV_WRITABLE)) redisAsyncHandleWrite(p->context);
}

void update(Events* p) {
  if (p->events != 0) {
    uv_poll_start(&p->handle, p->events, on_poll);
  } else {
    uv_poll_stop(&p->handle);
  }
}

void add_read(void* d) {
  auto* p = static_cast<Events*>(d);
  p->events |= UV_READABLE;
  update(p);
}
void del_read(void* d) {
  auto* p = static_cast<Events*>(d);
  p->events &= ~UV_READABLE;
  update(p);
}
void add_write(void* d) {
  auto* p = static_cast<Events*>(d);
  p->events |= UV_WRITABLE;
  update(p);
}
void del_write(void* d) {
  auto* p = static_cast<Events*>(d);
  p->events &= ~UV_WRITABLE;
  update(p);
}
void cleanup(void* d) {
  auto* p = static_cast<Events*>(d);
  p->context = nullptr;  // the context is being freed
  uv_close(reinterpret_cast<uv_handle_t*>(&p->handle), [](uv_handle_t* h) { delete static_cast<Events*>(h->data); });
}

}  // namespace

bool redis_attach(redisAsyncContext* ac, uv_loop_t* loop, void (*on_oversize)(redisAsyncContext*, void*),
                  void* data) {
  if (ac->ev.data != nullptr || ac->c.reader == nullptr) return false;
  if (g_defaults == nullptr) g_defaults = ac->c.reader->fn;  // the same static table for every context
  ac->c.reader->fn = &g_bounded;
  auto* p = new (std::nothrow) Events;
  if (p == nullptr) return false;
  if (uv_poll_init(loop, &p->handle, ac->c.fd) != 0) {
    delete p;
    return false;
  }
  p->context = ac;
  p->on_oversize = on_oversize;
  p->data = data;
  p->handle.data = p;
  ac->ev.addRead = add_read;
  ac->ev.delRead = del_read;
  ac->ev.addWrite = add_write;
  ac->ev.delWrite = del_write;
  ac->ev.cleanup = cleanup;
  ac->ev.data = p;
  return true;
}

}  // namespace onelayer::fleet
