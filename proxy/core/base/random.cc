#include "core/base/random.h"

namespace onelayer {

double Random::uniform() {
  // 53 random bits scaled by 2^-53: every value is exactly representable.
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

int64_t Random::between(int64_t lo, int64_t hi) {
  if (lo >= hi) return lo;
  // Unsigned arithmetic: hi - lo may not fit in int64_t.
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
  const uint64_t r = span == 0 ? next() : next() % span;  // span 0: the full 2^64 range
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + r);
}

}  // namespace onelayer
