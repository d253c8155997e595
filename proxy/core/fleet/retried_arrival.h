// Cross-layer counting for fleet budgets: whether a request arriving on a
// listener was already retried by some layer before it (docs/fleet.md).
// Such arrivals count as "other layer" retries against the fleet budget of
// the service the listener fronts, so the instances calling that service
// spend less. Pure.
#pragma once

#include <string_view>

#include "core/http/http_headers.h"

namespace onelayer::fleet {

// x-retry-attempt (its configured name) above 1, grpc-previous-rpc-attempts
// above 0 or x-envoy-attempt-count above 1. A hidden retry (found by
// HiddenRetryDetector) counts too; the shell adds that verdict.
bool arrival_was_retried(const Headers& h, std::string_view retry_attempt_header);

}  // namespace onelayer::fleet
