#include "shell/proxy/endpoint_log.h"

#include <spdlog/spdlog.h>

#include "core/config/units.h"

namespace onelayer {

void log_endpoint_event(std::string_view upstream, std::string_view endpoint, const OutlierDetector::Event& ev,
                        uint32_t checks) {
  using Kind = OutlierDetector::Event::Kind;
  using Reason = OutlierDetector::Reason;
  if (ev.kind == Kind::ejected && ev.reason == Reason::health_check) {
    spdlog::warn("upstream {}: endpoint {} ejected (health_check: {} failed checks in a row), until checks pass",
                 upstream, endpoint, checks);
  } else if (ev.kind == Kind::ejected) {
    spdlog::warn("upstream {}: endpoint {} ejected for {} ({}, ejection {} in a row)", upstream, endpoint,
                 format_duration(ev.duration), reason_name(ev.reason), ev.in_a_row);
  } else if (ev.kind == Kind::returned && checks > 0) {
    spdlog::info("upstream {}: endpoint {} returned (health_check: {} passed checks in a row)", upstream, endpoint,
                 checks);
  } else if (ev.kind == Kind::returned) {
    spdlog::info("upstream {}: endpoint {} returned (probe succeeded)", upstream, endpoint);
  }
}

}  // namespace onelayer
