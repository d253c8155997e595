#include "core/config/config.h"

#include <algorithm>

namespace onelayer {

std::string HostPort::to_string() const {
  // Only IPv6 literals contain ':'; they need brackets so the port stays
  // unambiguous ("[::1]:80").
  std::string out;
  if (host.find(':') != std::string::npos) {
    out = "[" + host + "]";
  } else {
    out = host;
  }
  out += ':';
  out += std::to_string(port);
  return out;
}

bool RetryOn::has_status(int code) const {
  return std::find(statuses.begin(), statuses.end(), code) != statuses.end();
}

bool RetryOn::has_grpc_status(GrpcStatus s) const {
  return std::find(grpc_statuses.begin(), grpc_statuses.end(), s) != grpc_statuses.end();
}

const Upstream* Config::find_upstream(std::string_view name) const {
  for (const Upstream& u : upstreams) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

bool Config::same_settings(const Config& other) const {
  // Keep in step with the fields of Config (source_path/source_text excluded).
  return layer_id == other.layer_id && admin_listen == other.admin_listen &&
         admin_token_file == other.admin_token_file &&
         admin_allow_remote_mutations == other.admin_allow_remote_mutations &&
         workers == other.workers && drain_timeout == other.drain_timeout &&
         propagate_baggage == other.propagate_baggage && via == other.via &&
         x_forwarded_for == other.x_forwarded_for && headers == other.headers &&
         listeners == other.listeners && upstreams == other.upstreams && fleet == other.fleet;
}

}  // namespace onelayer
