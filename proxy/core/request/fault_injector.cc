#include "core/request/fault_injector.h"

#include <algorithm>
#include <charconv>

#include "core/base/random.h"
#include "core/config/units.h"

namespace onelayer {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded value: %XX and '+' for a space.
std::optional<std::string> url_decode(std::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '+') {
      out += ' ';
    } else if (v[i] == '%') {
      if (i + 2 >= v.size()) return std::nullopt;
      int hi = hex_value(v[i + 1]), lo = hex_value(v[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += v[i];
    }
  }
  return out;
}

}  // namespace

std::optional<FaultInjector::Drill> FaultInjector::parse_drill_query(std::string_view query,
                                                                     std::string* error) {
  auto fail = [&](std::string why) -> std::optional<Drill> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  Drill d;
  bool have_upstream = false, have_status = false, have_for = false;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string_view key = pair.substr(0, eq);
    std::optional<std::string> value =
        url_decode(eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1));
    if (!value) return fail("bad percent-encoding in " + std::string(key));
    if (key == "upstream") {
      if (value->empty()) return fail("upstream must not be empty");
      d.upstream = *value;
      have_upstream = true;
    } else if (key == "status") {
      int code = 0;
      auto r = std::from_chars(value->data(), value->data() + value->size(), code);
      if (r.ec != std::errc() || r.ptr != value->data() + value->size() || code < 200 || code > 599)
        return fail("status must be a status code between 200 and 599");
      d.status = code;
      have_status = true;
    } else if (key == "for") {
      std::optional<Millis> ms = parse_duration(*value);
      if (!ms || ms->count() <= 0 || *ms > kMaxDrill)
        return fail("for must be a duration with a unit, above 0 and at most 24h (e.g. 30s)");
      d.duration = *ms;
      have_for = true;
    } else if (key == "percent") {
      double p = -1;
      auto r = std::from_chars(value->data(), value->data() + value->size(), p);
      if (r.ec != std::errc() || r.ptr != value->data() + value->size() || !(p >= 0 && p <= 100))
        return fail("percent must be a number between 0 and 100");
      d.percent = p;
    } else {
      return fail("unknown parameter " + std::string(key) + " (upstream, status, for, percent)");
    }
  }
  if (!have_upstream) return fail("upstream=NAME is required");
  if (!have_status) return fail("status=NNN is required");
  if (!have_for) return fail("for=DURATION is required (e.g. for=30s)");
  return d;
}

void FaultInjector::drop_expired(TimePoint now) {
  drills_.erase(std::remove_if(drills_.begin(), drills_.end(), [&](const Drill& d) { return d.until <= now; }),
                drills_.end());
  active_.store(drills_.size(), std::memory_order_relaxed);
}

void FaultInjector::start_drill(Drill drill, TimePoint now) {
  std::lock_guard lock(mu_);
  drop_expired(now);
  drill.until = now + drill.duration;
  auto it = std::find_if(drills_.begin(), drills_.end(), [&](const Drill& d) { return d.upstream == drill.upstream; });
  if (it != drills_.end()) {
    *it = std::move(drill);
  } else {
    drills_.push_back(std::move(drill));
  }
  active_.store(drills_.size(), std::memory_order_relaxed);
}

size_t FaultInjector::stop_all() {
  std::lock_guard lock(mu_);
  size_t n = drills_.size();
  drills_.clear();
  active_.store(0, std::memory_order_relaxed);
  return n;
}

std::vector<FaultInjector::Drill> FaultInjector::drills(TimePoint now) {
  std::lock_guard lock(mu_);
  drop_expired(now);
  return drills_;
}

bool FaultInjector::chance(double percent, Random& rng) {
  if (!(percent > 0)) return false;
  if (percent >= 100) return true;
  return rng.uniform() * 100.0 < percent;
}

FaultInjector::Decision FaultInjector::decide(const FaultConfig& route, std::string_view upstream, TimePoint now,
                                              Random& rng) {
  Decision out;
  if (active_.load(std::memory_order_relaxed) > 0) {
    int status = 0;
    double percent = 0;
    {
      std::lock_guard lock(mu_);
      drop_expired(now);
      for (const Drill& d : drills_) {
        if (d.upstream == upstream) {
          status = d.status;
          percent = d.percent;
        }
      }
    }
    if (status != 0 && chance(percent, rng)) {
      out.abort_status = status;
      out.from_drill = true;
      return out;
    }
  }
  if (!route.enabled) return out;
  if (route.abort_status != 0 && chance(route.abort_percent, rng)) {
    out.abort_status = route.abort_status;
    return out;
  }
  if (route.delay.count() > 0 && chance(route.delay_percent, rng)) out.delay = route.delay;
  return out;
}

}  // namespace onelayer
