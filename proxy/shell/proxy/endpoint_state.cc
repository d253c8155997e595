// The worker's DNS cache of one endpoint and its pool of idle connections.
#include "shell/proxy/endpoint_state.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "shell/http2/h2_client_connection.h"
#include "shell/http1/http1_client_connection.h"
#include "shell/io/connection_host.h"

namespace onelayer {

static constexpr Millis kDnsRefresh{30'000};

std::vector<sockaddr_storage> resolved_addresses(const addrinfo* res) {
  std::vector<sockaddr_storage> addrs;
  for (const addrinfo* a = res; a; a = a->ai_next) {
    if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
    sockaddr_storage ss{};
    std::memcpy(&ss, a->ai_addr, a->ai_addrlen);
    addrs.push_back(ss);
  }
  // IPv4 first: a dual-stack name such as localhost then reaches servers
  // that listen on 127.0.0.1 only.
  std::stable_partition(addrs.begin(), addrs.end(), [](const sockaddr_storage& a) { return a.ss_family == AF_INET; });
  return addrs;
}

static void on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res) {
  auto* ep = static_cast<EndpointState*>(req->data);
  ep->resolving = false;
  ep->last_resolve_error = status;
  if (status == 0) {
    std::vector<sockaddr_storage> addrs = resolved_addresses(res);
    if (!addrs.empty()) {
      const auto ipv4 = static_cast<size_t>(std::count_if(
          addrs.begin(), addrs.end(), [](const sockaddr_storage& a) { return a.ss_family == AF_INET; }));
      ep->balanced = ipv4 ? ipv4 : addrs.size();
      ep->addrs = std::move(addrs);
      ep->next_addr = 0;
      ep->resolved_at = Clock::now();
      ep->addr_text.clear();
      for (const sockaddr_storage& ss : ep->addrs) {
        char ip[INET6_ADDRSTRLEN] = {};
        if (ss.ss_family == AF_INET) {
          uv_ip4_name(reinterpret_cast<const sockaddr_in*>(&ss), ip, sizeof ip);
        } else {
          uv_ip6_name(reinterpret_cast<const sockaddr_in6*>(&ss), ip, sizeof ip);
        }
        ep->addr_text.emplace_back(ip);
      }
      ep->addrs_version++;
    }
  } else {
    spdlog::warn("dns: resolving {} failed: {}", ep->hp.host, uv_strerror(status));
  }
  if (res) uv_freeaddrinfo(res);
  std::vector<Http1ClientConnection*> waiting;
  waiting.swap(ep->waiting);
  for (Http1ClientConnection* u : waiting) {
    if (u->closing()) continue;
    if (ep->addrs.empty()) {
      u->fail_dns(status ? status : UV_EAI_NONAME);
    } else {
      u->start_connect();
    }
  }
  for (H2ClientConnection* c : std::vector<H2ClientConnection*>(ep->h2)) c->on_addresses_resolved(status);
}

void EndpointState::refresh_addresses() {
  if (literal || resolving || (!addrs.empty() && Clock::now() - resolved_at <= kDnsRefresh)) return;
  EndpointState* ep = this;
  ep->resolving = true;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string port = std::to_string(ep->hp.port);
  int rc = uv_getaddrinfo(ep->host->loop(), &ep->gai_req, on_resolved, ep->hp.host.c_str(), port.c_str(), &hints);
  if (rc != 0) {
    ep->resolving = false;
    ep->last_resolve_error = rc;
  }
}

}  // namespace onelayer
