#include "shell/proxy_responses.h"

#include <fmt/format.h>

namespace onelayer {

const char* status_text(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return status < 200 ? "Informational" : status < 300 ? "OK" : status < 400 ? "Redirect"
                  : status < 500 ? "Client Error" : "Server Error";
  }
}

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
