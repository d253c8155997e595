#include "core/hedging/hedge_config.h"

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

std::optional<Millis> resolve(const LatencyThreshold& t, const LatencyWindow& w, TimePoint now) {
  if (t.percentile == 0) return t.fixed;
  std::optional<Micros> q = w.quantile(t.percentile / 100.0, now);
  if (!q) return std::nullopt;
  const int64_t ms = (q->count() + 999) / 1000;
  return Millis(ms < 1 ? 1 : ms);
}

}  // namespace onelayer
