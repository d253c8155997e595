#include "shell/transparent/transparent_host.h"

namespace onelayer {

// One host per worker thread: a connection only ever runs on its own.
static thread_local TransparentHost* this_thread_host = nullptr;

TransparentHost* TransparentHost::for_this_thread() { return this_thread_host; }

void TransparentHost::set_for_this_thread(TransparentHost* host) { this_thread_host = host; }

TransparentConn* TransparentHost::transparent_state(const Http1ServerConnection* d) const {
  auto it = conns_.find(d);
  return it == conns_.end() ? nullptr : it->second.get();
}

TransparentConn& TransparentHost::add_transparent(const Http1ServerConnection* d) {
  std::unique_ptr<TransparentConn>& t = conns_[d];
  t = std::make_unique<TransparentConn>();
  return *t;
}

void TransparentHost::forget_transparent(const Http1ServerConnection* d) { conns_.erase(d); }

}  // namespace onelayer
