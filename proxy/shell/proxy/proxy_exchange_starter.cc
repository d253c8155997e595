// Request admission, then the exchange (proxy_exchange_starter.h).
#include "shell/proxy/proxy_exchange_starter.h"

#include "shell/proxy/exchange.h"
#include "shell/proxy/request_admission.h"

namespace onelayer {

ExchangeStarter::Start ProxyExchangeStarter::start(DownstreamStream& down, const std::string& listener,
                                                   MessageHead& head, const std::string& caller,
                                                   const Destination* dst) {
  rt_.refresh(gen_);
  Admission a = admit_request(gen_, random_, listener, head, caller, dst);
  Start s;
  if (a.refused()) {
    static_cast<RequestRefusal&>(s) = std::move(static_cast<RequestRefusal&>(a));
    return s;
  }
  s.expect_continue = a.expect_continue;
  s.upgrade = a.upgrade;
  s.exchange = std::make_unique<Exchange>(&down, host_, a, head);
  return s;
}

}  // namespace onelayer
