// StringWrite: one uv_write of bytes it owns until libuv is done with them,
// for the listeners that write each response whole with plain libuv (the
// admin server, the demo upstream; proxied connections write through
// ConnectionHost). The owner counts what it has in flight and decides, in
// its Done callback, what a completed or failed write means for it.
// Header-only and depending on libuv alone, as HandleWrap, so the demo
// upstream uses it too.
#pragma once

#include <uv.h>

#include <string>
#include <type_traits>
#include <utility>

namespace onelayer {

class StringWrite {
 public:
  // Queues `data` on `stream`; Done(owner, status) runs once it is written
  // (0) or failed (a negative libuv error). When it cannot be queued, the
  // negative libuv error is returned and Done never runs.
  template <class Owner, void (*Done)(Owner*, int)>
  static int start(uv_stream_t* stream, std::string data, Owner* owner) {
    auto* w = new StringWrite(std::move(data), owner);
    uv_buf_t buf = uv_buf_init(w->data_.data(), static_cast<unsigned>(w->data_.size()));
    int rc = uv_write(&w->req_, stream, &buf, 1, [](uv_write_t* req, int status) {
      auto* o = static_cast<Owner*>(req->data);
      delete of(req);
      Done(o, status);
    });
    if (rc < 0) delete w;
    return rc;
  }

 private:
  StringWrite(std::string data, void* owner) : data_(std::move(data)) { req_.data = owner; }
  // req_ is the first member of a standard-layout class: the request's
  // address is the write's.
  static StringWrite* of(uv_write_t* req);

  uv_write_t req_{};
  std::string data_;
};

inline StringWrite* StringWrite::of(uv_write_t* req) {
  static_assert(std::is_standard_layout_v<StringWrite>);
  return reinterpret_cast<StringWrite*>(req);
}

}  // namespace onelayer
