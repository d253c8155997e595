// Validation, routing and shedding of one request head (request_admission.h).
// The head is taken by reference: validation drops fields from it
// (underscored names, when the listener says so).
#include "shell/proxy/request_admission.h"

#include <spdlog/spdlog.h>

#include "core/base/random.h"
#include "core/callers/caller_patterns.h"
#include "core/request/request_validation.h"
#include "core/request/route_match.h"
#include "core/http/message_head.h"

namespace onelayer {

// `a` made a refusal, as a fresh Admission would be. admit_request() returns
// `a` itself on every path, so it is built in the caller's object.
static void refuse(Admission& a, int status, const char* reason, const char* detail, std::string hint = {}) {
  a = Admission();
  a.status = status;
  a.reason = reason;
  a.detail = detail;
  a.hint = std::move(hint);
}

// The listener's caller_header: a client's copies out, the verified
// identity in (when there is one).
static void set_caller_header(Headers& headers, const std::string& name, const std::string& caller) {
  std::erase_if(headers, [&](const Header& h) { return iequals(h.name, name); });
  if (!caller.empty()) headers.push_back({name, caller});
}

Admission admit_request(const GenerationPtr& gen, Random& random, const std::string& listener, MessageHead& head,
                        const std::string& caller, const Destination* dst) {
  Admission a;
  int li = gen->listener_index(listener);
  if (li < 0) {
    refuse(a, 503, "draining", "listener removed by reload");
    return a;
  }
  const Listener& l = gen->config->listeners[static_cast<size_t>(li)];
  RequestHeadFacts facts{head.method, head.target, head.http_major, head.http_minor, head.obs_fold,
                         head.chunked, head.has_content_length, head.content_length, head.checked_by_codec};
  RequestVerdict v = check_request_head(facts, head.headers, l.headers_with_underscores);
  if (v.refused()) {
    refuse(a, v.status, v.reason, v.detail, v.hint ? v.hint : "");
    return a;
  }
  if (v.underscore_fields_dropped > 0) {
    spdlog::info("listener {}: {} request header(s) with an underscore in the name dropped from {} {}",
                 listener, v.underscore_fields_dropped, head.method, head.target);
  }
  const bool no_body = head.content_length == 0 && !head.chunked;
  if (!callers_allow(l.allowed_callers, caller)) {
    refuse(a, 403, "caller_not_allowed", caller.empty() ? "no verified client certificate" : "not in allowed_callers");
    a.keeps_connection = no_body;
    return a;
  }
  bool caller_refused = false;
  const Route* route = match_route(l, v.host, v.path, head.method, dst, caller, &caller_refused);
  if (!route && caller_refused) {
    refuse(a, 403, "caller_not_allowed",
           caller.empty() ? "no verified client certificate" : "not among the callers of the matching routes");
    a.keeps_connection = no_body;
    return a;
  }
  if (!route && dst && l.mode == ListenerMode::transparent && l.routes.size() >= 2) {
    // The implicit fallbacks are the last two routes: HTTP/1.1, then h2c.
    route = &l.routes[l.routes.size() - (head.http_major == 2 ? 1 : 2)];
  }
  if (!route) {
    refuse(a, 404, "no_route", "no route matched");
    a.keeps_connection = no_body;  // the answer goes before a body the client would still send
    return a;
  }
  RequestVerdict routed = check_routed_request(facts, head.headers, l.limits.max_body_bytes, &a.expect_continue);
  if (routed.refused()) {
    refuse(a, routed.status, routed.reason, routed.detail);
    return a;
  }
  UpgradeVerdict upgrade = check_upgrade(facts, head.headers, l.upgrades);
  if (upgrade.refused()) {
    refuse(a, upgrade.status, upgrade.reason, upgrade.detail, upgrade.hint);
    return a;
  }
  const UpstreamProtocol up = gen->config->upstreams[route->upstream_index].protocol;
  if (upgrade.requested && (up == UpstreamProtocol::h2c || up == UpstreamProtocol::h2)) {
    refuse(a, 400, "upgrade_not_allowed", "Upgrade to an upstream that speaks HTTP/2",
           "onelayer tunnels an Upgrade only to an upstream with protocol: http1.");
    return a;
  }
  size_t ri = static_cast<size_t>(route - l.routes.data());
  RouteMetrics* rm = gen->route_metrics[static_cast<size_t>(li)][ri];
  // Shedding (listeners[].max_concurrent_requests): before any upstream is
  // called, and before a 100 Continue invites the body.
  if (const std::shared_ptr<LoadShedder>& shed = gen->shedders[static_cast<size_t>(li)]) {
    TimePoint now = Clock::now();
    a.permit = LoadShedder::try_acquire(shed, now);
    if (!a.permit) {
      refuse(a, 503, "overloaded", "max_concurrent_requests reached");
      std::string after;
      append_decimal(after, static_cast<uint64_t>(shed->retry_after_seconds(now, random)));
      a.extra.push_back({"Retry-After", std::move(after)});
      a.counted_in = rm;
      a.keeps_connection = no_body;
      return a;
    }
  }
  if (!l.caller_header.empty()) set_caller_header(head.headers, l.caller_header, caller);
  a.gen = gen;
  a.listener_index = li;
  a.route = route;
  a.metrics = rm;
  a.upstream_target = std::move(v.upstream_target);
  a.upgrade = upgrade.requested;
  a.upgrade_protocols = std::move(upgrade.protocols);
  if (dst) a.destination = *dst;
  return a;
}

}  // namespace onelayer
