// The process: loads the config, binds listeners (one SO_REUSEPORT socket per
// worker), runs the workers and the admin listener, and handles SIGHUP
// (reload) and SIGTERM/SIGINT (drain).
#pragma once

#include <string>

namespace onelayer {

struct ServerOptions {
  std::string config_path = "config/onelayer.yaml";
  std::string ports_file;  // written once everything is bound: "<listener> <port>" lines and "admin <port>"
};

// Runs until drained. Returns the process exit code: 0 after a clean drain,
// 1 when the config cannot be loaded or bound, 3 when drain_timeout cut
// connections short.
int run_server(const ServerOptions& opts);

}  // namespace onelayer
