// Loading helpers shared by the config tests: every error of a load as the
// user sees it, a load that must succeed, and the YAML round trip that
// GET /config relies on.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/config/config_loader.h"

namespace onelayer::test {

inline std::vector<std::string> errors_of(std::string_view yaml) {
  LoadResult r = load_config_string(yaml, "t.yaml");
  std::vector<std::string> out;
  for (const ConfigError& e : r.errors) out.push_back(e.to_string());
  CHECK(r.ok() == out.empty());
  return out;
}

inline ConfigPtr load_ok(std::string_view yaml) {
  LoadResult r = load_config_string(yaml, "t.yaml");
  INFO(format_errors(r.errors));
  REQUIRE(r.ok());
  REQUIRE(r.errors.empty());
  return r.config;
}

// A config whose one route has a retry block of `retry_lines` (each line
// indented for it, ten spaces).
inline std::string with_retry(const std::string& retry_lines) {
  return R"(listeners:
  - name: in
    listen: 127.0.0.1:0
    routes:
      - name: calls
        upstream: up
        retry:
)" + retry_lines + R"(
upstreams:
  - name: up
    endpoints: [127.0.0.1:9]
)";
}

// The config written out as YAML loads again into the same settings.
inline void check_round_trip(const Config& c) {
  std::string yaml = config_to_yaml(c);
  LoadResult back = load_config_string(yaml, "config.yaml");
  INFO(yaml);
  INFO(format_errors(back.errors));
  REQUIRE(back.ok());
  CHECK(back.config->same_settings(c));
}

}  // namespace onelayer::test
