#include "core/request/request_deadline.h"

#include <algorithm>

#include "core/grpc/grpc_protocol.h"
#include "core/base/grpc_timeout.h"

namespace onelayer {

std::optional<Millis> incoming_grpc_timeout(const Headers& h) {
  std::optional<Millis> best;
  for (const Header& f : h) {
    if (!iequals(f.name, kGrpcTimeoutField)) continue;
    const std::optional<Millis> t = parse_grpc_timeout(f.value);
    if (t && (!best || *t < *best)) best = t;
  }
  return best;
}

Millis request_timeout(Millis route_timeout, const Headers& h, const HeaderNames& names) {
  Millis timeout = route_timeout;
  if (auto ms = incoming_timeout_ms(h, names)) timeout = std::min(timeout, Millis{*ms});
  if (auto grpc = incoming_grpc_timeout(h)) timeout = std::min(timeout, *grpc);
  return timeout;
}

}  // namespace onelayer
