// `onelayer fleet --redis ADDR [--service NAME]`: prints the fleet view of
// every service (or one) straight from Redis, as GET /fleet does from one
// instance. Blocking: a command-line tool, never part of the proxy.
#pragma once

namespace onelayer::fleet {

// argv after "fleet"; returns the process exit code.
int run_fleet_cli(int argc, char** argv);

}  // namespace onelayer::fleet
