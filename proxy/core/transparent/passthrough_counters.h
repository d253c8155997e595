// Counters of the transparent mode, by listener and reason, rendered as
// onelayer_passthrough_connections_total{listener,reason} and
// onelayer_transparent_refused_total{listener,reason}. Counted once per
// connection (not per request), so a mutex is cheap enough.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/metrics/metrics.h"

namespace onelayer {

class TransparentCounters {
 public:
  void passthrough(const std::string& listener, const char* reason) { add(passthrough_, listener, reason); }
  void refused(const std::string& listener, const char* reason) { add(refused_, listener, reason); }
  // Destinations held in the workers' tables (a gauge, summed).
  std::atomic<int64_t> destinations{0};
  uint64_t passthrough_count(const std::string& listener, const std::string& reason) const;
  // The samples for /metrics.
  void append_samples(std::vector<GaugeSample>& out) const;

 private:
  using Map = std::map<std::pair<std::string, std::string>, uint64_t>;
  void add(Map& m, const std::string& listener, const char* reason);
  mutable std::mutex mu_;
  Map passthrough_, refused_;
};

}  // namespace onelayer
