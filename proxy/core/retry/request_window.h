// RequestWindow: how many requests arrived in the last kSeconds seconds,
// counted in one-second buckets, for the retry budget's cap.
//
// The count of the window ending at the latest second added is kept as a
// running total, so the common question (this second's window, asked once
// per request) costs no scan of the buckets; a window ending at a later
// second (time moved on) is summed from the buckets, and the total is
// brought forward when a request arrives in a new second.
//
// Seconds are whole seconds from any origin. They normally arrive in
// order; an earlier one is still counted as the buckets alone would count
// it (the total is then summed afresh).
// Not thread-safe: RetryBudget holds it under its lock.
#pragma once

#include <array>
#include <cstdint>

namespace onelayer {

class RequestWindow {
 public:
  static constexpr int kSeconds = 10;

  // One request in `second`.
  void add(int64_t second);
  // Requests in the seconds (second - kSeconds, second].
  int64_t count(int64_t second) const { return second == latest_ ? total_ : summed(second); }

 private:
  struct Bucket {
    int64_t second = -1;  // the second this bucket counts
    int64_t requests = 0;
  };

  // count(), from the buckets.
  int64_t summed(int64_t second) const;

  std::array<Bucket, kSeconds> buckets_{};
  int64_t latest_ = 0;  // the latest second added (0 before any)
  int64_t total_ = 0;   // count(latest_)
};

}  // namespace onelayer
