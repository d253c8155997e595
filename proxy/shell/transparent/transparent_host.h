// TransparentHost: what a transparent listener's connection
// (transparent_down.cc) needs of the worker that runs it: the config
// generation in force, the passthrough counters, and the state kept
// beside each such connection (TransparentConn), so that connections of
// proxy listeners pay nothing for it. In the proxy the Worker is the one
// host; it makes itself its thread's host (set_for_this_thread) for as long
// as its loop runs, which is where a connection finds it.
#pragma once

#include <memory>
#include <unordered_map>

#include "shell/proxy/runtime.h"
#include "shell/transparent/transparent_conn.h"

namespace onelayer {

class Http1ServerConnection;

class TransparentHost {
 public:
  TransparentHost(const TransparentHost&) = delete;
  TransparentHost& operator=(const TransparentHost&) = delete;

  // The host of the connections this thread runs (null: none).
  static TransparentHost* for_this_thread();
  static void set_for_this_thread(TransparentHost* host);

  // The generation in force, refreshed when it changed.
  virtual const GenerationPtr& generation() = 0;
  TransparentCounters& transparent_counters() const { return counters_; }

  // A transparent listener's connection's own state (null for others).
  TransparentConn* transparent_state(const Http1ServerConnection* d) const;
  TransparentConn& add_transparent(const Http1ServerConnection* d);
  void forget_transparent(const Http1ServerConnection* d);

 protected:
  explicit TransparentHost(TransparentCounters& counters) : counters_(counters) {}
  ~TransparentHost() = default;

 private:
  TransparentCounters& counters_;
  std::unordered_map<const Http1ServerConnection*, std::unique_ptr<TransparentConn>> conns_;
};

}  // namespace onelayer
