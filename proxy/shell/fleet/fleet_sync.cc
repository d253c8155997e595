#include "shell/fleet/fleet_sync.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "shell/fleet/redis_adapter.h"

namespace onelayer::fleet {
namespace {

// KEYS[1]: the service's membership set; KEYS[2]: the prefix of its
// per-second count hashes. ARGV: instance id, membership lifetime (ms),
// then this instance's first attempts, retries, failed attempts, other
// attempts and other layers' retries since its last sync. Redis's clock
// names the second, so every instance counts in the same seconds. Returns
// {members, and the five sums over the last 10 s}.
constexpr const char* kScript = R"(local t = redis.call('TIME')
local now = tonumber(t[1])
local ms = now * 1000 + math.floor(tonumber(t[2]) / 1000)
local names = {'fa', 'r', 'f', 'ok', 'o'}
local h = KEYS[2] .. now
for i = 1, 5 do
  local v = tonumber(ARGV[2 + i])
  if v and v > 0 then redis.call('HINCRBY', h, names[i], v) end
end
redis.call('EXPIRE', h, 15)
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], ms, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms - ttl)
redis.call('PEXPIRE', KEYS[1], ttl * 2)
local out = {redis.call('ZCARD', KEYS[1]), 0, 0, 0, 0, 0}
for s = now - 9, now do
  local v = redis.call('HMGET', KEYS[2] .. s, 'fa', 'r', 'f', 'ok', 'o')
  for i = 1, 5 do out[i + 1] = out[i + 1] + (tonumber(v[i]) or 0) end
end
return out
)";

constexpr uintptr_t kAuth = 1;
constexpr uintptr_t kScriptLoad = 2;
constexpr size_t kMaxPassword = 4096;

// The password for AUTH: password_file, else ONELAYER_REDIS_PASSWORD, else
// none. Never logged; errors name the file, not its contents.
bool read_password(const FleetConfig& cfg, std::string& out, std::string& error) {
  out.clear();
  if (cfg.password_file.empty()) {
    const char* env = std::getenv("ONELAYER_REDIS_PASSWORD");
    if (env != nullptr) out.assign(env, strnlen(env, kMaxPassword));
    return true;
  }
  int fd = ::open(cfg.password_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot read password_file " + cfg.password_file + ": " + std::strerror(errno);
    return false;
  }
  char buf[kMaxPassword];
  ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n < 0) {
    error = "cannot read password_file " + cfg.password_file + ": " + std::strerror(errno);
    return false;
  }
  out.assign(buf, static_cast<size_t>(n));
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return true;
}

std::string reply_error_text(const redisReply* r) {
  std::string s(r->str, std::min<size_t>(r->len, 200));
  for (char& c : s)
    if (c < 0x20 || c > 0x7e) c = '?';
  return s;
}

}  // namespace

struct FleetSync::Service {
  Service(std::string n, Millis stale_after, TimePoint now) : name(std::move(n)), core(stale_after, now) {}
  std::string name;
  std::shared_ptr<UpstreamShared> ups;  // nullptr: only a listener fronts the service here
  RetryBudgetConfig budget;
  std::shared_ptr<std::atomic<int64_t>> other;  // arrivals already retried, from listeners
  FleetService core;
  FleetCounts pending;  // taken from the counters, not yet acknowledged by Redis
  std::string key_m, key_c;
};

FleetSync::FleetSync(uv_loop_t* loop, Runtime& rt) : loop_(loop), rt_(rt) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  instance_id_ = fmt::format("{}:{}:{:08x}", host, getpid(), static_cast<uint32_t>(random_.next()));
  uv_timer_init(loop_, &tick_);
  uv_timer_init(loop_, &deadline_);
  uv_timer_init(loop_, &reconnect_);
  tick_.data = deadline_.data = reconnect_.data = this;
  timers_open_ = true;
}

FleetSync::~FleetSync() { close(); }

void FleetSync::close() {
  drop_link();
  if (!timers_open_) return;
  timers_open_ = false;
  uv_close(reinterpret_cast<uv_handle_t*>(&tick_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&deadline_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&reconnect_), nullptr);
}

void FleetSync::configure(const GenerationPtr& gen) {
  if (!timers_open_) return;
  const Config& c = *gen->config;
  const bool changed = c.fleet != cfg_;
  const TimePoint now = Clock::now();
  if (changed) {
    drop_link();
    uv_timer_stop(&tick_);
    uv_timer_stop(&reconnect_);
    cfg_ = c.fleet;
    failures_ = 0;
    warned_ = false;
  }
  if (sync_left_ > 0) {
    // Replies to a sync sent before this reload are dropped (its services
    // may have moved); the link stays, and the next tick syncs again.
    ++round_;
    sync_left_ = 0;
    uv_timer_stop(&deadline_);
  }
  if (!cfg_) {
    services_.clear();
    return;
  }
  std::vector<std::unique_ptr<Service>> next;
  auto take = [&](const std::string& name) -> Service& {
    for (auto& s : next)
      if (s->name == name) return *s;
    for (auto& s : services_) {
      if (s && s->name == name && !changed) {
        next.push_back(std::move(s));
        next.back()->core.set_stale_after(cfg_->stale_after);
        next.back()->ups.reset();
        next.back()->other.reset();
        next.back()->budget = RetryBudgetConfig{};
        return *next.back();
      }
    }
    next.push_back(std::make_unique<Service>(name, cfg_->stale_after, now));
    next.back()->key_m = members_key(cfg_->key_prefix, name);
    next.back()->key_c = counts_key_base(cfg_->key_prefix, name);
    return *next.back();
  };
  for (size_t i = 0; i < c.upstreams.size(); ++i) {
    const RetryBudgetConfig& b = c.upstreams[i].retry_budget;
    if (b.scope != BudgetScope::fleet) continue;
    Service& s = take(b.service);
    s.ups = gen->upstreams[i];
    s.budget = b;
  }
  for (size_t i = 0; i < c.listeners.size(); ++i) {
    if (c.listeners[i].fleet_service.empty()) continue;
    take(c.listeners[i].fleet_service).other = gen->fleet_other[i];
  }
  services_ = std::move(next);
  if (changed) {
    const auto interval = static_cast<uint64_t>(cfg_->sync_interval.count());
    uv_timer_start(&tick_, on_tick, interval, interval);
    spdlog::info("fleet: {} service(s) share their retry budgets through Redis at {}", services_.size(),
                 cfg_->sentinels.empty() ? cfg_->redis.to_string() : "the sentinels' master " + cfg_->master);
    connect();
  }
}

// ------------------------------------------------------------------ link

void FleetSync::connect() {
  if (!cfg_ || ac_ != nullptr) return;
  HostPort to;
  if (!cfg_->sentinels.empty() && phase_ != Phase::handshake) {
    phase_ = Phase::sentinel;
    to = cfg_->sentinels[sentinel_next_++ % cfg_->sentinels.size()];
  } else {
    phase_ = Phase::handshake;
    to = cfg_->sentinels.empty() ? cfg_->redis : master_;
  }
  redisAsyncContext* ac = redisAsyncConnect(to.host.c_str(), to.port);
  if (ac == nullptr) {
    phase_ = Phase::idle;
    fail("connect", "out of memory");
    return;
  }
  if (ac->err != 0) {
    std::string why = ac->errstr;
    redisAsyncFree(ac);
    phase_ = Phase::idle;
    fail("connect", to.to_string() + ": " + why);
    return;
  }
  if (!redis_attach(ac, loop_, on_oversize, this)) {
    redisAsyncFree(ac);
    phase_ = Phase::idle;
    fail("connect", "cannot watch the socket");
    return;
  }
  ac->data = this;
  ac_ = ac;
  redisAsyncSetConnectCallback(ac, on_connect);
  redisAsyncSetDisconnectCallback(ac, on_disconnect);
  uv_timer_start(&deadline_, on_deadline, static_cast<uint64_t>(cfg_->timeout.count()), 0);
}

void FleetSync::on_connect(const redisAsyncContext* cac, int status) {
  auto* self = static_cast<FleetSync*>(cac->data);
  if (self == nullptr) return;
  auto* ac = const_cast<redisAsyncContext*>(cac);
  if (status != REDIS_OK) {
    self->ac_ = nullptr;  // hiredis frees it after this callback
    std::string why = ac->errstr;
    self->fail("connect", why);
    return;
  }
  if (self->phase_ == Phase::sentinel) {
    const char* argv[] = {"SENTINEL", "get-master-addr-by-name", self->cfg_->master.c_str()};
    redisAsyncCommandArgv(ac, on_sentinel_reply, nullptr, 3, argv, nullptr);
    return;
  }
  self->connected();
}

void FleetSync::connected() {
  std::string password, error;
  if (!read_password(*cfg_, password, error)) {
    fail("auth", error);
    return;
  }
  handshake_left_ = 0;
  if (!password.empty()) {
    const char* argv[] = {"AUTH", password.data()};
    size_t lens[] = {4, password.size()};
    redisAsyncCommandArgv(ac_, on_handshake_reply, reinterpret_cast<void*>(kAuth), 2, argv, lens);
    ++handshake_left_;
  }
  const char* argv[] = {"SCRIPT", "LOAD", kScript};
  redisAsyncCommandArgv(ac_, on_handshake_reply, reinterpret_cast<void*>(kScriptLoad), 3, argv, nullptr);
  ++handshake_left_;
}

void FleetSync::on_sentinel_reply(redisAsyncContext* ac, void* r, void*) {
  auto* self = static_cast<FleetSync*>(ac->data);
  if (self == nullptr || r == nullptr) return;
  auto* reply = static_cast<redisReply*>(r);
  if (reply->type == REDIS_REPLY_ERROR) {
    self->fail("sentinel", "sentinel: " + reply_error_text(reply));
    return;
  }
  HostPort master;
  bool ok = reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
            reply->element[0]->type == REDIS_REPLY_STRING && reply->element[1]->type == REDIS_REPLY_STRING &&
            reply->element[0]->len > 0 && reply->element[0]->len < 256;
  if (ok) {
    master.host.assign(reply->element[0]->str, reply->element[0]->len);
    const std::string port(reply->element[1]->str, reply->element[1]->len);
    char* end = nullptr;
    long p = std::strtol(port.c_str(), &end, 10);
    ok = !port.empty() && end == port.c_str() + port.size() && p > 0 && p < 65536 &&
         master.host.find_first_of(" \r\n\t") == std::string::npos;
    master.port = static_cast<uint16_t>(p);
  }
  if (!ok) {
    self->fail("sentinel", "the sentinel does not know master " + self->cfg_->master);
    return;
  }
  // Done with the sentinel: connect to the master it named.
  self->drop_link();
  self->master_ = master;
  self->phase_ = Phase::handshake;
  self->connect();
}

void FleetSync::on_handshake_reply(redisAsyncContext* ac, void* r, void* priv) {
  auto* self = static_cast<FleetSync*>(ac->data);
  if (self == nullptr || r == nullptr || self->phase_ != Phase::handshake) return;
  auto* reply = static_cast<redisReply*>(r);
  const bool auth = reinterpret_cast<uintptr_t>(priv) == kAuth;
  if (reply->type == REDIS_REPLY_ERROR) {
    // Of an answer to AUTH only its error code is logged: a server that
    // echoed what it was sent would otherwise put the password in the log.
    std::string text = reply_error_text(reply);
    if (auth) text = text.substr(0, text.find(' '));
    self->fail(auth || text.rfind("NOAUTH", 0) == 0 ? "auth" : "error", (auth ? "AUTH: " : "SCRIPT LOAD: ") + text);
    return;
  }
  if (auth) {
    if (reply->type != REDIS_REPLY_STATUS) {
      self->fail("reply", "AUTH answered with a reply of the wrong type");
      return;
    }
  } else {
    bool hex = reply->type == REDIS_REPLY_STRING && reply->len == 40 &&
               std::all_of(reply->str, reply->str + 40, [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
    if (!hex) {
      self->fail("reply", "SCRIPT LOAD answered with something else than a SHA1");
      return;
    }
    self->script_sha_.assign(reply->str, 40);
  }
  if (--self->handshake_left_ > 0) return;
  self->phase_ = Phase::ready;
  uv_timer_stop(&self->deadline_);
  self->send_sync();
}

void FleetSync::on_disconnect(const redisAsyncContext* ac, int status) {
  auto* self = static_cast<FleetSync*>(ac->data);
  if (self == nullptr) return;
  self->ac_ = nullptr;  // hiredis frees it after this callback
  self->fail("disconnected", status == REDIS_OK ? "Redis closed the connection" : std::string(ac->errstr));
}

void FleetSync::on_oversize(redisAsyncContext* ac, void* data) {
  auto* self = static_cast<FleetSync*>(data);
  if (self == nullptr || ac->data == nullptr) return;
  self->fail("too_large", fmt::format("a reply larger than {} bytes", kMaxReplyBuffer));
}

void FleetSync::on_deadline(uv_timer_t* t) {
  auto* self = static_cast<FleetSync*>(t->data);
  self->fail("timeout", fmt::format("no answer within {} ms", self->cfg_ ? self->cfg_->timeout.count() : 0));
}

void FleetSync::on_reconnect(uv_timer_t* t) { static_cast<FleetSync*>(t->data)->connect(); }

void FleetSync::drop_link() {
  if (timers_open_) uv_timer_stop(&deadline_);
  phase_ = Phase::idle;
  sync_left_ = 0;
  handshake_left_ = 0;
  ++round_;
  if (ac_ == nullptr) return;
  redisAsyncContext* ac = ac_;
  ac_ = nullptr;
  ac->data = nullptr;  // its callbacks, run while it is freed, do nothing
  redisAsyncFree(ac);  // inside a hiredis callback: freed when it returns
}

void FleetSync::fail(const char* reason, const std::string& detail) {
  count_error(reason);
  // Redis's replies and addresses only: no password ever reaches this text.
  if (failures_ == 0) spdlog::info("fleet: Redis link lost ({}: {}); reconnecting", reason, detail);
  else spdlog::debug("fleet: Redis link: {}: {}", reason, detail);
  drop_link();
  schedule_reconnect();
}

void FleetSync::schedule_reconnect() {
  if (!cfg_ || !timers_open_) return;
  // Capped at one sync interval, so a Redis that returns is found within
  // two; jittered over the upper half so a fleet does not reconnect in step.
  const int64_t cap = cfg_->sync_interval.count();
  const int64_t base = std::min<int64_t>(cap, int64_t{50} << std::min(failures_, 10));
  const int64_t delay = base / 2 + random_.between(0, base / 2);
  ++failures_;
  uv_timer_start(&reconnect_, on_reconnect, static_cast<uint64_t>(std::max<int64_t>(1, delay)), 0);
}

// ------------------------------------------------------------------ syncs

void FleetSync::on_tick(uv_timer_t* t) {
  auto* self = static_cast<FleetSync*>(t->data);
  self->check_stale(Clock::now());
  if (self->phase_ == Phase::ready && self->sync_left_ == 0) self->send_sync();
}

void FleetSync::check_stale(TimePoint now) {
  size_t went_local = 0;
  for (auto& s : services_) {
    if (!s->core.check_stale(now)) continue;
    ++went_local;
    if (s->ups) s->ups->budget.enter_fleet_safe_mode(s->core.safe_floor_scale(), now);
  }
  if (went_local > 0 && !warned_) {
    warned_ = true;
    spdlog::warn("fleet: no answer from Redis for {} ms: the retry budgets of {} service(s) are local (safe mode, "
                 "min_per_second divided by the last known fleet size) until Redis answers",
                 cfg_->stale_after.count(), went_local);
  }
}

void FleetSync::send_sync() {
  if (ac_ == nullptr || services_.empty()) return;
  const std::string ttl = std::to_string(std::max(cfg_->stale_after, cfg_->sync_interval * 3).count());
  ++round_;
  sync_left_ = 0;
  for (size_t i = 0; i < services_.size(); ++i) {
    Service& s = *services_[i];
    if (s.ups) s.pending += s.ups->budget.take_counts();
    if (s.other) s.pending.other_layer += s.other->exchange(0, std::memory_order_relaxed);
    const std::string n[] = {std::to_string(s.pending.first_attempts), std::to_string(s.pending.retries),
                             std::to_string(s.pending.failed_attempts), std::to_string(s.pending.ok_attempts),
                             std::to_string(s.pending.other_layer)};
    const char* argv[] = {"EVALSHA", script_sha_.c_str(), "2", s.key_m.c_str(), s.key_c.c_str(),
                          instance_id_.c_str(), ttl.c_str(), n[0].c_str(), n[1].c_str(), n[2].c_str(),
                          n[3].c_str(), n[4].c_str()};
    const uintptr_t tag = (static_cast<uintptr_t>(round_) << 16) | i;
    if (redisAsyncCommandArgv(ac_, on_sync_reply, reinterpret_cast<void*>(tag), 12, argv, nullptr) != REDIS_OK) {
      fail("disconnected", "cannot queue a command");
      return;
    }
    ++sync_left_;
  }
  sync_started_ = Clock::now();
  uv_timer_start(&deadline_, on_deadline, static_cast<uint64_t>(cfg_->timeout.count()), 0);
}

void FleetSync::on_sync_reply(redisAsyncContext* ac, void* r, void* priv) {
  auto* self = static_cast<FleetSync*>(ac->data);
  if (self == nullptr || r == nullptr) return;
  const auto tag = reinterpret_cast<uintptr_t>(priv);
  const size_t index = tag & 0xffff;
  if ((tag >> 16) != (self->round_ & (UINTPTR_MAX >> 16)) || index >= self->services_.size() ||
      self->sync_left_ == 0)
    return;  // a sync sent before a reload
  auto* reply = static_cast<redisReply*>(r);
  if (reply->type == REDIS_REPLY_ERROR) {
    const std::string text = reply_error_text(reply);
    self->fail(text.rfind("NOAUTH", 0) == 0 ? "auth" : "error", "EVALSHA: " + text);
    return;
  }
  bool ok = reply->type == REDIS_REPLY_ARRAY && reply->elements == 6;
  for (size_t i = 0; ok && i < 6; ++i)
    ok = reply->element[i]->type == REDIS_REPLY_INTEGER && reply->element[i]->integer >= 0;
  if (!ok) {
    self->fail("reply", "the sync script answered with a reply of the wrong shape");
    return;
  }
  FleetSnapshot snap;
  snap.members = reply->element[0]->integer;
  snap.window.first_attempts = reply->element[1]->integer;
  snap.window.retries = reply->element[2]->integer;
  snap.window.failed_attempts = reply->element[3]->integer;
  snap.window.ok_attempts = reply->element[4]->integer;
  snap.window.other_layer = reply->element[5]->integer;
  const TimePoint now = Clock::now();
  Service& s = *self->services_[index];
  s.core.add_own(s.pending, now);
  s.pending = {};
  const FleetShare share = s.core.on_synced(s.budget, snap, self->cfg_->sync_interval, now);
  if (s.ups) s.ups->budget.load_fleet_share(share.grant_micro, share.cap_micro);
  if (--self->sync_left_ > 0) return;
  uv_timer_stop(&self->deadline_);
  self->sync_seconds_.observe(std::chrono::duration<double>(now - self->sync_started_).count());
  self->last_answer_ = now;
  self->failures_ = 0;
  if (self->warned_) {
    self->warned_ = false;
    spdlog::info("fleet: Redis answers again: retry budgets are fleet-wide");
  }
}

// ------------------------------------------------------------------ views

std::string FleetSync::view() const {
  if (!cfg_) return "fleet: not configured (no fleet: block); every retry budget is local\n";
  const TimePoint now = Clock::now();
  std::string out = fmt::format("{:<20} {:<7} {:>7} {:>10} {:>10} {:>10} {:>9} {:>7} {:>10} {:>9}\n", "service",
                                "state", "members", "first/s", "retries/s", "others/s", "arrivals", "share",
                                "left", "last_sync");
  for (const auto& s : services_) {
    const FleetSnapshot& snap = s->core.last_snapshot();
    const FleetCounts& w = snap.window;
    const char* state = s->core.state() == FleetService::State::synced  ? "synced"
                        : s->core.state() == FleetService::State::local ? "local"
                                                                        : "pending";
    const double first = static_cast<double>(w.first_attempts);
    const double arrivals = first > 0 ? (first + static_cast<double>(w.retries + w.other_layer)) / first : 0;
    std::string age = s->core.ever_synced()
                          ? fmt::format("{:.1f}s", std::chrono::duration<double>(now - s->core.last_sync()).count())
                          : "never";
    out += fmt::format("{:<20} {:<7} {:>7} {:>10.1f} {:>10.1f} {:>10.1f} {:>9.3f} {:>7.3f} {:>10.1f} {:>9}\n",
                       s->name, state, snap.members, first / kWindowSeconds,
                       static_cast<double>(w.retries) / kWindowSeconds,
                       static_cast<double>(w.other_layer) / kWindowSeconds, arrivals, s->core.last_share().fraction,
                       s->core.last_share().left, age);
  }
  return out;
}

std::vector<GaugeSample> FleetSync::gauges() const {
  std::vector<GaugeSample> out;
  if (!cfg_) return out;
  for (const auto& s : services_) {
    const std::string l = "service=\"" + escape_label_value(s->name) + "\"";
    const FleetCounts& w = s->core.last_snapshot().window;
    out.push_back({"onelayer_fleet_state", l, s->core.state() == FleetService::State::synced ? 1.0 : 0.0,
                   "1 while the service's retry budget is fleet-wide (synced), 0 while local"});
    out.push_back({"onelayer_fleet_members", l, static_cast<double>(s->core.last_snapshot().members),
                   "Instances sharing the service's fleet budget, as of the last sync"});
    out.push_back({"onelayer_fleet_first_attempts_per_second", l,
                   static_cast<double>(w.first_attempts) / kWindowSeconds,
                   "The fleet's first attempts per second to the service over the last 10 s"});
    out.push_back({"onelayer_fleet_retries_per_second", l + ",layer=\"this\"",
                   static_cast<double>(w.retries) / kWindowSeconds,
                   "Retries per second to the service over the last 10 s, by this fleet or by other layers"});
    out.push_back({"onelayer_fleet_retries_per_second", l + ",layer=\"other\"",
                   static_cast<double>(w.other_layer) / kWindowSeconds, ""});
    out.push_back({"onelayer_fleet_share", l, s->core.last_share().fraction,
                   "This instance's share of the service's fleet budget (its share of first attempts)"});
  }
  const Histogram::Snapshot h = sync_seconds_.snapshot();
  const char* help = "Round trip of one fleet sync to Redis";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < Histogram::kBuckets; ++i) {
    cumulative += h.counts[i];
    out.push_back({"onelayer_fleet_sync_seconds", std::string("le=\"") + Histogram::kLeLabels[i] + "\"",
                   static_cast<double>(cumulative), help, "histogram", "_bucket"});
  }
  out.push_back({"onelayer_fleet_sync_seconds", "", h.sum_seconds(), help, "histogram", "_sum"});
  out.push_back({"onelayer_fleet_sync_seconds", "", static_cast<double>(h.count()), help, "histogram", "_count"});
  for (const char* reason : {"connect", "timeout", "auth", "error", "reply", "too_large", "disconnected", "sentinel"}) {
    auto it = errors_.find(reason);
    out.push_back({"onelayer_fleet_sync_errors_total", std::string("reason=\"") + reason + "\"",
                   static_cast<double>(it == errors_.end() ? 0 : it->second),
                   "Fleet syncs with Redis that failed, by reason", "counter"});
  }
  return out;
}

}  // namespace onelayer::fleet
