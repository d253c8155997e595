// libFuzzer target for the config loader (core/config/config_loader.h): arbitrary
// bytes as a YAML file.
//
// Invariants (abort on failure):
// - no exception escapes, and a result is either a config or errors, never
//   both or neither;
// - every error names the file, has a message, a sane place and renders as
//   "fuzz.yaml..." ; errors come in file order (line, column);
// - an accepted config survives the round trip through config_to_yaml: the
//   YAML loads again without errors and gives the same settings.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/config/config_loader.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  onelayer::LoadResult r;
  try {
    r = onelayer::load_config_string(text, "fuzz.yaml");
  } catch (...) {
    FUZZ_REQUIRE(!"load_config_string threw");
  }
  FUZZ_REQUIRE(r.ok() == r.errors.empty());
  int prev_line = 0, prev_col = 0;
  for (const onelayer::ConfigError& e : r.errors) {
    FUZZ_REQUIRE(e.file == "fuzz.yaml");
    FUZZ_REQUIRE(!e.message.empty());
    FUZZ_REQUIRE(e.line >= 0 && e.column >= 0);
    FUZZ_REQUIRE(static_cast<size_t>(e.line) <= size + 2);
    std::string s = e.to_string();
    FUZZ_REQUIRE(s.rfind("fuzz.yaml", 0) == 0);
    FUZZ_REQUIRE(e.line > prev_line || (e.line == prev_line && e.column >= prev_col) || e.line == 0);
    if (e.line != 0) {
      prev_line = e.line;
      prev_col = e.column;
    }
  }
  if (!r.ok()) return 0;

  std::string yaml;
  onelayer::LoadResult again;
  try {
    yaml = onelayer::config_to_yaml(*r.config);
    again = onelayer::load_config_string(yaml, "roundtrip.yaml");
  } catch (...) {
    FUZZ_REQUIRE(!"config_to_yaml / reload threw");
  }
  if (!again.ok()) {
    std::fprintf(stderr, "round trip failed:\n%s\n---\n%s", yaml.c_str(),
                 onelayer::format_errors(again.errors).c_str());
  }
  FUZZ_REQUIRE(again.ok());
  FUZZ_REQUIRE(again.config->same_settings(*r.config));
  return 0;
}
