// The pool's bookkeeping, kept apart from the connections it holds: the
// two arrays of the idle pool move together.
#include "shell/stream/endpoint_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace onelayer {

void EndpointPool::forget(Http1ClientConnection* u) {
  auto it = std::find(idle.begin(), idle.end(), u);
  if (it != idle.end()) unpool(static_cast<size_t>(it - idle.begin()));
  it = std::find(waiting.begin(), waiting.end(), u);
  if (it != waiting.end()) waiting.erase(it);
}

void EndpointPool::pool(Http1ClientConnection* u, uint64_t client) {
  idle.push_back(u);
  idle_clients.push_back(client);
}

void EndpointPool::unpool(size_t k) {
  idle.erase(idle.begin() + static_cast<std::ptrdiff_t>(k));
  idle_clients.erase(idle_clients.begin() + static_cast<std::ptrdiff_t>(k));
}

void EndpointPool::learn_alpn(Alpn chosen) {
  if (chosen == alpn) return;
  spdlog::info("upstream {}: ALPN chose {} (protocol auto){}", label, chosen == Alpn::h2 ? "h2" : "http/1.1",
               alpn == Alpn::unknown ? "" : ", not what it chose before");
  alpn = chosen;
}

}  // namespace onelayer
