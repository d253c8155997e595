// Where a connection redirected by iptables (nat REDIRECT) was going: the
// kernel keeps it in the connection's conntrack entry and hands it back
// with getsockopt SO_ORIGINAL_DST (IPv4) or IP6T_SO_ORIGINAL_DST (IPv6).
#pragma once

#include <uv.h>

#include "core/base/destination.h"

namespace onelayer {

// 0 and `*out` set, or a negative errno (ENOENT: the kernel has no NAT
// record of it, e.g. conntrack is not loaded or nothing redirected it).
int read_original_destination(uv_tcp_t* tcp, Destination* out);

// The connection's own (local) address: for a redirected connection, the
// listener's.
bool read_local_address(uv_tcp_t* tcp, Destination* out);

}  // namespace onelayer
