// What to answer a request refused before it became an exchange, in
// whatever framing the codec that read it speaks: request admission's
// answer (shell/proxy's Admission) and the ExchangeStarter's carry it.
#pragma once

#include <string>

#include "core/http/http_headers.h"

namespace onelayer {

struct RouteMetrics;

struct RequestRefusal {
  // Refused when status != 0: answer status / reason (x-onelayer-error),
  // log `detail`, put `hint` in the body and `extra` in the head.
  int status = 0;
  const char* reason = "";
  const char* detail = "";
  std::string hint;
  Headers extra;
  RouteMetrics* counted_in = nullptr;  // the route's metrics when one matched
  // HTTP/1: the answer can keep the connection (no body left unread).
  bool keeps_connection = false;

  bool refused() const { return status != 0; }
};

}  // namespace onelayer
