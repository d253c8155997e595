#include "core/metrics/amplification_window.h"

#include <algorithm>

namespace onelayer {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

// Amplification slot word: high 24 bits = epoch second tag, low 40 = count.
constexpr int kCountBits = 40;
constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;
constexpr uint64_t kTagMask = (uint64_t{1} << 24) - 1;
constexpr uint64_t kTagHalf = uint64_t{1} << 23;

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

size_t slot_of(int64_t second) {
  int64_t m = second % AmplificationWindow::kSlots;
  return static_cast<size_t>(m < 0 ? m + AmplificationWindow::kSlots : m);
}

uint64_t tag_of(int64_t second) { return static_cast<uint64_t>(second) & kTagMask; }

}  // namespace

void AmplificationWindow::add(std::atomic<uint64_t>& word, int64_t second, uint64_t n) {
  if (n == 0) return;
  const uint64_t tag = tag_of(second);
  uint64_t cur = word.load(kRelaxed);
  for (;;) {
    const uint64_t cur_tag = cur >> kCountBits;
    const uint64_t cur_count = cur & kCountMask;
    uint64_t count = n;
    if (cur_count != 0 && cur_tag == tag) {
      count = std::min(cur_count + n, kCountMask);  // saturate rather than wrap into the tag
    } else if (cur_count != 0 && ((tag - cur_tag) & kTagMask) >= kTagHalf) {
      return;  // the slot already holds a later second: this sample is outside every window
    }
    const uint64_t next = (tag << kCountBits) | std::min(count, kCountMask);
    if (word.compare_exchange_weak(cur, next, kRelaxed, kRelaxed)) return;
  }
}

uint64_t AmplificationWindow::read(const std::atomic<uint64_t>& word, int64_t second) {
  const uint64_t cur = word.load(kRelaxed);
  return (cur >> kCountBits) == tag_of(second) ? (cur & kCountMask) : 0;
}

void AmplificationWindow::add_request(int64_t now_ms, uint32_t attempts) {
  const int64_t second = floor_div(now_ms, 1000);
  const size_t slot = slot_of(second);
  add(requests_[slot], second, 1);
  add(attempts_[slot], second, attempts);
}

AmplificationWindow::Totals AmplificationWindow::totals(int64_t now_ms) const {
  const int64_t now_second = floor_div(now_ms, 1000);
  Totals t;
  for (int64_t i = 0; i < kSlots; ++i) {
    const int64_t second = now_second - i;
    const size_t slot = slot_of(second);
    t.requests += read(requests_[slot], second);
    t.attempts += read(attempts_[slot], second);
  }
  return t;
}

double AmplificationWindow::ratio(int64_t now_ms) const {
  const Totals t = totals(now_ms);
  if (t.requests == 0) return 0.0;
  return static_cast<double>(t.attempts) / static_cast<double>(t.requests);
}

}  // namespace onelayer
