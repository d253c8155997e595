#include "core/fleet/retried_arrival.h"

#include <charconv>
#include <cstdint>

namespace onelayer::fleet {
namespace {

// The header's value as a whole decimal number; 0 when absent or not one.
uint64_t number_of(const Headers& h, std::string_view name) {
  const Header* v = find_header(h, name);
  if (v == nullptr) return 0;
  uint64_t n = 0;
  const char* end = v->value.data() + v->value.size();
  auto [p, ec] = std::from_chars(v->value.data(), end, n);
  return ec == std::errc() && p == end ? n : 0;
}

}  // namespace

bool arrival_was_retried(const Headers& h, std::string_view retry_attempt_header) {
  return number_of(h, retry_attempt_header) > 1 || number_of(h, "grpc-previous-rpc-attempts") > 0 ||
         number_of(h, "x-envoy-attempt-count") > 1;
}

}  // namespace onelayer::fleet
