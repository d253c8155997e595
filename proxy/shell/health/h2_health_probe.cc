#include "shell/health/h2_health_probe.h"

namespace onelayer {

H2HealthProbe::H2HealthProbe(std::string_view scheme, std::string_view authority, std::string_view path)
    : session_(H2Session::Role::client, this) {
  request_.method = "GET";
  request_.scheme = scheme;
  request_.authority = authority;
  request_.path = path;
  request_.fields.push_back({"user-agent", "onelayer-health-check"});
}

std::string H2HealthProbe::start() {
  std::string out;
  stream_ = session_.submit_request(request_, true);
  if (stream_ <= 0) decide(false);
  session_.flush(out);
  return out;
}

void H2HealthProbe::feed(const char* data, size_t len, uint64_t now_ms, std::string& out) {
  session_.recv(reinterpret_cast<const uint8_t*>(data), len, now_ms);
  session_.flush(out);
  if (session_.want_close()) decide(false);  // a connection error before the answer
}

void H2HealthProbe::on_head(int32_t stream, H2Session::Head& head, bool) {
  if (stream != stream_) return;
  status_ = head.status;
  decide(head.status >= 200 && head.status < 300);
}

// The body is not read: a connection closed after the verdict frees it.
void H2HealthProbe::on_data(int32_t stream, const uint8_t*, size_t len) { session_.consume(stream, len); }

void H2HealthProbe::on_reset(int32_t stream, uint32_t) {
  if (stream == stream_) decide(false);
}

void H2HealthProbe::decide(bool passed) {
  if (verdict_ == Verdict::pending) verdict_ = passed ? Verdict::passed : Verdict::failed;
}

}  // namespace onelayer
