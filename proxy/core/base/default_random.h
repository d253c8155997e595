// The generator the shell gives each worker: xoshiro256** (Blackman/Vigna),
// state filled by splitmix64. Not thread-safe: one per worker.
#pragma once

#include <cstdint>

#include "core/base/random.h"

namespace onelayer {

class DefaultRandom final : public Random {
 public:
  DefaultRandom();                       // seeded from std::random_device
  explicit DefaultRandom(uint64_t seed);  // reproducible sequences
  uint64_t next() override;

 private:
  uint64_t s_[4];
};

}  // namespace onelayer
