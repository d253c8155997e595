// What a transparent listener's connection speaks, told from its first
// bytes: HTTP/1.x (a request line that starts with a known method and a
// space), HTTP/2 with prior knowledge (the connection preface), a TLS
// ClientHello (handshake record, version 3.x), or something else. Pure.
#pragma once

#include <string_view>

namespace onelayer {

enum class FirstBytes { need_more, http1, h2c, tls, other };

FirstBytes classify_first_bytes(std::string_view bytes);

// The passthrough reason label for a classification that is not HTTP
// ("tls", "unknown"); "server_first" is the timeout's.
const char* passthrough_reason(FirstBytes b);

}  // namespace onelayer
