// Every TLS context a config asks for, built at start, on `--check` and on
// every reload: a TlsClientContext per upstream and a TlsServerContext per
// listener with a `tls` block. A file that cannot be loaded is a config
// error naming the key.
#pragma once

#include <memory>
#include <vector>

#include "core/config/config.h"
#include "core/config/config_loader.h"
#include "shell/tls/tls_client_context.h"
#include "shell/tls/tls_server_context.h"

namespace onelayer {

// By Config index; nullptr where the upstream or listener has no `tls`.
struct TlsContexts {
  std::vector<std::shared_ptr<TlsClientContext>> upstreams;
  std::vector<std::shared_ptr<TlsServerContext>> listeners;
};

// Builds every context `cfg` asks for. Returns the problems (empty: all
// loaded), each naming the key, e.g. "upstreams[0].tls.ca_file: cannot load
// \"ca.pem\": no such file". Warns once per upstream with `verify: false`.
std::vector<ConfigError> build_tls_contexts(const Config& cfg, TlsContexts& out);

}  // namespace onelayer
