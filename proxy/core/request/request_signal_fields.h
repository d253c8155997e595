// RequestSignalFields: where the fields that shape a request's retry
// handling are in its field list (retry owner, baggage, the caller's
// timeouts, content type, the route's idempotency key), found in one pass.
//
// Exchange::start asked each question with its own scan of the list, five
// or six in all, on every request; most requests carry none of these
// fields. With this pass the absent ones cost nothing more, and the full
// readers (detect_outer_owner, request_timeout) run only when their field
// is there, with the same answer.
#pragma once

#include <string_view>

#include "core/config/config.h"
#include "core/http/http_headers.h"

namespace onelayer {

struct RequestSignalFields {
  // Each: the first field of that name (case-insensitive), or null.
  const Header* retry_owner = nullptr;      // names.retry_owner
  const Header* baggage = nullptr;          // baggage
  const Header* request_timeout = nullptr;  // names.request_timeout_ms
  const Header* grpc_timeout = nullptr;     // grpc-timeout
  const Header* content_type = nullptr;     // content-type
  const Header* idempotency_key = nullptr;  // the route's key; null when it has none ("")

  // Whether detect_outer_owner() can find an owner: without either field it
  // answers "not owned".
  bool may_be_outer_owned() const { return retry_owner != nullptr || baggage != nullptr; }
  // Whether request_timeout() can shorten the route's timeout: without
  // either field it answers the route's.
  bool may_shorten_timeout() const { return request_timeout != nullptr || grpc_timeout != nullptr; }

  static RequestSignalFields find(const Headers& h, const HeaderNames& names, std::string_view idempotency_key);
};

}  // namespace onelayer
