#include "shell/fleet/fleet_cli.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <hiredis/hiredis.h>

#include "core/config/config.h"
#include "core/fleet/fleet_share.h"
#include "core/config/units.h"

namespace onelayer::fleet {
namespace {

// Read-only: the service's members, its sums over the last 10 s by Redis's
// clock, and the age in ms of the latest member's last sync.
constexpr const char* kViewScript = R"(local t = redis.call('TIME')
local now = tonumber(t[1])
local ms = now * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {redis.call('ZCARD', KEYS[1]), 0, 0, 0, 0, 0, -1}
for s = now - 9, now do
  local v = redis.call('HMGET', KEYS[2] .. s, 'fa', 'r', 'f', 'ok', 'o')
  for i = 1, 5 do out[i + 1] = out[i + 1] + (tonumber(v[i]) or 0) end
end
local last = redis.call('ZREVRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if last[2] then out[7] = ms - tonumber(last[2]) end
return out
)";

void usage(FILE* out) {
  std::fputs(
      "usage: onelayer fleet --redis HOST:PORT [--service NAME] [--key-prefix P]\n"
      "                      [--ratio R] [--min-per-second F]\n"
      "  prints, per service sharing a fleet retry budget in that Redis: members, first\n"
      "  attempts/s, retries/s by this fleet and by other layers, arrivals per first attempt,\n"
      "  the budget left over the last 10 s (for the ratio and min_per_second given; defaults\n"
      "  0.2 and 10) and the age of the latest sync. Password: env ONELAYER_REDIS_PASSWORD.\n",
      out);
}

using Reply = std::unique_ptr<redisReply, void (*)(void*)>;

Reply command(redisContext* c, std::vector<std::string> args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return Reply(static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())),
               freeReplyObject);
}

}  // namespace

int run_fleet_cli(int argc, char** argv) {
  std::string addr, only, prefix = "onelayer";
  RetryBudgetConfig budget;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "onelayer fleet: unknown or incomplete argument %s\n", a.c_str());
      usage(stderr);
      return 2;
    }
    std::string v = argv[++i];
    if (a == "--redis") addr = v;
    else if (a == "--service") only = v;
    else if (a == "--key-prefix") prefix = v;
    else if (a == "--ratio") budget.ratio = std::atof(v.c_str());
    else if (a == "--min-per-second") budget.min_per_second = std::atof(v.c_str());
    else {
      std::fprintf(stderr, "onelayer fleet: unknown argument %s\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  std::optional<HostPort> hp = parse_host_port(addr);
  if (!hp || hp->port == 0) {
    std::fprintf(stderr, "onelayer fleet: --redis needs host:port (got \"%s\")\n", addr.c_str());
    return 2;
  }
  if (!only.empty() && !valid_service_name(only)) {
    std::fprintf(stderr, "onelayer fleet: invalid service name \"%s\"\n", only.c_str());
    return 2;
  }
  timeval tv{2, 0};
  std::unique_ptr<redisContext, void (*)(redisContext*)> c(redisConnectWithTimeout(hp->host.c_str(), hp->port, tv),
                                                           redisFree);
  if (!c || c->err) {
    std::fprintf(stderr, "onelayer fleet: cannot connect to %s: %s\n", addr.c_str(), c ? c->errstr : "out of memory");
    return 1;
  }
  redisSetTimeout(c.get(), tv);
  if (const char* pw = std::getenv("ONELAYER_REDIS_PASSWORD"); pw && *pw) {
    Reply r = command(c.get(), {"AUTH", pw});
    if (!r || r->type == REDIS_REPLY_ERROR) {
      std::fprintf(stderr, "onelayer fleet: AUTH failed\n");
      return 1;
    }
  }
  std::set<std::string> services;
  if (!only.empty()) {
    services.insert(only);
  } else {
    // Membership keys look like PREFIX:{service}:m; SCAN at most 1,000 rounds.
    std::string cursor = "0";
    for (int round = 0; round < 1000; ++round) {
      Reply r = command(c.get(), {"SCAN", cursor, "MATCH", prefix + ":{*}:m", "COUNT", "1000"});
      if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
          r->element[1]->type != REDIS_REPLY_ARRAY) {
        std::fprintf(stderr, "onelayer fleet: SCAN failed: %s\n", r && r->type == REDIS_REPLY_ERROR ? r->str : c->errstr);
        return 1;
      }
      for (size_t i = 0; i < r->element[1]->elements; ++i) {
        const redisReply* k = r->element[1]->element[i];
        if (k->type != REDIS_REPLY_STRING) continue;
        std::string key(k->str, k->len);
        size_t open = key.find('{'), close = key.rfind("}:m");
        if (open != std::string::npos && close != std::string::npos && close > open + 1)
          services.insert(key.substr(open + 1, close - open - 1));
      }
      cursor.assign(r->element[0]->str, r->element[0]->len);
      if (cursor == "0") break;
    }
  }
  std::printf("%-20s %7s %10s %10s %10s %9s %10s %9s\n", "service", "members", "first/s", "retries/s", "others/s",
              "arrivals", "left", "last_sync");
  for (const std::string& s : services) {
    Reply r = command(c.get(), {"EVAL", kViewScript, "2", members_key(prefix, s), counts_key_base(prefix, s)});
    bool ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 7;
    for (size_t i = 0; ok && i < 7; ++i) ok = r->element[i]->type == REDIS_REPLY_INTEGER;
    if (!ok) {
      std::fprintf(stderr, "onelayer fleet: %s: %s\n", s.c_str(),
                   r && r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
      return 1;
    }
    FleetSnapshot snap;
    snap.members = r->element[0]->integer;
    snap.window = {r->element[1]->integer, r->element[2]->integer, r->element[3]->integer, r->element[4]->integer,
                   r->element[5]->integer};
    const FleetShare share = compute_share(budget, snap, 0, Millis(1000));
    const double first = static_cast<double>(snap.window.first_attempts);
    const double arrivals =
        first > 0 ? (first + static_cast<double>(snap.window.retries + snap.window.other_layer)) / first : 0;
    const long long age = r->element[6]->integer;
    std::printf("%-20s %7lld %10.1f %10.1f %10.1f %9.3f %10.1f %9s\n", s.c_str(),
                static_cast<long long>(snap.members), first / kWindowSeconds,
                static_cast<double>(snap.window.retries) / kWindowSeconds,
                static_cast<double>(snap.window.other_layer) / kWindowSeconds, arrivals, share.left,
                age < 0 ? "never" : fmt::format("{:.1f}s", static_cast<double>(age) / 1000).c_str());
  }
  return 0;
}

}  // namespace onelayer::fleet
