#include "core/base/grpc_timeout.h"

#include <array>
#include <cstdint>

namespace onelayer {
namespace {

constexpr int64_t kMaxValue = 99'999'999;  // 8 digits

struct Unit {
  char letter;
  int64_t nanos;
};
// Finest first: format_grpc_timeout takes the first that fits.
constexpr std::array<Unit, 6> kUnits = {{{'n', 1},
                                         {'u', 1'000},
                                         {'m', 1'000'000},
                                         {'S', 1'000'000'000},
                                         {'M', 60'000'000'000},
                                         {'H', 3'600'000'000'000}}};

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace

std::optional<Millis> parse_grpc_timeout(std::string_view value) {
  if (value.size() < 2 || value.size() > 9) return std::nullopt;
  const std::string_view digits = value.substr(0, value.size() - 1);
  int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  // 99999999 hours in milliseconds is about 3.6e14: no overflow anywhere.
  switch (value.back()) {
    case 'H': return Millis{v * 3'600'000};
    case 'M': return Millis{v * 60'000};
    case 'S': return Millis{v * 1'000};
    case 'm': return Millis{v};
    case 'u': return Millis{ceil_div(v, 1'000)};
    case 'n': return Millis{ceil_div(v, 1'000'000)};
    default: return std::nullopt;
  }
}

std::string format_grpc_timeout(std::chrono::nanoseconds left) {
  const int64_t ns = left.count();
  if (ns <= 0) return "0n";
  for (const Unit& u : kUnits) {
    const int64_t v = ns / u.nanos;
    if (v <= kMaxValue) return std::to_string(v) + u.letter;
  }
  return std::to_string(kMaxValue) + 'H';
}

}  // namespace onelayer
