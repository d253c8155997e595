// YAML -> Config: parse, validate, fill in defaults, and back again.
// Every problem in a file is reported, not just the first, each naming the
// place (file:line:column, 1-based) and the key path. No exception escapes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/config/config.h"

namespace onelayer {

struct ConfigError {
  std::string file;
  int line = 0;    // 1-based; 0 when the error has no place (unreadable file)
  int column = 0;  // 1-based
  std::string path;  // key path, e.g. "listeners[0].routes[1].retry.backoff.cap"; "" for the file
  std::string message;

  // "onelayer.yaml:14:7: listeners[0].routes[1].retry.backoff.cap: must be >= base (50ms)";
  // the place and the path are left out when unknown/empty.
  std::string to_string() const;
  bool operator==(const ConfigError&) const = default;
};

struct LoadResult {
  ConfigPtr config;                 // set only when errors is empty
  std::vector<ConfigError> errors;  // in file order (line, column)
  bool ok() const { return config != nullptr; }
};

// file name shown in errors and kept as Config::source_path = the path as given.
LoadResult load_config_file(const std::string& path);
LoadResult load_config_string(std::string_view yaml_text, const std::string& file_name);

// Every error's to_string(), one per line (each line ends with '\n').
std::string format_errors(const std::vector<ConfigError>& errors);

// The config in force with every default filled in, as YAML (GET /config).
// load_config_string(config_to_yaml(c), ...) gives a config c.same_settings().
std::string config_to_yaml(const Config& config);

// layer_id when the file names none: the host name, or "onelayer" when the
// host name is unavailable or not a valid header token.
std::string default_layer_id();

}  // namespace onelayer
