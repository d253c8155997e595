#include "core/config/units.h"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>

namespace onelayer {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// "12.5" as whole + frac / scale, with the unit text that follows.
struct Decimal {
  uint64_t whole = 0;
  uint64_t frac = 0;
  uint64_t scale = 1;  // 10^(digits after the point)
  std::string_view unit;
};

constexpr size_t kMaxFracDigits = 18;  // 10^18 still fits in uint64_t

bool read_digits(std::string_view& s, uint64_t& out, size_t& count) {
  out = 0;
  count = 0;
  while (!s.empty() && is_digit(s.front())) {
    unsigned digit = static_cast<unsigned>(s.front() - '0');
    if (out > (std::numeric_limits<uint64_t>::max() - digit) / 10) return false;
    out = out * 10 + digit;
    s.remove_prefix(1);
    ++count;
  }
  return true;
}

// Digits, optionally "." and more digits, then the unit (possibly empty).
// Leading signs, spaces and a bare "." are refused.
std::optional<Decimal> read_decimal(std::string_view s) {
  Decimal d;
  size_t whole_digits = 0;
  if (!read_digits(s, d.whole, whole_digits) || whole_digits == 0) return std::nullopt;
  if (!s.empty() && s.front() == '.') {
    s.remove_prefix(1);
    size_t frac_digits = 0;
    // Trailing zeros do not change the value; strip them before counting so
    // "1.500000000000000000000s" still fits.
    std::string_view digits = s.substr(0, s.find_first_not_of("0123456789"));
    std::string_view rest = s.substr(digits.size());
    while (!digits.empty() && digits.back() == '0') digits.remove_suffix(1);
    if (s.empty() || !is_digit(s.front())) return std::nullopt;
    if (digits.size() > kMaxFracDigits) return std::nullopt;
    if (!read_digits(digits, d.frac, frac_digits)) return std::nullopt;
    for (size_t i = 0; i < frac_digits; ++i) d.scale *= 10;
    s = rest;
  }
  d.unit = s;
  return d;
}

// whole * unit + frac * unit / scale, if that is a whole number that fits.
std::optional<uint64_t> scale_exact(const Decimal& d, uint64_t unit, uint64_t limit) {
  using u128 = unsigned __int128;
  u128 whole = static_cast<u128>(d.whole) * unit;
  u128 frac_num = static_cast<u128>(d.frac) * unit;
  if (frac_num % d.scale != 0) return std::nullopt;
  u128 total = whole + frac_num / d.scale;
  if (total > limit) return std::nullopt;
  return static_cast<uint64_t>(total);
}

struct Unit {
  std::string_view name;
  uint64_t factor;
};

constexpr std::array<Unit, 4> kDurationUnits{{
    {"ms", 1}, {"s", 1'000}, {"m", 60'000}, {"h", 3'600'000}}};

constexpr uint64_t kKiB = 1024;
constexpr std::array<Unit, 10> kSizeUnits{{{"B", 1},
                                           {"KB", 1'000},
                                           {"kB", 1'000},
                                           {"MB", 1'000'000},
                                           {"GB", 1'000'000'000},
                                           {"TB", 1'000'000'000'000},
                                           {"KiB", kKiB},
                                           {"MiB", kKiB * kKiB},
                                           {"GiB", kKiB * kKiB * kKiB},
                                           {"TiB", kKiB * kKiB * kKiB * kKiB}}};

template <size_t N>
std::optional<uint64_t> find_unit(const std::array<Unit, N>& units, std::string_view name) {
  for (const Unit& u : units) {
    if (u.name == name) return u.factor;
  }
  return std::nullopt;
}

bool valid_hostname(std::string_view host) {
  if (host.empty() || host.front() == '.' || host.front() == '-') return false;
  char prev = 0;
  for (char c : host) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-' ||
              c == '.' || c == '_';
    if (!ok || (c == '.' && prev == '.')) return false;
    prev = c;
  }
  return true;
}

bool valid_ipv6_literal(std::string_view host) {
  if (host.find(':') == std::string_view::npos) return false;
  for (char c : host) {
    bool ok = is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' ||
              c == '.';
    if (!ok) return false;
  }
  return true;
}

std::optional<uint16_t> parse_port(std::string_view s) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  unsigned value = 0;
  for (char c : s) {
    if (!is_digit(c)) return std::nullopt;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value > 65535) return std::nullopt;
  return static_cast<uint16_t>(value);
}

}  // namespace

std::optional<Millis> parse_duration(std::string_view text) {
  std::optional<Decimal> d = read_decimal(text);
  if (!d) return std::nullopt;
  std::optional<uint64_t> factor = find_unit(kDurationUnits, d->unit);
  if (!factor) return std::nullopt;
  constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<Millis::rep>::max());
  std::optional<uint64_t> ms = scale_exact(*d, *factor, kMax);
  if (!ms) return std::nullopt;
  return Millis{static_cast<Millis::rep>(*ms)};
}

std::string format_duration(Millis d) {
  Millis::rep ms = d.count();
  if (ms == 0) return "0ms";
  for (size_t i = kDurationUnits.size(); i-- > 1;) {
    auto factor = static_cast<Millis::rep>(kDurationUnits[i].factor);
    if (ms % factor == 0) return std::to_string(ms / factor) + std::string(kDurationUnits[i].name);
  }
  return std::to_string(ms) + "ms";
}

std::optional<uint64_t> parse_size(std::string_view text) {
  std::optional<Decimal> d = read_decimal(text);
  if (!d) return std::nullopt;
  uint64_t factor = 1;
  if (!d->unit.empty()) {
    std::optional<uint64_t> f = find_unit(kSizeUnits, d->unit);
    if (!f) return std::nullopt;
    factor = *f;
  }
  return scale_exact(*d, factor, std::numeric_limits<uint64_t>::max());
}

std::string format_double(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

std::string format_size(uint64_t bytes) {
  if (bytes == 0) return "0";
  // Binary units only: the defaults and the examples are all KiB/MiB.
  static constexpr std::array<Unit, 4> kBinary{{{"TiB", kKiB * kKiB * kKiB * kKiB},
                                                {"GiB", kKiB * kKiB * kKiB},
                                                {"MiB", kKiB * kKiB},
                                                {"KiB", kKiB}}};
  for (const Unit& u : kBinary) {
    if (bytes % u.factor == 0) return std::to_string(bytes / u.factor) + std::string(u.name);
  }
  return std::to_string(bytes);
}

std::optional<HostPort> parse_host_port(std::string_view text) {
  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return std::nullopt;
    port = rest.substr(1);
    if (!valid_ipv6_literal(host)) return std::nullopt;
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    // An unbracketed IPv6 literal is ambiguous ("::1:80"): refuse it.
    if (!valid_hostname(host)) return std::nullopt;
  }
  std::optional<uint16_t> p = parse_port(port);
  if (!p) return std::nullopt;
  return HostPort{std::string(host), *p};
}

}  // namespace onelayer
