// Upgrade tunnels' and passthrough's one step (http1_tunnel.h): bytes
// written to one side, and whether its queue is now above high water. The
// exchange's side of an Upgrade tunnel is shell/proxy/exchange_tunnel.cc.
#include <spdlog/spdlog.h>

#include "shell/http1/http1_server_connection.h"
#include "shell/http1/http1_tunnel.h"
#include "shell/http1/http1_client_connection.h"

namespace onelayer {

TunnelWrite tunnel_write(Conn* to, const char* data, size_t len) {
  uv_buf_t b = uv_buf_init(const_cast<char*>(data), static_cast<unsigned>(len));
  if (to->host()->write(to, &b, 1) < 0) return TunnelWrite::failed;
  return to->write_queue() > kTunnelHighWater ? TunnelWrite::full : TunnelWrite::ok;
}

}  // namespace onelayer
