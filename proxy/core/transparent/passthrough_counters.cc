#include "core/transparent/passthrough_counters.h"

namespace onelayer {

void TransparentCounters::add(Map& m, const std::string& listener, const char* reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++m[{listener, reason}];
}

uint64_t TransparentCounters::passthrough_count(const std::string& listener, const std::string& reason) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = passthrough_.find({listener, reason});
  return it == passthrough_.end() ? 0 : it->second;
}

void TransparentCounters::append_samples(std::vector<GaugeSample>& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto emit = [&](const Map& m, const char* name, const char* help) {
    for (const auto& [key, n] : m) {
      GaugeSample s;
      s.name = name;
      s.labels = "listener=\"" + escape_label_value(key.first) + "\",reason=\"" + escape_label_value(key.second) + "\"";
      s.value = static_cast<double>(n);
      s.help = help;
      s.type = "counter";
      out.push_back(std::move(s));
    }
  };
  emit(passthrough_, "onelayer_passthrough_connections_total",
       "Connections of transparent listeners tunnelled byte for byte to their original destination, by reason.");
  emit(refused_, "onelayer_transparent_refused_total",
       "Connections of transparent listeners refused (loop: the original destination is the listener itself).");
  GaugeSample d;
  d.name = "onelayer_transparent_destinations";
  d.value = static_cast<double>(destinations.load(std::memory_order_relaxed));
  d.help = "Original destinations held in the workers' bounded destination tables.";
  out.push_back(std::move(d));
}

}  // namespace onelayer
