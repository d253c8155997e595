// The rule for a fleet service name (`fleet.service`, an upstream's name
// when it is the service): safe inside a Redis key and a metric label. The
// config loader checks names with it, and the fleet builds its keys from
// names that passed.
#pragma once

#include <string_view>

namespace onelayer::fleet {

// 1-64 of [A-Za-z0-9._-].
bool valid_service_name(std::string_view s);

}  // namespace onelayer::fleet
