// Load shedding for one listener (docs/storm.md "Shedding with
// Retry-After"): at most `max_concurrent_requests` requests in flight across
// every worker; the ones beyond are answered at once with 503 overloaded and
// a Retry-After that says how long the requests in flight will take to
// drain at the recent completion rate, with jitter so the callers told to
// wait do not all come back in the same second.
//
// gRPC callers are to get RESOURCE_EXHAUSTED with grpc-retry-pushback-ms
// (the same wait in milliseconds) once onelayer speaks HTTP/2.
//
// Pure: no clock reads (time and randomness are arguments). Thread-safe:
// admission is one atomic increment; the rate samples take a mutex at most
// once per second.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "core/base/clock.h"
#include "core/base/random.h"

namespace onelayer {

class LoadShedder {
 public:
  static constexpr int kWindowSeconds = 10;        // "recent" completion rate
  static constexpr int64_t kMaxRetryAfterSeconds = 60;

  explicit LoadShedder(uint32_t max_concurrent, TimePoint now);

  // Holds one in-flight slot; giving it up (destruction or reset) counts one
  // completion. Move-only; an empty Permit holds nothing.
  class Permit {
   public:
    Permit() = default;
    explicit Permit(std::shared_ptr<LoadShedder> s) : s_(std::move(s)) {}
    Permit(Permit&& o) noexcept = default;
    Permit& operator=(Permit&& o) noexcept {
      if (this != &o) {
        reset();
        s_ = std::move(o.s_);
      }
      return *this;
    }
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit() { reset(); }
    explicit operator bool() const { return s_ != nullptr; }
    void reset();

   private:
    std::shared_ptr<LoadShedder> s_;
  };

  // A permit when fewer than the limit are in flight; an empty one (and
  // the request counted as shed) otherwise.
  static Permit try_acquire(const std::shared_ptr<LoadShedder>& s, TimePoint now);

  // Whole seconds for the Retry-After of a shed request, in [1, 60]: the
  // time the requests in flight need at the completion rate of the last
  // kWindowSeconds (1 s while no rate is known yet; the seconds measured
  // when nothing completed in them), multiplied by a random factor in
  // [1, 2) and rounded up.
  int64_t retry_after_seconds(TimePoint now, Random& rng);

  void set_limit(uint32_t max_concurrent) { limit_.store(max_concurrent, std::memory_order_relaxed); }
  uint32_t limit() const { return limit_.load(std::memory_order_relaxed); }
  uint64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  uint64_t shed_total() const { return shed_.load(std::memory_order_relaxed); }
  uint64_t completions() const { return completions_.load(std::memory_order_relaxed); }
  // Completions per second over the window; negative while unknown.
  double completion_rate(TimePoint now);

 private:
  struct Sample {
    int64_t second = -1;
    uint64_t completions = 0;
  };
  struct Window {
    double per_second = -1;  // negative: unknown (no sample a second old yet)
    int64_t covered = 0;     // seconds the rate was measured over
  };
  Window window(TimePoint now);
  void sample(TimePoint now);
  int64_t second_of(TimePoint t) const;

  std::atomic<uint32_t> limit_;
  std::atomic<uint64_t> in_flight_{0}, shed_{0}, completions_{0};
  std::atomic<int64_t> last_sampled_{-1};
  TimePoint origin_;
  std::mutex mu_;
  std::array<Sample, kWindowSeconds + 1> samples_{};
};

}  // namespace onelayer
