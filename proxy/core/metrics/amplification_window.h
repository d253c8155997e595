// Retry amplification for /metrics (onelayer_amplification_ratio): upstream
// attempts per downstream request over the last 60 seconds. Pure core: no
// clock (callers pass `now_ms`), relaxed atomics only, so every worker
// thread can add to the same window without a lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace onelayer {

// Upstream attempts per downstream request over the last 60 seconds: 60
// one-second slots. Each slot counter is one 64-bit word holding the low 24
// bits of the epoch second it belongs to and a 40-bit count, so a writer
// entering a new second resets the slot with a single CAS and no count added
// by another thread can be lost between "reset" and "add".
class AmplificationWindow {
 public:
  static constexpr int kSlots = 60;

  void add_request(int64_t now_ms, uint32_t attempts);
  // attempts / requests over the seconds (now-59 .. now]; 0 when no requests.
  double ratio(int64_t now_ms) const;
  struct Totals {
    uint64_t requests = 0;
    uint64_t attempts = 0;
  };
  Totals totals(int64_t now_ms) const;

 private:
  static void add(std::atomic<uint64_t>& word, int64_t second, uint64_t n);
  static uint64_t read(const std::atomic<uint64_t>& word, int64_t second);

  std::array<std::atomic<uint64_t>, kSlots> requests_{};
  std::array<std::atomic<uint64_t>, kSlots> attempts_{};
};

}  // namespace onelayer
