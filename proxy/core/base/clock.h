// Time as an input. The core never reads a clock itself: the shell passes
// `now`, so tests can use hand-made time points. Randomness comes the same
// way, as a Random& (random.h).
#pragma once

#include <chrono>

namespace onelayer {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Millis = std::chrono::milliseconds;

}  // namespace onelayer
