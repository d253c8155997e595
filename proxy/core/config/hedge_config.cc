#include "core/config/hedge_config.h"

#include "core/config/units.h"

namespace onelayer {

std::string latency_threshold_text(const LatencyThreshold& t) {
  if (t.percentile != 0) return "p" + std::to_string(t.percentile);
  return format_duration(t.fixed);
}

bool parse_latency_percentile(const std::string& text, LatencyThreshold& out) {
  for (uint8_t p : {50, 90, 95, 99}) {
    if (text == "p" + std::to_string(p)) {
      out.percentile = p;
      out.fixed = Millis{0};
      return true;
    }
  }
  return false;
}

}  // namespace onelayer
