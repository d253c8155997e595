#include "core/config/service_name.h"

namespace onelayer::fleet {

bool valid_service_name(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return false;
  return true;
}

}  // namespace onelayer::fleet
