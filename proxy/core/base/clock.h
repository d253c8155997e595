// Time and randomness as inputs. The core never reads a clock or seeds a
// generator itself: the shell passes `now` and a Random, so tests can use
// hand-made time points and a scripted sequence of numbers.
#pragma once

#include <chrono>
#include <cstdint>

namespace onelayer {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Millis = std::chrono::milliseconds;

// Random source passed in by reference so tests can script it.
class Random {
 public:
  virtual ~Random() = default;
  virtual uint64_t next() = 0;

  // [0,1) from the top 53 bits of next().
  double uniform();
  // Inclusive range; lo > hi gives lo. Computed as lo + next() % (hi-lo+1):
  // the modulo bias is below 2^-32 for the spans used here (milliseconds),
  // and a scripted next() maps to an exact, predictable value.
  int64_t between(int64_t lo, int64_t hi);
};

// xoshiro256** (Blackman/Vigna), state filled by splitmix64. Not
// thread-safe: one per worker.
class DefaultRandom final : public Random {
 public:
  DefaultRandom();                       // seeded from std::random_device
  explicit DefaultRandom(uint64_t seed);  // reproducible sequences
  uint64_t next() override;

 private:
  uint64_t s_[4];
};

}  // namespace onelayer
