// Randomness as an input: every decision that draws a number (jitter,
// balancing, hedging) takes a Random&, so tests can script the sequence.
// The shell gives each worker a DefaultRandom (default_random.h).
#pragma once

#include <cstdint>

namespace onelayer {

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

}  // namespace onelayer
