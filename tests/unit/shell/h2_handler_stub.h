// An H2Session::Handler that ignores every event, for tests that care
// about a few (they override those).
#pragma once

#include "shell/http2/h2_session.h"

namespace onelayer::test {

class H2HandlerStub : public H2Session::Handler {
 public:
  void on_head(int32_t, H2Session::Head&, bool) override {}
  void on_data(int32_t, const uint8_t*, size_t) override {}
  void on_trailers(int32_t, Headers&) override {}
  void on_end(int32_t) override {}
  void on_reset(int32_t, uint32_t) override {}
  void on_closed(int32_t) override {}
  void on_goaway(int32_t, uint32_t) override {}
};

}  // namespace onelayer::test
