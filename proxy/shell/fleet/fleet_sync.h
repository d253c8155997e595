// The fleet budgets' link to Redis (docs/fleet.md): one per process, on the
// main loop, never on a worker.
//
// Every sync_interval it sends, in one pipelined round trip, one EVALSHA
// per fleet service: the script adds this instance's counts since the last
// sync to the service's per-second key, refreshes this instance's
// membership and returns the fleet's sums over the last 10 s. The pure core
// (core/fleet/fleet_share.h) turns each answer into the tokens loaded into
// the upstream's budget. Workers only ever touch the budget's counters.
//
// A round trip past `timeout`, an error, a reply of the wrong shape or too
// large, or a lost connection drops the link and reconnects with capped,
// jittered backoff; after stale_after without an answer a service's budget
// goes local (safe mode) with one warning. With Sentinel the master's
// address is asked of the sentinels before each connection, so a failover
// is followed at the next reconnect.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <uv.h>

#include "core/base/clock.h"
#include "core/base/default_random.h"
#include "core/config/config.h"
#include "core/fleet/fleet_share.h"
#include "core/metrics/histogram.h"
#include "core/metrics/metrics.h"
#include "shell/proxy/runtime.h"

struct redisAsyncContext;

namespace onelayer::fleet {

class FleetSync {
 public:
  FleetSync(uv_loop_t* loop, Runtime& rt);
  ~FleetSync();
  FleetSync(const FleetSync&) = delete;
  FleetSync& operator=(const FleetSync&) = delete;

  // After each install of a generation: starts, keeps (the fleet block is
  // unchanged: the connection stays) or restarts the link, and picks up the
  // generation's services.
  void configure(const GenerationPtr& gen);
  void close();  // before the loop closes

  std::string view() const;               // GET /fleet
  std::vector<GaugeSample> gauges() const;  // /metrics

 private:
  struct Service;
  enum class Phase { idle, sentinel, handshake, ready };

  static void on_tick(uv_timer_t* t);
  static void on_deadline(uv_timer_t* t);
  static void on_reconnect(uv_timer_t* t);
  static void on_connect(const redisAsyncContext* ac, int status);
  static void on_disconnect(const redisAsyncContext* ac, int status);
  static void on_oversize(redisAsyncContext* ac, void* data);
  static void on_sentinel_reply(redisAsyncContext* ac, void* reply, void* priv);
  static void on_handshake_reply(redisAsyncContext* ac, void* reply, void* priv);
  static void on_sync_reply(redisAsyncContext* ac, void* reply, void* priv);

  void connect();
  void connected();
  void send_sync();
  void fail(const char* reason, const std::string& detail);
  void drop_link();
  void schedule_reconnect();
  void check_stale(TimePoint now);
  void count_error(const char* reason) { ++errors_[reason]; }

  uv_loop_t* loop_;
  Runtime& rt_;
  std::optional<FleetConfig> cfg_;
  std::vector<std::unique_ptr<Service>> services_;
  std::string instance_id_;
  uv_timer_t tick_{}, deadline_{}, reconnect_{};
  bool timers_open_ = false;

  redisAsyncContext* ac_ = nullptr;
  Phase phase_ = Phase::idle;
  size_t sentinel_next_ = 0;
  HostPort master_;          // from the sentinels
  std::string script_sha_;
  int handshake_left_ = 0;   // replies the handshake still waits for
  int sync_left_ = 0;        // replies the sync in flight still waits for
  uint64_t round_ = 0;       // id of the sync in flight
  TimePoint sync_started_;
  int failures_ = 0;         // in a row, for the backoff
  bool warned_ = false;      // the safe-mode warning since the last answer
  DefaultRandom random_;

  Histogram sync_seconds_;
  std::map<std::string, uint64_t> errors_;
  TimePoint last_answer_{};
};

}  // namespace onelayer::fleet
