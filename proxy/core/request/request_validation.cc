#include "core/request/request_validation.h"

#include <algorithm>
#include <array>

namespace onelayer {

namespace {

RequestVerdict refuse(int status, const char* reason, const char* detail) {
  RequestVerdict v;
  v.status = status;
  v.reason = reason;
  v.detail = detail;
  return v;
}

RequestVerdict bad_request(const char* detail) { return refuse(400, "bad_request", detail); }

bool has_underscore(std::string_view name) { return name.find('_') != std::string_view::npos; }

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  return s.size() > prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

// Fills host/path/upstream_target from the target; false when its form is
// not one the proxy serves. `absolute` tells whether it named an authority.
bool read_target(const RequestHeadFacts& head, const Header* host, RequestVerdict& v, bool& absolute) {
  std::string_view t = head.target;
  absolute = false;
  auto host_header = [&] {
    if (host) v.host = host->value;
  };
  if (!t.empty() && t[0] == '/') {
    v.path = t;
    v.upstream_target = t;
    host_header();
    return true;
  }
  if (t == "*" && head.method == "OPTIONS") {
    v.path = "*";
    v.upstream_target = t;
    host_header();
    return true;
  }
  // absolute-form (RFC 9112 3.2.2): routed by the configured upstreams with
  // its authority as the host; the host it names is never connected to.
  size_t skip = starts_with_ci(t, "http://") ? 7 : starts_with_ci(t, "https://") ? 8 : 0;
  if (skip == 0) return false;
  size_t slash = t.find_first_of("/?", skip);
  std::string_view authority = t.substr(skip, slash == std::string_view::npos ? std::string_view::npos : slash - skip);
  if (authority.empty() || authority.find('@') != std::string_view::npos || !is_valid_host_value(authority))
    return false;
  v.host = authority;
  v.upstream_target = slash == std::string_view::npos ? "/" : std::string(t.substr(slash));
  if (v.upstream_target[0] == '?') v.upstream_target.insert(0, "/");
  v.path = v.upstream_target;
  absolute = true;
  return true;
}

}  // namespace

RequestVerdict check_request_head(const RequestHeadFacts& head, Headers& headers,
                                  UnderscoreHeaders underscores) {
  // Every return is of `v` (built in the caller's object, not moved there).
  RequestVerdict v;
  if (head.method == "CONNECT") {
    v = bad_request("CONNECT is not supported: onelayer originates TLS itself");
    v.hint =
        "onelayer does not open CONNECT tunnels: it originates TLS to upstreams itself. "
        "Send the request to onelayer in plain HTTP (GET http://host/path, or GET /path with Host) "
        "and give the route's upstream a tls block, e.g. upstreams[].tls: {} "
        "(verified against the system store; ca_file, sni and client certificates are optional).";
    return v;
  }
  // HTTP/2 heads come translated by the HTTP/2 codec (the HTTP/1 parser
  // refuses a request line that says HTTP/2.0).
  if (head.http_major != 1 && head.http_major != 2) {
    v = bad_request("only HTTP/1.x and HTTP/2 are served");
    return v;
  }
  for (unsigned char c : head.target) {
    if (c <= 0x20 || c >= 0x7f) {  // RFC 9112 3.2
      v = bad_request("invalid byte in the request target");
      return v;
    }
  }
  // The only transfer coding forwarded is chunked alone ("gzip, chunked"
  // would reach the upstream without its gzip). The same pass counts the
  // underscored names, which matter only further down.
  size_t underscored = 0;
  for (const Header& h : headers) {
    if (iequals(h.name, "transfer-encoding") && !iequals(h.value, "chunked")) {
      v = bad_request("unsupported Transfer-Encoding");
      return v;
    }
    underscored += has_underscore(h.name) ? 1 : 0;
  }
  if (head.has_content_length && head.content_length > kMaxContentLength) {
    v = bad_request("Content-Length above 2^53-1");
    return v;
  }
  // HTTP/2 needs an authority as HTTP/1.1 needs Host (RFC 9113 8.3.1).
  bool http11 = head.http_major == 2 || (head.http_major == 1 && head.http_minor >= 1);
  const Header* host = nullptr;
  RequestHeaderProblem problem =
      head.obs_fold ? RequestHeaderProblem::obs_fold
                    : validate_request_headers(headers, http11, 0, &host, head.checked_by_codec);
  if (problem != RequestHeaderProblem::none) {
    v = bad_request(to_string(problem));
    return v;
  }

  if (underscored > 0 && underscores == UnderscoreHeaders::reject) {
    v = bad_request("header name with an underscore");
    return v;
  }

  bool absolute = false;
  if (!read_target(head, host, v, absolute)) {
    v = bad_request("request target form not supported");
    return v;
  }

  if (underscored > 0 && underscores == UnderscoreHeaders::drop) {
    std::erase_if(headers, [](const Header& h) { return has_underscore(h.name); });
    v.underscore_fields_dropped = underscored;
  }
  if (absolute) {
    auto host = std::find_if(headers.begin(), headers.end(), [](const Header& h) { return iequals(h.name, "host"); });
    if (host != headers.end()) {
      host->value = v.host;
    } else {
      headers.push_back(Header{"Host", v.host});
    }
  }
  return v;
}

RequestVerdict check_routed_request(const RequestHeadFacts& head, const Headers& headers,
                                    uint64_t max_body_bytes, bool* expect_continue) {
  *expect_continue = false;
  if (max_body_bytes > 0 && head.has_content_length && head.content_length > max_body_bytes)
    return refuse(413, "body_too_large", "Content-Length over max_body_bytes");
  if (const Header* e = find_header(headers, "expect")) {
    if (!iequals(e->value, "100-continue")) return refuse(417, "bad_request", "unsupported Expect");
    *expect_continue = true;
  }
  return RequestVerdict{};
}

UpgradeVerdict check_upgrade(const RequestHeadFacts& head, const Headers& headers,
                             const std::vector<std::string>& allowed) {
  UpgradeVerdict v;
  // One pass for both: most requests have neither field.
  bool listed = false;
  bool up = false;
  for (const Header& h : headers) {
    if (iequals(h.name, "connection")) {
      for_each_list_element(h.value, [&](std::string_view o) { listed |= iequals(o, "upgrade"); });
    } else {
      up = up || iequals(h.name, "upgrade");
    }
  }
  if (!listed || !up) return v;
  std::string asked;
  for (const Header& h : headers) {
    if (!iequals(h.name, "upgrade")) continue;
    for_each_list_element(h.value, [&](std::string_view p) {
      std::string_view name = p.substr(0, p.find('/'));
      // h2c is an offer a client falls back from (RFC 9113 3.1): ignored,
      // as a server may ignore any Upgrade (RFC 9110 7.8).
      if (iequals(name, "h2c")) return;
      v.requested = true;
      if (!asked.empty()) asked += ", ";
      asked += p;
      for (const std::string& a : allowed) {
        if (!iequals(name, a)) continue;
        if (!v.protocols.empty()) v.protocols += ", ";
        v.protocols += p;
        break;
      }
    });
  }
  if (!v.requested) return v;
  auto refuse_with = [&](const char* reason, const char* detail) {
    v.status = 400;
    v.reason = reason;
    v.detail = detail;
  };
  if (v.protocols.empty()) {
    refuse_with("upgrade_not_allowed", "Upgrade to a protocol the listener does not forward");
    std::string forwarded;
    for (const std::string& a : allowed) forwarded += (forwarded.empty() ? "" : ", ") + a;
    v.hint = "onelayer does not forward Upgrade: " + asked + " on this listener. It forwards " +
             (forwarded.empty() ? std::string("no upgrades") : "Upgrade: " + forwarded) +
             " (listeners[].upgrades in the config).";
    return v;
  }
  if (!(head.http_major == 1 && head.http_minor >= 1)) {
    refuse_with("bad_request", "Upgrade over HTTP/1.0");
    v.hint = "Upgrade needs HTTP/1.1.";
  } else if (head.chunked || head.content_length > 0) {
    refuse_with("bad_request", "Upgrade request with a body");
    v.hint = "An Upgrade request with a body is not forwarded.";
  }
  return v;
}

bool is_known_method(std::string_view method) {
  // llhttp 8.1's HTTP_METHOD_MAP without PRI (the HTTP/2 preface, which it
  // refuses as a request); tests/unit/shell/known_methods_test.cc checks the
  // list against llhttp itself.
  static constexpr std::array<std::string_view, 34> kKnown = {
      "DELETE",     "GET",      "HEAD",     "POST",     "PUT",       "CONNECT",     "OPTIONS",
      "TRACE",      "COPY",     "LOCK",     "MKCOL",    "MOVE",      "PROPFIND",    "PROPPATCH",
      "SEARCH",     "UNLOCK",   "BIND",     "REBIND",   "UNBIND",    "ACL",         "REPORT",
      "MKACTIVITY", "CHECKOUT", "MERGE",    "M-SEARCH", "NOTIFY",    "SUBSCRIBE",   "UNSUBSCRIBE",
      "PATCH",      "PURGE",    "MKCALENDAR", "LINK",   "UNLINK",    "SOURCE",
  };
  return std::find(kKnown.begin(), kKnown.end(), method) != kKnown.end();
}

}  // namespace onelayer
