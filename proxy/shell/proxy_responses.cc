#include "shell/proxy_responses.h"

#include <fmt/format.h>

#include "core/http_status.h"

namespace onelayer {

void append_proxy_response(std::string& out, int status, std::string_view reason, bool close,
                           std::string_view extra, bool head_request) {
  fmt::format_to(std::back_inserter(out),
                 "HTTP/1.1 {} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n"
                 "x-onelayer-error: {}\r\n{}{}\r\n",
                 status, status_text(status), reason.size() + 1, reason, extra,
                 close ? "Connection: close\r\n" : "");
  if (!head_request) {
    out.append(reason);
    out.push_back('\n');
  }
}

}  // namespace onelayer
