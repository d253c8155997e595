// The configuration of hedged requests and deadline-aware retries
// (`retry.hedge`, `retry.min_time_left`): plain values, part of a route's
// RetryPolicy.
#pragma once

#include <cstdint>
#include <string>

#include "core/base/clock.h"

namespace onelayer {

// A duration, fixed or read from an upstream's recent latency: "50ms", or
// "p50" | "p90" | "p95" | "p99".
struct LatencyThreshold {
  Millis fixed{0};
  uint8_t percentile = 0;  // 50, 90, 95 or 99; 0: `fixed`
  bool operator==(const LatencyThreshold&) const = default;
};

// "p95", or the duration as the config writes durations.
std::string latency_threshold_text(const LatencyThreshold&);
// Parses "p50|p90|p95|p99" (percentile set, true). Anything else: false.
bool parse_latency_percentile(const std::string& text, LatencyThreshold& out);

struct HedgeConfig {
  bool enabled = false;  // a `hedge:` block was given
  LatencyThreshold after{Millis{0}, 95};
  uint32_t max = 1;  // hedges per request (max_attempts bounds all attempts too)
  bool operator==(const HedgeConfig&) const = default;
};

}  // namespace onelayer
