// One write of a string on a libuv stream, the string kept alive until
// libuv is done with it: for the small servers that answer with a whole
// response at a time (the admin listener, the demo upstream), not for the
// proxy's connections, which write through ConnectionHost.
#pragma once

#include <uv.h>

#include <string>

namespace onelayer {

class StringWrite {
 public:
  // Called once libuv is done with the write: `status` is 0 or a libuv
  // error. The write has been freed by then.
  using Done = void (*)(void* owner, int status);

  // Starts writing `data` on `stream`. 0, and `done(owner, status)` later;
  // or uv_write's error now, with nothing left to free and `done` never
  // called.
  static int start(uv_stream_t* stream, std::string data, void* owner, Done done);

 private:
  StringWrite(std::string data, void* owner, Done done) : data_(std::move(data)), owner_(owner), done_(done) {}
  static void on_write(uv_write_t* req, int status);

  uv_write_t req_{};  // first: libuv hands back its address
  std::string data_;
  void* owner_;
  Done done_;
};

}  // namespace onelayer
