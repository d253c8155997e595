// The proxy's ExchangeStarter: request admission (admit_request), then an
// Exchange for the admitted request. The worker owns one and hands it the
// generation it caches, its random generator and itself as the ProxyHost
// the exchanges it makes run on.
#pragma once

#include "core/base/random.h"
#include "shell/proxy/runtime.h"
#include "shell/stream/exchange_starter.h"

namespace onelayer {

class ProxyHost;
class Random;

class ProxyExchangeStarter final : public ExchangeStarter {
 public:
  // `gen`: the worker's cached generation, refreshed from `rt` per request
  // as the worker refreshes it; all three outlive this.
  ProxyExchangeStarter(ProxyHost* host, const Runtime& rt, GenerationPtr& gen, Random& random)
      : host_(host), rt_(rt), gen_(gen), random_(random) {}

  Start start(DownstreamStream& down, const std::string& listener, MessageHead& head, const std::string& caller,
              const Destination* dst) override;

 private:
  ProxyHost* host_;
  const Runtime& rt_;
  GenerationPtr& gen_;
  Random& random_;
};

}  // namespace onelayer
