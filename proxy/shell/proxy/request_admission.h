// Whether one request head may become an exchange, whatever protocol it came
// in: the listener still exists, the head passes the core's validation, a
// route matches, the route's checks pass (body size, Expect, Upgrade) and
// the listener's load shedder has room. A caller (the client's verified
// identity, "" none) the listener's allowed_callers or the routes' callers
// leave out is refused 403 caller_not_allowed before any of that reaches an
// upstream; with the listener's caller_header the identity goes upstream
// in it, and a client's own copy of that header is always dropped. The answer is either a refusal
// (what to answer and log) or what the exchange starts from. The HTTP/1
// connection and each HTTP/2 stream call this the same way.
#pragma once

#include <string>

#include "core/base/random.h"
#include "core/http/http_headers.h"
#include "core/retry/load_shedder.h"
#include "shell/proxy/runtime.h"
#include "shell/stream/request_refusal.h"

namespace onelayer {

class Random;
struct MessageHead;
struct Route;
struct RouteMetrics;

// Refused (RequestRefusal::refused()), or admitted:
struct Admission : RequestRefusal {
  // What the exchange starts from.
  GenerationPtr gen;
  int listener_index = -1;
  const Route* route = nullptr;
  RouteMetrics* metrics = nullptr;
  LoadShedder::Permit permit;
  std::string upstream_target;
  bool expect_continue = false;  // answer 100 Continue before reading the body
  bool upgrade = false;          // an allowed Upgrade was asked for
  std::string upgrade_protocols;
  Destination destination;  // transparent listeners: the connection's original destination
};

// `gen`: the config generation in force; `random`: the worker's (a shed
// request's Retry-After); `listener`: the name of the listener it came on.
// `caller`: the client's verified identity ("": none; docs/tls.md).
// `dst`: the connection's original destination (transparent listeners),
// else null. There a request no route matches takes the listener's
// implicit fallback route: its original destination, one attempt.
Admission admit_request(const GenerationPtr& gen, Random& random, const std::string& listener, MessageHead& head,
                        const std::string& caller, const Destination* dst = nullptr);

}  // namespace onelayer
