// Responses that onelayer makes itself: status line, x-onelayer-error reason,
// a short text body. (Status texts: core/base/http_status.h.)
#pragma once

#include <string>
#include <string_view>

namespace onelayer {

// Appends a complete response. `extra` holds raw "Name: value\r\n" lines.
// A response to HEAD (`head_request`) keeps its Content-Length and has no body.
// The body is the reason, then `hint` (what the client can do) when given.
void append_proxy_response(std::string& out, int status, std::string_view reason, bool close,
                           std::string_view extra = {}, bool head_request = false,
                           std::string_view hint = {});

}  // namespace onelayer
