// The log line of an endpoint's ejection or return (docs/endpoint-health.md).
#pragma once

#include <string_view>

#include "core/upstream/outlier_detector.h"

namespace onelayer {

// Logs nothing for Kind::none. `checks` is the count of checks behind a
// health-check verdict (unhealthy or healthy), 0 otherwise.
void log_endpoint_event(std::string_view upstream, std::string_view endpoint, const OutlierDetector::Event& ev,
                        uint32_t checks = 0);

}  // namespace onelayer
