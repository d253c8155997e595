#include "shell/io/string_write.h"

#include <utility>

namespace onelayer {

int StringWrite::start(uv_stream_t* stream, std::string data, void* owner, Done done) {
  auto* w = new StringWrite(std::move(data), owner, done);
  uv_buf_t buf = uv_buf_init(w->data_.data(), static_cast<unsigned>(w->data_.size()));
  const int r = uv_write(&w->req_, stream, &buf, 1, on_write);
  if (r < 0) delete w;
  return r;
}

void StringWrite::on_write(uv_write_t* req, int status) {
  auto* w = reinterpret_cast<StringWrite*>(req);
  void* owner = w->owner_;
  Done done = w->done_;
  delete w;
  done(owner, status);
}

}  // namespace onelayer
