// What a transparent listener's connection carries besides a Http1ServerConnection's
// usual state: its original destination, whether its first bytes are still
// being looked at, and its passthrough tunnel once it has one. Kept by the
// worker beside the connection (TransparentHost::transparent_state), so that
// connections of proxy listeners pay nothing for it.
#pragma once

#include <cstdint>
#include <memory>

#include "core/base/destination.h"
#include "shell/transparent/passthrough.h"

namespace onelayer {

struct TransparentConn {
  Destination dst;
  bool detecting = true;
  uint64_t idle_ms = 0;
  std::unique_ptr<Passthrough> tunnel;
};

}  // namespace onelayer
