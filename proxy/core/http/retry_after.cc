#include "core/http/retry_after.h"

#include <array>
#include <cstdint>

namespace onelayer {
namespace {

using namespace std::chrono;

constexpr int64_t kSaturationSeconds = kRetryAfterSaturation.count() / 1000;

constexpr std::array<std::string_view, 7> kDayShort{"Mon", "Tue", "Wed", "Thu",
                                                    "Fri", "Sat", "Sun"};
constexpr std::array<std::string_view, 7> kDayLong{"Monday", "Tuesday",  "Wednesday", "Thursday",
                                                   "Friday", "Saturday", "Sunday"};
constexpr std::array<std::string_view, 12> kMonths{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A forward-only reader; every method consumes only on success.
class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool done() const { return s_.empty(); }

  bool literal(std::string_view lit) {
    if (s_.substr(0, lit.size()) != lit) return false;
    s_.remove_prefix(lit.size());
    return true;
  }
  // Exactly n digits.
  std::optional<int> digits(size_t n) {
    if (s_.size() < n) return std::nullopt;
    int v = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!is_digit(s_[i])) return std::nullopt;
      v = v * 10 + (s_[i] - '0');
    }
    s_.remove_prefix(n);
    return v;
  }
  template <size_t N>
  std::optional<int> one_of(const std::array<std::string_view, N>& names) {
    for (size_t i = 0; i < N; ++i) {
      // Longest names first would matter only for prefixes; none share one
      // within a table except by length, so require the exact token.
      if (s_.substr(0, names[i].size()) == names[i]) {
        s_.remove_prefix(names[i].size());
        return static_cast<int>(i);
      }
    }
    return std::nullopt;
  }

 private:
  std::string_view s_;
};

struct Civil {
  int year = 0, month = 0, day = 0;  // month 1..12
  int hour = 0, minute = 0, second = 0;
};

// time-of-day = hour ":" minute ":" second
bool read_time(Cursor& c, Civil& t) {
  auto h = c.digits(2);
  if (!h || !c.literal(":")) return false;
  auto m = c.digits(2);
  if (!m || !c.literal(":")) return false;
  auto s = c.digits(2);
  if (!s) return false;
  t.hour = *h;
  t.minute = *m;
  t.second = *s;
  return true;
}

bool read_month(Cursor& c, Civil& t) {
  auto m = c.one_of(kMonths);
  if (!m) return false;
  t.month = *m + 1;
  return true;
}

// IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
std::optional<Civil> parse_imf_fixdate(std::string_view s) {
  Cursor c(s);
  Civil t;
  if (!c.one_of(kDayShort) || !c.literal(", ")) return std::nullopt;
  auto day = c.digits(2);
  if (!day || !c.literal(" ") || !read_month(c, t) || !c.literal(" ")) return std::nullopt;
  auto year = c.digits(4);
  if (!year || !c.literal(" ") || !read_time(c, t) || !c.literal(" GMT") || !c.done())
    return std::nullopt;
  t.day = *day;
  t.year = *year;
  return t;
}

// rfc850-date: "Sunday, 06-Nov-94 08:49:37 GMT"
std::optional<Civil> parse_rfc850(std::string_view s, int year_now) {
  Cursor c(s);
  Civil t;
  if (!c.one_of(kDayLong) || !c.literal(", ")) return std::nullopt;
  auto day = c.digits(2);
  if (!day || !c.literal("-") || !read_month(c, t) || !c.literal("-")) return std::nullopt;
  auto yy = c.digits(2);
  if (!yy || !c.literal(" ") || !read_time(c, t) || !c.literal(" GMT") || !c.done())
    return std::nullopt;
  t.day = *day;
  // RFC 9110 5.6.7: more than 50 years in the future means the most recent
  // past year with the same last two digits.
  int year = year_now - year_now % 100 + *yy;
  if (year > year_now + 50) year -= 100;
  t.year = year;
  return t;
}

// asctime-date: "Sun Nov  6 08:49:37 1994"
std::optional<Civil> parse_asctime(std::string_view s) {
  Cursor c(s);
  Civil t;
  if (!c.one_of(kDayShort) || !c.literal(" ") || !read_month(c, t) || !c.literal(" "))
    return std::nullopt;
  std::optional<int> day = c.literal(" ") ? c.digits(1) : c.digits(2);
  if (!day || !c.literal(" ") || !read_time(c, t) || !c.literal(" ")) return std::nullopt;
  auto year = c.digits(4);
  if (!year || !c.done()) return std::nullopt;
  t.day = *day;
  t.year = *year;
  return t;
}

// Seconds since the Unix epoch, or nullopt for an impossible date/time.
std::optional<int64_t> to_epoch_seconds(const Civil& t) {
  const year_month_day ymd{year{t.year}, month{static_cast<unsigned>(t.month)},
                           day{static_cast<unsigned>(t.day)}};
  // second 60 is allowed by the grammar for a leap second.
  if (!ymd.ok() || t.hour > 23 || t.minute > 59 || t.second > 60) return std::nullopt;
  const int64_t days = sys_days{ymd}.time_since_epoch().count();
  return days * 86'400 + t.hour * 3'600 + t.minute * 60 + t.second;
}

std::optional<Millis> parse_delay_seconds(std::string_view s) {
  int64_t seconds = 0;
  for (char ch : s) {
    if (!is_digit(ch)) return std::nullopt;
    // Keep scanning after saturating so trailing garbage is still rejected.
    if (seconds < kSaturationSeconds) seconds = seconds * 10 + (ch - '0');
  }
  if (seconds >= kSaturationSeconds) return kRetryAfterSaturation;
  return Millis{seconds * 1000};
}

std::optional<Millis> parse_http_date(std::string_view s, system_clock::time_point now) {
  const int64_t now_ms = floor<milliseconds>(now.time_since_epoch()).count();
  const int year_now = static_cast<int>(year_month_day{floor<days>(now)}.year());

  std::optional<Civil> civil = parse_imf_fixdate(s);
  if (!civil) civil = parse_rfc850(s, year_now);
  if (!civil) civil = parse_asctime(s);
  if (!civil) return std::nullopt;
  auto secs = to_epoch_seconds(*civil);
  if (!secs) return std::nullopt;

  // Years are at most 9999, so milliseconds since 1970 fit easily in int64;
  // nanoseconds (system_clock's unit) would not, hence no time_point math.
  const int64_t diff = *secs * 1000 - now_ms;
  if (diff <= 0) return Millis{0};
  if (diff >= kRetryAfterSaturation.count()) return kRetryAfterSaturation;
  return Millis{diff};
}

}  // namespace

std::optional<Millis> parse_retry_after(std::string_view value,
                                        std::chrono::system_clock::time_point now) {
  value = trim(value);
  if (value.empty()) return std::nullopt;
  if (is_digit(value.front())) return parse_delay_seconds(value);
  return parse_http_date(value, now);
}

}  // namespace onelayer
