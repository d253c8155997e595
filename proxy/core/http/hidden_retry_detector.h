// Hidden-retry detection (docs/storm.md "Hidden retries"). The owning
// onelayer writes the baggage member retry-attempt=<request id>.<attempt>
// (a random 64-bit id per downstream request, in hex). An app or SDK between
// two onelayers that carries baggage and retries on its own sends the same
// id and attempt twice; the inner onelayer remembers recent (id, attempt)
// pairs and counts a repeat. A request owned by an outer layer that arrives
// with x-envoy-attempt-count above 1 (an Envoy hop retried it) counts too.
// Nothing about the request changes: this only counts and warns.
// gRPC's grpc-previous-rpc-attempts (above 0 on an owned request) is to
// count here too once onelayer speaks HTTP/2; HTTP/1.1 carries no gRPC.
//
// Memory: one table shared by every worker, allocated on first use and
// fixed in size (kSets x kWays pairs, about 400 KiB). It is shared rather
// than per worker because a retrying client usually comes back on a new
// connection, which SO_REUSEPORT may hand to any worker: per-worker tables
// would miss those repeats. Each set has its own lock (one of kShards), so
// workers rarely wait on each other. A pair is remembered for kMemory; when
// a set is full the oldest pair in it is forgotten first, so under a flood
// of distinct ids a repeat may go unseen, never a first attempt counted.
//
// Pure: time comes in as an argument. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/clock.h"
#include "core/http/http_headers.h"

namespace onelayer {

class HiddenRetryDetector {
 public:
  static constexpr std::string_view kBaggageMember = "retry-attempt";
  static constexpr std::string_view kEnvoyAttemptCount = "x-envoy-attempt-count";
  static constexpr Millis kMemory{60'000};
  static constexpr Millis kWarnEvery{60'000};  // one warning per owner per minute
  static constexpr size_t kSets = 4096;
  static constexpr size_t kWays = 4;
  static constexpr size_t kShards = 64;
  static constexpr size_t kMaxSeries = 256;  // (route, owner) label pairs; later owners count as "other"

  struct AttemptKey {
    uint64_t id = 0;
    uint32_t attempt = 0;
    bool operator==(const AttemptKey&) const = default;
  };

  // "<1-16 hex digits>.<attempt 1..999999>" -> key; anything else nullopt.
  static std::optional<AttemptKey> parse_member(std::string_view value);
  // Appends "<16 hex digits>.<attempt>" (the member's value) to out.
  static void append_member_value(uint64_t id, uint32_t attempt, std::string& out);
  // The same written to `out`, which has room for kMemberValueBytes; returns the end.
  static constexpr size_t kMemberValueBytes = 16 + 1 + 10;
  static char* write_member_value(uint64_t id, uint32_t attempt, char* out);

  // What a request owned by an outer layer carries that can reveal a
  // hidden retry.
  struct Signals {
    std::optional<AttemptKey> key;     // the retry-attempt baggage member
    uint64_t envoy_attempt_count = 0;  // x-envoy-attempt-count (0: absent or not a number)
    uint64_t grpc_previous_attempts = 0;  // grpc-previous-rpc-attempts (0: absent or not a number)
    // The owner's own attempt number (its x-retry-attempt, whose name is
    // configurable: the shell fills it in); 0: absent.
    uint64_t owner_attempt = 0;
  };
  static constexpr std::string_view kGrpcPreviousAttempts = "grpc-previous-rpc-attempts";
  static Signals read_signals(const Headers& h);
  // grpc-previous-rpc-attempts > 0 is a hop's own gRPC retry unless it is
  // the owner's count: the owner writes attempt - 1 beside its attempt
  // number (x-retry-attempt, else the baggage member's), so a count that
  // does not match it, or comes without either, was written by someone else.
  static bool grpc_attempts_reveal_retry(const Signals& s);

  struct Verdict {
    bool hidden_retry = false;  // counted in onelayer_hidden_retries_total
    bool warn = false;          // the caller should log a warning now (rate-limited per owner)
    std::string owner;          // the owner label used (sanitized; "other" past kMaxSeries)
  };
  // One owned request on `route` whose retries belong to `owner`.
  Verdict observe(std::string_view route, std::string_view owner, const Signals& s, TimePoint now);

  struct Series {
    std::string route, owner;
    uint64_t count = 0;
  };
  std::vector<Series> series() const;  // for /metrics, sorted by route then owner

 private:
  struct Entry {
    uint64_t id = 0;
    uint32_t attempt = 0;  // 0: empty
    int64_t seen_ms = 0;
  };
  bool seen_before(const AttemptKey& k, int64_t now_ms);  // remembers k

  std::once_flag table_once_;
  std::unique_ptr<Entry[]> table_;  // kSets * kWays
  std::unique_ptr<std::mutex[]> shard_locks_;

  mutable std::mutex series_mu_;
  std::map<std::pair<std::string, std::string>, uint64_t> counts_;
  std::map<std::string, int64_t, std::less<>> last_warn_ms_;
};

}  // namespace onelayer
