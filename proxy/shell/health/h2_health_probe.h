// One active health check spoken in HTTP/2 (h2c, h2, and `auto` endpoints
// whose handshake chose h2): the client preface, SETTINGS and one
// `GET <path>` on stream 1, then a verdict from the response head, judged
// as the HTTP/1.1 checks are (a 2xx status passes; another status, a reset
// stream or a connection error fails). No I/O: the health checker writes
// what it is given and feeds what it reads (H2Session does the framing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "shell/http2/h2_session.h"

namespace onelayer {

class H2HealthProbe final : private H2Session::Handler {
 public:
  enum class Verdict { pending, passed, failed };

  // `scheme`: http (h2c) or https (h2); `authority`: the endpoint, as the
  // HTTP/1.1 check's Host.
  H2HealthProbe(std::string_view scheme, std::string_view authority, std::string_view path);

  // The bytes to send first: the preface, our SETTINGS and the request.
  std::string start();
  // Bytes read from the peer; what the session answers (SETTINGS ACK,
  // WINDOW_UPDATE) is appended to `out`.
  void feed(const char* data, size_t len, uint64_t now_ms, std::string& out);
  Verdict verdict() const { return verdict_; }
  int status() const { return status_; }

 private:
  void on_head(int32_t stream, H2Session::Head& head, bool end_stream) override;
  void on_data(int32_t stream, const uint8_t* data, size_t len) override;
  void on_trailers(int32_t, Headers&) override {}
  void on_end(int32_t) override {}
  void on_reset(int32_t stream, uint32_t error_code) override;
  void on_closed(int32_t) override {}
  void on_goaway(int32_t, uint32_t) override {}
  void decide(bool passed);

  H2Session session_;
  H2Session::Head request_;
  int32_t stream_ = 0;
  int status_ = 0;
  Verdict verdict_ = Verdict::pending;
};

}  // namespace onelayer
