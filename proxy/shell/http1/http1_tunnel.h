// A byte tunnel's one step, shared by Upgrade tunnels (shell/proxy/exchange_tunnel.cc, after a
// 101) and transparent passthrough (shell/transparent/passthrough.h): bytes
// read from one side are written to the other, and the side that read
// stops reading while the other's write queue is above kTunnelHighWater.
#pragma once

#include <cstddef>

namespace onelayer {

class Conn;

inline constexpr size_t kTunnelHighWater = 256 * 1024;
// Passthrough resumes the paused side once the queue is down to this.
inline constexpr size_t kTunnelLowWater = 64 * 1024;

enum class TunnelWrite {
  failed,  // the write failed: the tunnel ends
  ok,
  full,    // written, but `to`'s queue is above high water: stop reading the other side
};

// Writes on `to` through its own host.
TunnelWrite tunnel_write(Conn* to, const char* data, size_t len);

}  // namespace onelayer
