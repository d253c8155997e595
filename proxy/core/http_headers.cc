#include "core/http_headers.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/baggage.h"

namespace onelayer {
namespace {

constexpr std::array<std::string_view, 7> kFixedHopByHop = {
    "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"};

// Foreign retry directives (PRODUCT.md): Envoy and Linkerd request headers
// that would make an inner hop retry on its own.
constexpr std::array<std::string_view, 11> kForeignRetryDirectives = {
    "x-envoy-retry-on",
    "x-envoy-retry-grpc-on",
    "x-envoy-max-retries",
    "x-envoy-retriable-status-codes",
    "x-envoy-retriable-header-names",
    "x-envoy-hedge-on-per-try-timeout",
    "x-envoy-upstream-rq-per-try-timeout-ms",
    "l5d-retry-http",
    "l5d-retry-grpc",
    "l5d-retry-limit",
    "l5d-retry-timeout",
};

constexpr std::string_view kEnvoyMaxRetries = "x-envoy-max-retries";
constexpr std::string_view kBaggage = "baggage";
// Written when layer_id cannot be: ownership must still reach inner hops.
constexpr std::string_view kFallbackOwner = "onelayer";

char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// RFC 9110 5.6.2 tchar, as a table: checked for every header name of every
// request and response, so it is on the hot path.
constexpr std::array<bool, 256> make_tchar_table() {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[static_cast<size_t>(c)] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[static_cast<size_t>(c)] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[static_cast<size_t>(c)] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}
constexpr std::array<bool, 256> kTchar = make_tchar_table();

bool is_tchar(unsigned char c) { return kTchar[c]; }

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

template <size_t N>
bool in_set(std::string_view name, const std::array<std::string_view, N>& set) {
  return std::any_of(set.begin(), set.end(), [&](std::string_view s) { return iequals(name, s); });
}

bool is_fixed_hop_by_hop(std::string_view name) { return in_set(name, kFixedHopByHop); }

bool is_framing(std::string_view name) { return iequals(name, "content-length") || iequals(name, "transfer-encoding"); }

// The connection-options of every Connection field, as views into `h`.
std::vector<std::string_view> connection_options(const Headers& h) {
  std::vector<std::string_view> opts;
  for (const Header& f : h) {
    if (!iequals(f.name, "connection")) continue;
    std::string_view v = f.value;
    while (true) {
      size_t comma = v.find(',');
      std::string_view t = trim_ows(v.substr(0, comma));
      if (!t.empty()) opts.push_back(t);
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
  }
  return opts;
}

bool listed_in(std::string_view name, const std::vector<std::string_view>& opts) {
  return std::any_of(opts.begin(), opts.end(), [&](std::string_view o) { return iequals(name, o); });
}

// Fields a Connection option may not remove: routing needs Host, and the retry
// protocol must survive hops that (mis)declare its fields hop-by-hop.
bool is_protected_from_connection(std::string_view name, const HeaderNames& names) {
  return iequals(name, "host") || iequals(name, kBaggage) || iequals(name, names.retry_owner) ||
         iequals(name, names.retry_attempt) || iequals(name, names.request_timeout_ms);
}

bool is_valid_field(const Header& f) { return is_token(f.name) && is_valid_field_value(f.value); }

// Appends `value` to the list field `name`: existing fields of that name are
// merged, in order, into the first one (RFC 9110 5.3 makes that equivalent).
void append_list_value(Headers& out, std::string_view name, std::string_view value) {
  if (value.empty()) return;
  auto first = std::find_if(out.begin(), out.end(), [&](const Header& f) { return iequals(f.name, name); });
  if (first == out.end()) {
    out.push_back(Header{std::string(name), std::string(value)});
    return;
  }
  std::string joined;
  for (auto it = first; it != out.end(); ++it) {
    if (!iequals(it->name, name) || it->value.empty()) continue;
    if (!joined.empty()) joined += ", ";
    joined += it->value;
  }
  if (!joined.empty()) joined += ", ";
  joined += value;
  first->value = std::move(joined);
  out.erase(std::remove_if(first + 1, out.end(), [&](const Header& f) { return iequals(f.name, name); }), out.end());
}

bool is_decimal(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// RFC 9112 3.2 / RFC 3986 3.2.2: uri-host [ ":" port ]; empty is allowed (a
// target without authority).
bool is_valid_host_value(std::string_view v) {
  auto is_unreserved_or_sub_delim = [](unsigned char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    return std::string_view("-._~!$&'()*+,;=").find(static_cast<char>(c)) != std::string_view::npos;
  };
  std::string_view host = v;
  std::string_view rest;
  if (!v.empty() && v.front() == '[') {
    size_t close = v.find(']');
    if (close == std::string_view::npos) return false;
    host = v.substr(1, close - 1);
    rest = v.substr(close + 1);
    if (host.empty()) return false;
    // IPv6 / IPvFuture: hex, ':', '.', plus the IPvFuture and zone-id characters.
    for (unsigned char c : host)
      if (!is_unreserved_or_sub_delim(c) && c != ':' && c != '%') return false;
  } else {
    size_t colon = v.find(':');
    host = v.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : v.substr(colon);
    for (size_t i = 0; i < host.size(); ++i) {
      unsigned char c = host[i];
      if (c == '%') {  // pct-encoded
        if (i + 2 >= host.size() || !std::isxdigit(static_cast<unsigned char>(host[i + 1])) ||
            !std::isxdigit(static_cast<unsigned char>(host[i + 2])))
          return false;
        i += 2;
      } else if (!is_unreserved_or_sub_delim(c)) {
        return false;
      }
    }
  }
  if (rest.empty()) return true;
  if (rest.front() != ':') return false;
  rest.remove_prefix(1);
  return rest.empty() || is_decimal(rest);  // port = *DIGIT
}

// A line break followed by SP/HTAB inside a value: the wrapper kept an obs-fold.
bool contains_obs_fold(std::string_view v) {
  for (size_t i = 0; i + 1 < v.size(); ++i)
    if (v[i] == '\n' && (v[i + 1] == ' ' || v[i + 1] == '\t')) return true;
  return false;
}

std::string_view owner_id(const Config& c) {
  if (c.layer_id.empty() || !is_valid_field_value(c.layer_id)) return kFallbackOwner;
  return c.layer_id;
}

// Joins every baggage field with "," (W3C: multiple headers are one list).
std::string joined_baggage(const Headers& h) {
  std::string joined;
  for (const Header& f : h) {
    if (!iequals(f.name, kBaggage)) continue;
    if (!joined.empty()) joined += ',';
    joined += f.value;
  }
  return joined;
}

// Sets the ownership member in the outgoing baggage; a merge that would pass
// the size limit leaves the baggage fields exactly as they were.
void merge_owner_into_baggage(Headers& out, const HeaderNames& names, std::string_view owner) {
  std::optional<std::string> merged = baggage_merge(joined_baggage(out), names.baggage_member, owner);
  if (!merged) return;
  auto first = std::find_if(out.begin(), out.end(), [](const Header& f) { return iequals(f.name, kBaggage); });
  if (first == out.end()) {
    out.push_back(Header{std::string(kBaggage), std::move(*merged)});
    return;
  }
  first->value = std::move(*merged);
  out.erase(std::remove_if(first + 1, out.end(), [](const Header& f) { return iequals(f.name, kBaggage); }), out.end());
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  return true;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

bool is_valid_field_value(std::string_view v) {
  for (unsigned char c : v)
    if ((c < 0x20 && c != '\t') || c == 0x7F) return false;
  return true;
}

const Header* find_header(const Headers& h, std::string_view name) {
  for (const Header& f : h)
    if (iequals(f.name, name)) return &f;
  return nullptr;
}

size_t count_headers(const Headers& h, std::string_view name) {
  return static_cast<size_t>(std::count_if(h.begin(), h.end(), [&](const Header& f) { return iequals(f.name, name); }));
}

bool is_hop_by_hop(std::string_view name, const Headers& all) {
  return is_fixed_hop_by_hop(name) || listed_in(name, connection_options(all));
}

RequestHeaderProblem validate_request_headers(const Headers& h, bool http11, size_t max_headers) {
  if (max_headers != 0 && h.size() > max_headers) return RequestHeaderProblem::too_many_headers;
  for (const Header& f : h) {
    if (!is_token(f.name)) return RequestHeaderProblem::invalid_name;
    if (contains_obs_fold(f.value)) return RequestHeaderProblem::obs_fold;
    if (!is_valid_field_value(f.value)) return RequestHeaderProblem::invalid_value;
  }
  size_t hosts = count_headers(h, "host");
  if (hosts > 1) return RequestHeaderProblem::duplicate_host;
  if (hosts == 0) return http11 ? RequestHeaderProblem::missing_host : RequestHeaderProblem::none;
  if (!is_valid_host_value(find_header(h, "host")->value)) return RequestHeaderProblem::invalid_value;
  return RequestHeaderProblem::none;
}

const char* to_string(RequestHeaderProblem p) {
  switch (p) {
    case RequestHeaderProblem::none: return "none";
    case RequestHeaderProblem::invalid_name: return "invalid_name";
    case RequestHeaderProblem::invalid_value: return "invalid_value";
    case RequestHeaderProblem::missing_host: return "missing_host";
    case RequestHeaderProblem::duplicate_host: return "duplicate_host";
    case RequestHeaderProblem::obs_fold: return "obs_fold";
    case RequestHeaderProblem::too_many_headers: return "too_many_headers";
  }
  return "unknown";
}

RetryOwnership detect_outer_owner(const Headers& h, const HeaderNames& names) {
  RetryOwnership r;
  if (const Header* owner = find_header(h, names.retry_owner); owner && !owner->value.empty()) {
    r.outer_owned = true;
    r.owner = owner->value;
    return r;
  }
  if (find_header(h, kBaggage) == nullptr) return r;
  std::optional<std::string> member = baggage_get(joined_baggage(h), names.baggage_member);
  if (member && !member->empty()) {
    r.outer_owned = true;
    r.owner = std::move(*member);
  }
  return r;
}

std::optional<int64_t> incoming_timeout_ms(const Headers& h, const HeaderNames& names) {
  std::optional<int64_t> best;
  for (const Header& f : h) {
    if (!iequals(f.name, names.request_timeout_ms)) continue;
    // 18 digits cannot overflow int64 and is far beyond any real deadline.
    if (!is_decimal(f.value) || f.value.size() > 18) continue;
    int64_t ms = 0;
    for (char c : f.value) ms = ms * 10 + (c - '0');
    if (!best || ms < *best) best = ms;
  }
  return best;
}

void rewrite_request_headers(const Headers& in, const RequestRewrite& rw, Headers& out) {
  out.clear();
  out.reserve(in.size() + 8);
  const Config& config = *rw.config;
  const HeaderNames& names = config.headers;
  const bool strip_foreign = rw.inner_hops != InnerHops::pass;
  const bool claiming = rw.inner_hops == InnerHops::forbid && rw.claim_ownership;
  const bool rewrite_timeout = rw.time_left_ms >= 0;
  const std::vector<std::string_view> listed = connection_options(in);

  for (const Header& f : in) {
    if (!is_valid_field(f) || is_framing(f.name) || is_fixed_hop_by_hop(f.name)) continue;
    if (listed_in(f.name, listed) && !is_protected_from_connection(f.name, names)) continue;
    if (strip_foreign && in_set(f.name, kForeignRetryDirectives)) continue;
    if (claiming && (iequals(f.name, names.retry_owner) || iequals(f.name, names.retry_attempt))) continue;
    if (rewrite_timeout && iequals(f.name, names.request_timeout_ms)) continue;
    out.push_back(f);
  }

  if (claiming) {
    const std::string_view owner = owner_id(config);
    if (config.propagate_baggage) merge_owner_into_baggage(out, names, owner);
    out.push_back(Header{names.retry_owner, std::string(owner)});
    out.push_back(Header{names.retry_attempt, std::to_string(rw.attempt)});
    out.push_back(Header{std::string(kEnvoyMaxRetries), "0"});
  } else if (rw.inner_hops == InnerHops::forbid && rw.outer_owned) {
    out.push_back(Header{std::string(kEnvoyMaxRetries), "0"});
  }
  if (rewrite_timeout) out.push_back(Header{names.request_timeout_ms, std::to_string(rw.time_left_ms)});

  append_list_value(out, "Via", rw.via);
  append_list_value(out, "X-Forwarded-For", rw.client_ip);
  append_list_value(out, "X-Forwarded-Proto", rw.proto);
}

void rewrite_response_headers(const Headers& in, std::string_view via, Headers& out) {
  out.clear();
  out.reserve(in.size() + 1);
  const std::vector<std::string_view> listed = connection_options(in);
  for (const Header& f : in) {
    if (!is_valid_field(f) || is_framing(f.name) || is_fixed_hop_by_hop(f.name)) continue;
    if (listed_in(f.name, listed)) continue;
    out.push_back(f);
  }
  append_list_value(out, "Via", via);
}

void append_rewritten_response_headers(const Headers& in, std::string_view via, std::string& out) {
  const std::vector<std::string_view> listed = connection_options(in);
  auto kept = [&](const Header& f) {
    return is_valid_field(f) && !is_framing(f.name) && !is_fixed_hop_by_hop(f.name) && !listed_in(f.name, listed);
  };
  auto put = [&](std::string_view name, std::string_view value) {
    out.append(name);
    out += ": ";
    out.append(value);
    out += "\r\n";
  };
  bool via_written = via.empty();  // an empty via merges nothing (as append_list_value)
  for (const Header& f : in) {
    if (!kept(f)) continue;
    if (!via.empty() && iequals(f.name, "Via")) {
      if (via_written) continue;  // merged into the first Via line
      via_written = true;
      out.append(f.name);
      out += ": ";
      bool any = false;
      for (const Header& g : in) {
        if (!kept(g) || !iequals(g.name, "Via") || g.value.empty()) continue;
        if (any) out += ", ";
        out.append(g.value);
        any = true;
      }
      if (any) out += ", ";
      out.append(via);
      out += "\r\n";
      continue;
    }
    put(f.name, f.value);
  }
  if (!via_written) put("Via", via);
}

bool response_marks_exhausted(const Headers& h, const HeaderNames& names) {
  return find_header(h, names.retry_exhausted) != nullptr;
}

void append_serialized(const Headers& h, std::string& out) {
  size_t n = 0;
  for (const Header& f : h) n += f.name.size() + f.value.size() + 4;
  out.reserve(out.size() + n);
  for (const Header& f : h) {
    out += f.name;
    out += ": ";
    out += f.value;
    out += "\r\n";
  }
}

}  // namespace onelayer
