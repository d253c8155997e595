// What a server codec (the HTTP/1 connection, an HTTP/2 stream) needs of
// its loop thread besides I/O: where a request becomes an exchange, where
// a finished exchange is freed, and whether a listener logs access. The
// Worker (shell/server) is the one host in the proxy, through
// Http1ServerHost (shell/http1), which adds what the HTTP/1 connection
// needs besides. A codec reaches it as its ConnectionHost: the connection
// holds no pointer more.
#pragma once

#include <memory>
#include <string>

#include "shell/io/connection_host.h"
#include "shell/stream/exchange_starter.h"
#include "shell/stream/request_exchange.h"

namespace onelayer {

class ServerCodecHost : public ConnectionHost {
 public:
  virtual ExchangeStarter& exchanges() = 0;
  // Frees a finished exchange after the current callback chain: never
  // inside one of its own callbacks.
  virtual void retire(std::unique_ptr<RequestExchange> ex) = 0;
  // Whether `listener` writes access log lines (the generation in force).
  virtual bool logs_access(const std::string& listener) = 0;

 protected:
  explicit ServerCodecHost(Metrics& metrics) : ConnectionHost(metrics) {}
  ~ServerCodecHost() = default;
};

}  // namespace onelayer
