// onelayer: a sidecar HTTP/1.1 reverse proxy where exactly one layer retries.
#include <cstdio>
#include <cstring>
#include <string>

#include <nghttp2/nghttp2.h>

#include "core/config/config_loader.h"
#include "shell/fleet/fleet_cli.h"
#include "shell/admin/admin_server.h"
#include "shell/io/logging.h"
#include "shell/server/server.h"
#include "shell/tls/tls_contexts.h"

static void usage(FILE* out) {
  std::fprintf(out,
               "usage: onelayer [--config FILE] [--check] [--version]\n"
               "                [--log-level trace|debug|info|warn|error] [--log-format text|json]\n"
               "                [--ports-file FILE]\n"
               "       onelayer fleet --redis HOST:PORT [--service NAME]   (the fleet budgets' view)\n"
               "  --config FILE      configuration (default config/onelayer.yaml)\n"
               "  --check            validate the configuration, print every error, exit 0/1\n"
               "  --ports-file FILE  after binding, write '<listener> <port>' lines and 'admin <port>'\n");
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "fleet") == 0) return onelayer::fleet::run_fleet_cli(argc - 2, argv + 2);
  onelayer::ServerOptions opts;
  bool check = false;
  std::string level = "info";
  std::string format = "text";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "onelayer: %s needs a value\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--config" || a == "-c") {
      opts.config_path = value("--config");
    } else if (a == "--check") {
      check = true;
    } else if (a == "--version") {
#ifdef ONELAYER_MIMALLOC
      std::printf("onelayer %s (allocator: mimalloc)\n", ONELAYER_VERSION);
#else
      std::printf("onelayer %s (allocator: libc malloc)\n", ONELAYER_VERSION);
#endif
#ifdef ONELAYER_STATIC_NGHTTP2
      std::printf("nghttp2 %s, linked into the binary\n", nghttp2_version(0)->version_str);
#else
      std::printf("nghttp2 %s, shared library\n", nghttp2_version(0)->version_str);
#endif
      return 0;
    } else if (a == "--log-level") {
      level = value("--log-level");
    } else if (a == "--log-format") {
      format = value("--log-format");
    } else if (a == "--ports-file") {
      opts.ports_file = value("--ports-file");
    } else if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "onelayer: unknown argument %s\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (format != "text" && format != "json") {
    std::fprintf(stderr, "onelayer: --log-format must be text or json\n");
    return 2;
  }
  if (level != "trace" && level != "debug" && level != "info" && level != "warn" && level != "error") {
    std::fprintf(stderr, "onelayer: --log-level must be trace, debug, info, warn or error\n");
    return 2;
  }
  onelayer::setup_logging(level, format == "json" ? onelayer::LogFormat::json : onelayer::LogFormat::text);
  if (check) {
    onelayer::LoadResult lr = onelayer::load_config_file(opts.config_path);
    onelayer::TlsContexts tls;  // --check loads every certificate too
    if (lr.ok()) lr.errors = onelayer::build_tls_contexts(*lr.config, tls);
    if (lr.ok()) onelayer::admin_guard_for(*lr.config, lr.errors);  // the token file is readable
    if (!lr.errors.empty()) {
      std::fputs(onelayer::format_errors(lr.errors).c_str(), stderr);
      return 1;
    }
    std::printf("%s: ok (%zu listener(s), %zu upstream(s))\n", opts.config_path.c_str(),
                lr.config->listeners.size(), lr.config->upstreams.size());
    return 0;
  }
  return onelayer::run_server(opts);
}
