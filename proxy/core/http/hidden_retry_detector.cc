#include "core/http/hidden_retry_detector.h"

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>

#include "core/http/baggage.h"

namespace onelayer {
namespace {

// A field value that is a whole decimal number, else 0.
uint64_t decimal_or_zero(std::string_view v) {
  uint64_t n = 0;
  auto r = std::from_chars(v.data(), v.data() + v.size(), n);
  return r.ec == std::errc() && r.ptr == v.data() + v.size() ? n : 0;
}

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

int64_t ms_of(TimePoint t) { return std::chrono::duration_cast<Millis>(t.time_since_epoch()).count(); }

// Label values stay short and printable whatever a peer sends.
std::string sanitize_owner(std::string_view owner) {
  std::string out;
  for (char c : owner.substr(0, 64)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_' || c == '.';
    out += ok ? c : '_';
  }
  return out.empty() ? "unknown" : out;
}

}  // namespace

std::optional<HiddenRetryDetector::AttemptKey> HiddenRetryDetector::parse_member(std::string_view v) {
  size_t dot = v.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 16) return std::nullopt;
  AttemptKey k;
  const char* end = v.data() + dot;
  auto r = std::from_chars(v.data(), end, k.id, 16);
  if (r.ec != std::errc() || r.ptr != end) return std::nullopt;
  std::string_view n = v.substr(dot + 1);
  if (n.empty() || n.size() > 6 || n.front() == '0') return std::nullopt;
  auto r2 = std::from_chars(n.data(), n.data() + n.size(), k.attempt);
  if (r2.ec != std::errc() || r2.ptr != n.data() + n.size() || k.attempt == 0) return std::nullopt;
  return k;
}

char* HiddenRetryDetector::write_member_value(uint64_t id, uint32_t attempt, char* out) {
  // Two hex digits per byte of the id, from a table of all 256 pairs.
  static constexpr std::array<char, 512> kHexPairs = [] {
    constexpr char kHex[] = "0123456789abcdef";
    std::array<char, 512> t{};
    for (size_t b = 0; b < 256; ++b) {
      t[2 * b] = kHex[b >> 4];
      t[2 * b + 1] = kHex[b & 0xf];
    }
    return t;
  }();
  for (int i = 7; i >= 0; --i) {
    std::memcpy(out + 2 * i, &kHexPairs[2 * (id & 0xff)], 2);
    id >>= 8;
  }
  out[16] = '.';
  return std::to_chars(out + 17, out + kMemberValueBytes, attempt).ptr;
}

void HiddenRetryDetector::append_member_value(uint64_t id, uint32_t attempt, std::string& out) {
  char buf[kMemberValueBytes];
  out.append(buf, write_member_value(id, attempt, buf));
}

// The retry-attempt member of one baggage field, read in place (the value is
// hex digits and a dot: nothing to decode). nullopt when the field has none.
static std::optional<std::string_view> attempt_member(std::string_view field) {
  std::optional<std::string_view> found;
  for_each_list_element(field, [&](std::string_view member) {
    if (found) return;
    size_t eq = member.find('=');
    if (eq == std::string_view::npos || trim_ows(member.substr(0, eq)) != HiddenRetryDetector::kBaggageMember) return;
    std::string_view value = member.substr(eq + 1);
    value = trim_ows(value.substr(0, value.find(';')));  // properties are not ours
    found = value;
  });
  return found;
}

bool HiddenRetryDetector::grpc_attempts_reveal_retry(const Signals& s) {
  if (s.grpc_previous_attempts == 0) return false;
  const uint64_t owner = s.owner_attempt != 0 ? s.owner_attempt : s.key ? s.key->attempt : 0;
  return owner == 0 || s.grpc_previous_attempts + 1 != owner;
}

HiddenRetryDetector::Signals HiddenRetryDetector::read_signals(const Headers& h) {
  Signals s;
  bool member_seen = false;
  for (const Header& f : h) {
    if (!member_seen && iequals(f.name, "baggage")) {
      // Fields are read one by one: a member never spans two of them.
      if (std::optional<std::string_view> v = attempt_member(f.value)) {
        member_seen = true;
        if (v->find('%') == std::string_view::npos) {
          s.key = parse_member(*v);
        } else if (std::optional<std::string> decoded = baggage_get(f.value, kBaggageMember)) {
          s.key = parse_member(*decoded);  // percent-encoded: rare, decoded properly
        }
      }
    } else if (iequals(f.name, kEnvoyAttemptCount)) {
      s.envoy_attempt_count = decimal_or_zero(f.value);
    } else if (iequals(f.name, kGrpcPreviousAttempts)) {
      s.grpc_previous_attempts = decimal_or_zero(f.value);
    }
  }
  return s;
}

bool HiddenRetryDetector::seen_before(const AttemptKey& k, int64_t now_ms) {
  std::call_once(table_once_, [this] {
    table_ = std::make_unique<Entry[]>(kSets * kWays);
    shard_locks_ = std::make_unique<std::mutex[]>(kShards);
  });
  const size_t set = mix(k.id ^ mix(k.attempt)) % kSets;
  std::lock_guard lock(shard_locks_[set % kShards]);
  Entry* ways = &table_[set * kWays];
  // The way to overwrite: an empty one, else an expired one, else the oldest.
  auto rank = [&](const Entry& e) -> int64_t {
    if (e.attempt == 0) return INT64_MIN;
    if (now_ms - e.seen_ms >= kMemory.count()) return INT64_MIN + 1;
    return e.seen_ms;
  };
  Entry* victim = &ways[0];
  for (size_t i = 0; i < kWays; ++i) {
    Entry& e = ways[i];
    const bool live = e.attempt != 0 && now_ms - e.seen_ms < kMemory.count();
    if (live && e.id == k.id && e.attempt == k.attempt) return true;
    if (rank(e) < rank(*victim)) victim = &e;
  }
  *victim = Entry{k.id, k.attempt, now_ms};
  return false;
}

HiddenRetryDetector::Verdict HiddenRetryDetector::observe(std::string_view route, std::string_view owner,
                                                          const Signals& s, TimePoint now) {
  Verdict v;
  const int64_t now_ms = ms_of(now);
  bool repeat = s.key && seen_before(*s.key, now_ms);
  v.hidden_retry = repeat || s.envoy_attempt_count > 1 || grpc_attempts_reveal_retry(s);
  if (!v.hidden_retry) return v;
  v.owner = sanitize_owner(owner);
  std::lock_guard lock(series_mu_);
  auto key = std::make_pair(std::string(route), v.owner);
  auto it = counts_.find(key);
  if (it == counts_.end()) {
    if (counts_.size() >= kMaxSeries) {
      v.owner = "other";
      key.second = v.owner;
    }
    it = counts_.try_emplace(std::move(key), 0).first;
  }
  ++it->second;
  auto w = last_warn_ms_.find(v.owner);
  if (w == last_warn_ms_.end()) {
    if (last_warn_ms_.size() < kMaxSeries + 1) {
      last_warn_ms_.emplace(v.owner, now_ms);
      v.warn = true;
    }
  } else if (now_ms - w->second >= kWarnEvery.count()) {
    w->second = now_ms;
    v.warn = true;
  }
  return v;
}

std::vector<HiddenRetryDetector::Series> HiddenRetryDetector::series() const {
  std::lock_guard lock(series_mu_);
  std::vector<Series> out;
  for (const auto& [k, n] : counts_) out.push_back({k.first, k.second, n});
  return out;
}

}  // namespace onelayer
