// The configuration model: an immutable value built by the loader
// (config_loader.h) and shared read-only by every worker. Pure data; no I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/grpc_status.h"
#include "core/base/destination.h"
#include "core/config/hedge_config.h"

namespace onelayer {

enum class Jitter { full, equal, decorrelated, none };
enum class InnerHops { forbid, strip, pass };
// What a listener does with a request header whose name has an underscore
// (CGI and WSGI servers map `Content_Length` onto `Content-Length`).
enum class UnderscoreHeaders { drop, reject, allow };

// A host:port pair as written in the file ("127.0.0.1:80", "[::1]:80",
// "svc.local:8080"). Host is stored without brackets.
struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string to_string() const;  // re-adds brackets for IPv6 literals
  bool operator==(const HostPort&) const = default;
};

struct Limits {
  uint64_t max_header_bytes = 32 * 1024;
  uint64_t max_body_bytes = 0;  // 0: no limit (bodies stream)
  Millis header_timeout{10'000};
  Millis idle_timeout{60'000};
  uint32_t max_connections = 10'000;
  // HTTP/2: streams one client connection may have open at once
  // (SETTINGS_MAX_CONCURRENT_STREAMS).
  uint32_t max_concurrent_streams = 100;
  bool operator==(const Limits&) const = default;
};

struct Backoff {
  Millis base{25};
  Millis cap{1'000};
  Jitter jitter = Jitter::full;
  bool operator==(const Backoff&) const = default;
};

struct RetryAfterPolicy {
  bool honor = true;
  Millis max{5'000};
  bool operator==(const RetryAfterPolicy&) const = default;
};

// Which attempt outcomes may be retried.
struct RetryOn {
  bool connect_failure = true;
  bool reset = true;
  bool timeout = true;
  std::vector<int> statuses{429, 502, 503, 504};
  // gRPC statuses (read from grpc-status) that are retried.
  std::vector<GrpcStatus> grpc_statuses{GrpcStatus::unavailable};
  bool has_status(int code) const;
  bool has_grpc_status(GrpcStatus s) const;
  bool operator==(const RetryOn&) const = default;
};

struct RetryPolicy {
  uint32_t max_attempts = 1;                 // 1: never retry
  std::optional<Millis> per_try_timeout;     // unset: the route timeout
  RetryOn retry_on;
  Backoff backoff;
  RetryAfterPolicy retry_after;
  std::string idempotency_key = "Idempotency-Key";  // "" = never
  // The route's owner declares every request on it safe to repeat (read-only
  // RPCs, say): the method rule is not applied.
  bool idempotent = false;
  uint64_t buffer_limit = 64 * 1024;
  HedgeConfig hedge;  // enabled by a `hedge:` block
  // A retry or hedge needs at least this much time left (nullopt: off).
  std::optional<LatencyThreshold> min_time_left;
  bool operator==(const RetryPolicy&) const = default;
};

struct RouteMatch {
  std::string host;                  // "" any; exact (case-insensitive) or "*.suffix"
  std::string path_prefix = "/";
  std::vector<std::string> methods;  // empty: any; upper case
  // Transparent listeners: the connection's original destination.
  std::optional<Cidr> destination;   // unset: any
  uint16_t destination_port = 0;     // 0: any
  // Caller identities (verified client certificates, docs/tls.md) the route
  // serves: exact or ending in `*`; empty: any caller.
  std::vector<std::string> callers;
  bool operator==(const RouteMatch&) const = default;
};

// Route-level fault injection (docs/storm.md "Fault drills"): an attempt
// gets an injected answer or a delay before the upstream is called. Off
// unless a `fault:` block is given.
struct FaultConfig {
  bool enabled = false;
  int abort_status = 0;       // 0: no abort
  double abort_percent = 0;   // share of attempts aborted, 0..100
  Millis delay{0};            // 0: no delay
  double delay_percent = 0;   // share of attempts delayed, 0..100
  int grpc_status = -1;       // 1..16: an abort of a gRPC call answers this grpc-status instead; -1: none
  bool operator==(const FaultConfig&) const = default;
};

struct Route {
  std::string name;
  RouteMatch match;
  std::string upstream;
  size_t upstream_index = 0;  // index into Config::upstreams, set by the loader
  Millis timeout{15'000};
  InnerHops inner_hops = InnerHops::forbid;
  bool has_retry = false;  // a `retry:` block was given
  RetryPolicy retry;       // max_attempts 1 without a `retry:` block
  FaultConfig fault;
  // Added by the loader (a transparent listener's fallback): never matched
  // by match_route, not written by config_to_yaml.
  bool implicit = false;
  bool operator==(const Route&) const = default;
};

// Downstream TLS on a listener (`listeners[].tls`): the certificate chain
// and key it presents, and the CA that client certificates are checked
// against (mutual TLS; "": none asked for).
struct ListenerTls {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  bool require_client_cert = false;  // false: asked for, a client without one still gets in
  bool operator==(const ListenerTls&) const = default;
};

// What a listener speaks on its port: HTTP/1.x, HTTP/2 with prior
// knowledge (h2c, told apart by the connection preface), or both.
struct ListenerProtocols {
  bool http1 = true;
  bool h2c = true;
  bool operator==(const ListenerProtocols&) const = default;
};

enum class ListenerMode { proxy, transparent };

struct Listener {
  std::string name;
  HostPort listen;
  Limits limits;
  UnderscoreHeaders headers_with_underscores = UnderscoreHeaders::drop;
  std::vector<Route> routes;
  // Requests in flight on this listener (all workers) beyond which new ones
  // are shed with 503 overloaded and a Retry-After; 0: unlimited.
  uint32_t max_concurrent_requests = 0;
  std::optional<bool> via;  // unset: the top-level `via`
  std::optional<bool> x_forwarded_for;  // unset: the top-level `x_forwarded_for`
  // Upgrade tokens forwarded (lower case); others are refused.
  std::vector<std::string> upgrades{"websocket"};
  std::optional<ListenerTls> tls;
  // Caller identities let in at all (exact or ending in `*`); empty: any,
  // with or without a client certificate.
  std::vector<std::string> allowed_callers;
  // Header (lower case) that carries the verified caller identity upstream;
  // "": not sent. A client's own copy is always removed.
  std::string caller_header;
  ListenerProtocols protocols;
  // One access-log line per request answered on this listener (false: none;
  // metrics and the error log are unchanged).
  bool access_log = true;
  // transparent: connections redirected by iptables, each with its
  // original destination (docs/transparent.md).
  ListenerMode mode = ListenerMode::proxy;
  Millis detect_timeout{300};  // transparent: no byte by then -> passthrough (server speaks first)
  // Fleet budgets: the service this listener fronts. Requests arriving here
  // that some layer already retried count against that service's fleet
  // budget ("other layer" retries). Empty: not counted.
  std::string fleet_service;
  bool operator==(const Listener&) const = default;
};

struct PoolConfig {
  uint32_t max_idle = 64;
  Millis idle_timeout{60'000};
  // HTTP/2 upstreams: streams one connection carries at once, within the
  // peer's SETTINGS_MAX_CONCURRENT_STREAMS; more open more connections.
  uint32_t max_concurrent_streams = 1000;
  // Requests one upstream connection carries before it is closed (HTTP/1.1:
  // after that response; HTTP/2: no new streams, closed once they end);
  // 0: no limit. Set at or below the upstream's own limit (NGINX's
  // keepalive_requests) so that it never refuses streams sent meanwhile.
  uint32_t max_requests_per_connection = 0;
  bool operator==(const PoolConfig&) const = default;
};

// requests: every request deposits `ratio`, a retry spends a token, the
// bucket refills at min_per_second. successes: the bucket starts full at
// min_per_second * 10, every failed attempt withdraws 1, every other attempt
// deposits `ratio`, and retries are allowed only above half full.
enum class BudgetMode { requests, successes };

// local: the budget is this process's alone. fleet: one budget per called
// service for every instance, kept in Redis (`fleet:` block, docs/fleet.md).
enum class BudgetScope { local, fleet };

struct RetryBudgetConfig {
  double ratio = 0.2;
  double min_per_second = 10;
  BudgetMode mode = BudgetMode::requests;
  BudgetScope scope = BudgetScope::local;
  std::string service{};  // scope fleet: the service's name in Redis (default: the upstream's name)
  bool operator==(const RetryBudgetConfig&) const = default;
};

struct CircuitBreakerConfig {
  bool enabled = false;
  uint32_t consecutive_failures = 5;
  Millis open_for{10'000};
  uint32_t half_open_probes = 1;
  bool operator==(const CircuitBreakerConfig&) const = default;
};

// How a request's endpoint is chosen (docs/endpoint-health.md).
enum class Balance { p2c, round_robin };

// Passive outlier detection: on unless `enabled: false`.
struct OutlierDetectionConfig {
  bool enabled = true;
  uint32_t consecutive_failures = 5;
  Millis base_ejection{10'000};
  Millis max_ejection{300'000};
  uint32_t max_ejected_percent = 50;
  bool operator==(const OutlierDetectionConfig&) const = default;
};

// Active health checks: off unless a `health_check:` block is given.
struct HealthCheckConfig {
  bool enabled = false;
  std::string path = "/healthz";
  Millis interval{5'000};
  Millis timeout{1'000};
  uint32_t unhealthy = 3;  // failed checks in a row that eject
  uint32_t healthy = 2;    // passed checks in a row that return
  bool operator==(const HealthCheckConfig&) const = default;
};

// What an upstream connection speaks: http1, or h2c (HTTP/2 over cleartext
// TCP with prior knowledge, multiplexed). h2 (HTTP/2 over TLS) is refused
// at load for now; `auto` (TLS only) offers ALPN and speaks http/1.1.
enum class UpstreamProtocol { http1, h2c, h2, auto_ };

// TLS to an upstream (`upstreams[].tls`). Empty strings: not given.
struct UpstreamTls {
  std::string sni;      // "": the endpoint's host name (not sent for an IP literal)
  bool verify = true;
  std::string ca_file;  // "": the system store
  std::string cert_file;  // client certificate chain (mTLS), with key_file
  std::string key_file;
  std::vector<std::string> alpn;  // empty: follows `protocol`
  bool operator==(const UpstreamTls&) const = default;
};

// Which requests an idle HTTP/1.1 upstream connection may carry next.
// safe: only later requests of the client connection it served last (a
// stray second response from the upstream reaches no other client);
// always: any request.
enum class ConnectionReuse : uint8_t { safe, always };

struct Upstream {
  std::string name;
  std::vector<HostPort> endpoints;
  Millis connect_timeout{1'000};
  PoolConfig pool;
  RetryBudgetConfig retry_budget;
  CircuitBreakerConfig circuit_breaker;
  Balance balance = Balance::p2c;
  OutlierDetectionConfig outlier_detection;
  HealthCheckConfig health_check;
  UpstreamProtocol protocol = UpstreamProtocol::http1;
  ConnectionReuse reuse = ConnectionReuse::safe;
  std::optional<UpstreamTls> tls;
  // Each attempt goes to the request's original destination (transparent
  // listeners); `endpoints` is empty.
  bool original_destination = false;
  bool implicit = false;  // added by the loader, not written by config_to_yaml
  bool operator==(const Upstream&) const = default;
};

// Names of the single-layer protocol headers (`headers:` block); defaults are
// the documented names (docs/retries.md). Stored lower case.
struct HeaderNames {
  std::string retry_owner = "x-retry-owner";
  std::string retry_attempt = "x-retry-attempt";
  std::string request_timeout_ms = "x-request-timeout-ms";
  std::string retry_exhausted = "x-retry-exhausted";
  std::string baggage_member = "retry-owner";  // W3C baggage member key
  bool operator==(const HeaderNames&) const = default;
};

// The `fleet:` block: where the fleet-wide retry budgets live (docs/fleet.md).
struct FleetConfig {
  HostPort redis;                  // a single Redis; empty host when sentinels are used
  std::vector<HostPort> sentinels;  // Sentinel: asked for `master`'s address
  std::string master;
  std::string password_file;  // else env ONELAYER_REDIS_PASSWORD; the password itself is never in Config
  std::string key_prefix = "onelayer";
  Millis sync_interval{1'000};
  Millis timeout{200};
  Millis stale_after{3'000};
  bool operator==(const FleetConfig&) const = default;
};

struct Config {
  std::string layer_id;  // default: host name
  HostPort admin_listen{"127.0.0.1", 9901};
  // Mutating admin endpoints need `Authorization: Bearer <token>` with the
  // token in this file ("": no token asked for).
  std::string admin_token_file;
  // Mutating admin endpoints answer non-loopback peers (403 otherwise).
  bool admin_allow_remote_mutations = false;
  uint32_t workers = 1;
  Millis drain_timeout{10'000};
  bool propagate_baggage = true;
  bool via = true;  // write `Via: 1.1 onelayer` both ways (listeners may override)
  // Append the client's address to X-Forwarded-For on requests (listeners
  // may override); off, a client's X-Forwarded-For goes on unchanged.
  bool x_forwarded_for = true;
  HeaderNames headers;
  std::vector<Listener> listeners;
  std::vector<Upstream> upstreams;
  std::optional<FleetConfig> fleet;  // absent: every budget is local

  std::string source_path;  // file it was loaded from
  std::string source_text;  // file contents, served by GET /config

  const Upstream* find_upstream(std::string_view name) const;  // nullptr if none
  // Whether the listener writes Via: its own `via`, else the top-level one.
  bool via_on(const Listener& l) const { return l.via.value_or(via); }
  // Whether the listener appends to X-Forwarded-For: its own
  // `x_forwarded_for`, else the top-level one.
  bool x_forwarded_for_on(const Listener& l) const { return l.x_forwarded_for.value_or(x_forwarded_for); }

  // Equal in everything but source_path/source_text: what a reload compares
  // to decide whether anything changed, and what the YAML round trip keeps.
  bool same_settings(const Config& other) const;
};

using ConfigPtr = std::shared_ptr<const Config>;

}  // namespace onelayer
