#include "shell/http1/proxy_responses.h"

#include <fmt/format.h>

#include "core/base/http_status.h"

namespace onelayer {

void append_proxy_response(std::string& out, int status, std::string_view reason, bool close,
                           std::string_view extra, bool head_request, std::string_view hint) {
  size_t body = reason.size() + 1 + (hint.empty() ? 0 : hint.size() + 1);
  fmt::format_to(std::back_inserter(out),
                 "HTTP/1.1 {} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n"
                 "x-onelayer-error: {}\r\n{}{}\r\n",
                 status, status_text(status), body, reason, extra,
                 close ? "Connection: close\r\n" : "");
  if (!head_request) {
    out.append(reason);
    out.push_back('\n');
    if (!hint.empty()) {
      out.append(hint);
      out.push_back('\n');
    }
  }
}

}  // namespace onelayer
