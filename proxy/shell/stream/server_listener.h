// What a server codec sees of the listener a client connection came in on:
// its name, its count of connections and the metrics of the requests it
// answered before a route matched. The worker's WorkerListener
// (shell/server) is one; the codecs keep a pointer to it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace onelayer {

struct RouteMetrics;

class ServerListener {
 public:
  const std::string& name() const { return name_; }
  uint32_t connections() const { return connections_; }
  // Requests answered before a route matched, counted under this listener.
  RouteMetrics*& unrouted() { return unrouted_; }

 protected:
  explicit ServerListener(std::string name) : name_(std::move(name)) {}
  ~ServerListener() = default;

  std::string name_;
  RouteMetrics* unrouted_ = nullptr;
  uint32_t connections_ = 0;
};

}  // namespace onelayer
