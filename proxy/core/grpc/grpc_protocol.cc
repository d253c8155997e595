#include "core/grpc/grpc_protocol.h"

namespace onelayer {

bool is_grpc_content_type(std::string_view content_type) {
  constexpr std::string_view kType = "application/grpc";
  const std::string_view v = trim_ows(content_type);
  if (v.size() < kType.size() || !iequals(v.substr(0, kType.size()), kType)) return false;
  if (v.size() == kType.size()) return true;
  if (v[kType.size()] == '+') return true;
  // Parameters, OWS allowed before the ';' (RFC 9110 5.6.6).
  const std::string_view rest = trim_ows(v.substr(kType.size()));
  return !rest.empty() && rest.front() == ';';
}

bool is_grpc_request(const Headers& request_headers) {
  const Header* ct = find_header(request_headers, "content-type");
  return ct != nullptr && is_grpc_content_type(ct->value);
}

}  // namespace onelayer
