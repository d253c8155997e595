#include "core/grpc/grpc_pushback.h"

#include <algorithm>

#include "core/http/http_headers.h"
#include "core/http/retry_after.h"

namespace onelayer {

GrpcPushback parse_grpc_pushback(std::string_view value) {
  const std::string_view v = trim_ows(value);
  if (v.empty()) return GrpcPushback{true, Millis{0}};
  int64_t ms = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return GrpcPushback{true, Millis{0}};
    if (ms < kRetryAfterSaturation.count()) ms = ms * 10 + (c - '0');
  }
  return GrpcPushback{false, std::min(Millis{ms}, kRetryAfterSaturation)};
}

}  // namespace onelayer
