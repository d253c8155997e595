// Socket addresses from text, for every place that needs one: listeners and
// the admin listener (a name is looked up once, at startup), upstream
// endpoints and health checks (IP literals; names go through the worker's
// asynchronous DNS cache in http1_client_connection.cc).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <uv.h>

#include <cstdint>
#include <string>

namespace onelayer {

// An IPv4 or IPv6 literal (without brackets) and `port` into `out`; false,
// and `out` untouched, for anything else.
bool ip_literal_address(const std::string& host, uint16_t port, sockaddr_storage* out);

// A literal, else a blocking getaddrinfo (startup only, before a loop
// serves anything): its first IPv4 or IPv6 address. Empty on success, else
// why not ("cannot resolve <host>: <reason>").
std::string resolve_address_blocking(const std::string& host, uint16_t port, sockaddr_storage* out);

// sizeof the sockaddr_in / sockaddr_in6 in `ss`.
socklen_t address_length(const sockaddr_storage& ss);
// The port of an AF_INET or AF_INET6 address, else 0.
uint16_t address_port(const sockaddr_storage& ss);
// The port a bound TCP handle listens on (a listener given port 0 reads
// back the one the kernel chose), or 0 if it cannot be read.
uint16_t local_port(const uv_tcp_t* tcp);

}  // namespace onelayer
