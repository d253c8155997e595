// Where a server codec hands a request head it parsed: either refused (the
// codec answers what it is told in its own framing) or admitted, as a
// RequestExchange made for the codec's DownstreamStream. The HTTP/1
// connection and each HTTP/2 stream ask it the same way, and neither knows
// what stands behind it: shell/proxy's ProxyExchangeStarter (request
// admission, then an Exchange), which the worker owns.
#pragma once

#include <memory>
#include <string>

#include "shell/stream/downstream_stream.h"
#include "shell/stream/request_exchange.h"
#include "shell/stream/request_refusal.h"

namespace onelayer {

struct Destination;
struct MessageHead;

class ExchangeStarter {
 public:
  // Refused (RequestRefusal::refused()), or admitted:
  struct Start : RequestRefusal {
    // The exchange, made but not started (RequestExchange::start).
    std::unique_ptr<RequestExchange> exchange;
    bool expect_continue = false;  // answer 100 Continue before reading the body
    bool upgrade = false;          // an allowed Upgrade was asked for
  };

  virtual ~ExchangeStarter() = default;

  // `head` (taken over when admitted) came on listener `listener` from
  // `caller` (the client's verified identity, "" none); `dst`: the
  // connection's original destination (transparent listeners), else null.
  // The exchange answers through `down`.
  virtual Start start(DownstreamStream& down, const std::string& listener, MessageHead& head,
                      const std::string& caller, const Destination* dst) = 0;
};

}  // namespace onelayer
