// libFuzzer target for the Retry-After parser (core/http/retry_after.h).
//
// Input: 4 bytes choosing "now" (seconds from 2000-01-01, up to ~136 years),
// then the header value.
//
// Invariants (abort on failure), each checked against a model written here:
// - a result is within [0, kRetryAfterSaturation];
// - delay-seconds (only digits after trimming SP/HTAB) gives exactly
//   min(n s, saturation), however many digits; digits followed by anything
//   else are refused;
// - surrounding SP/HTAB never change the result;
// - an IMF-fixdate or asctime date moves with "now": one second later, the
//   wait is one second shorter (until it reaches 0); the result does not
//   depend on anything but the value and now;
// - the IMF-fixdate written for a time derived from the input parses back to
//   exactly that time - now, clamped to [0, saturation].
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "core/http/retry_after.h"
#include "fuzz_util.h"

namespace {

using namespace std::chrono;
using onelayer::kRetryAfterSaturation;
using onelayer::Millis;
using onelayer::parse_retry_after;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// min(n * 1000 ms, saturation) for a decimal string of any length.
Millis model_delay(std::string_view digits) {
  const int64_t sat_s = kRetryAfterSaturation.count() / 1000;
  int64_t v = 0;
  for (char c : digits) {
    v = v * 10 + (c - '0');
    if (v >= sat_s) return kRetryAfterSaturation;
  }
  return Millis(v * 1000);
}

std::string imf_fixdate(sys_seconds t) {
  static const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const sys_days d = floor<days>(t);
  const year_month_day ymd{d};
  const hh_mm_ss<seconds> hms{t - d};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s, %02u %s %04d %02d:%02d:%02d GMT", kDays[weekday{d}.c_encoding()],
                static_cast<unsigned>(ymd.day()), kMonths[static_cast<unsigned>(ymd.month()) - 1],
                static_cast<int>(ymd.year()), static_cast<int>(hms.hours().count()),
                static_cast<int>(hms.minutes().count()), static_cast<int>(hms.seconds().count()));
  return buf;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t offset = static_cast<uint32_t>(data[0]) | static_cast<uint32_t>(data[1]) << 8 |
                    static_cast<uint32_t>(data[2]) << 16 | static_cast<uint32_t>(data[3]) << 24;
  const sys_seconds epoch2000{seconds(946'684'800)};
  const system_clock::time_point now = epoch2000 + seconds(offset);
  std::string_view value(reinterpret_cast<const char*>(data + 4), size - 4);

  std::optional<Millis> r = parse_retry_after(value, now);
  if (r) FUZZ_REQUIRE(r->count() >= 0 && *r <= kRetryAfterSaturation);
  FUZZ_REQUIRE(parse_retry_after(value, now) == r);

  std::string padded = " \t" + std::string(value) + "\t ";
  FUZZ_REQUIRE(parse_retry_after(padded, now) == r);

  std::string_view t = trim(value);
  if (all_digits(t)) {
    FUZZ_REQUIRE(r && *r == model_delay(t));
  } else if (!t.empty() && t.front() >= '0' && t.front() <= '9') {
    FUZZ_REQUIRE(!r);  // digits then garbage: not a delay, and not a date
  }
  if (t.empty()) FUZZ_REQUIRE(!r);

  // IMF-fixdate ("Sun,") and asctime ("Sun ") do not read the year from now.
  if (r && t.size() > 3 && (t[3] == ',' || t[3] == ' ')) {
    std::optional<Millis> later = parse_retry_after(value, now + seconds(1));
    FUZZ_REQUIRE(later.has_value());
    if (*r > Millis(1000) && *r < kRetryAfterSaturation) {
      FUZZ_REQUIRE(*later == *r - Millis(1000));
    } else if (*r <= Millis(1000)) {
      FUZZ_REQUIRE(*later == Millis(0));
    }
  }

  // A date written from the input parses back exactly (whole seconds, so the
  // wait is (target - now) in ms; 0 once in the past).
  if (size >= 8) {
    int32_t delta = static_cast<int32_t>(static_cast<uint32_t>(data[4]) | static_cast<uint32_t>(data[5]) << 8 |
                                         static_cast<uint32_t>(data[6]) << 16 |
                                         static_cast<uint32_t>(data[7]) << 24);
    sys_seconds target = floor<seconds>(now) + seconds(delta);
    std::string date = imf_fixdate(target);
    std::optional<Millis> got = parse_retry_after(date, now);
    FUZZ_REQUIRE(got.has_value());
    int64_t want = std::clamp<int64_t>(static_cast<int64_t>(delta) * 1000, 0, kRetryAfterSaturation.count());
    FUZZ_REQUIRE(got->count() == want);
  }
  return 0;
}
