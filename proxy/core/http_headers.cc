#include "core/http_headers.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstring>

#include "core/baggage.h"
#include "core/grpc_protocol.h"
#include "core/grpc_timeout.h"
#include "core/hidden_retry_detector.h"

namespace onelayer {
namespace {

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

// What a field name means to the rewrite, decided once per field: the rules
// below then switch on it instead of comparing the name against every list.
enum class Kind : uint8_t {
  other, host, via, x_forwarded_for, x_forwarded_proto, baggage, framing, hop_by_hop, foreign_retry, expectation
};

struct NamedKind {
  std::string_view name;
  Kind kind;
};
// Sorted by name length: classify() only compares names of the right length.
constexpr NamedKind kKinds[] = {
    {"te", Kind::hop_by_hop},
    {"via", Kind::via},
    {"host", Kind::host},
    {"expect", Kind::expectation},
    {"trailer", Kind::hop_by_hop},
    {"upgrade", Kind::hop_by_hop},
    {"baggage", Kind::baggage},
    {"connection", Kind::hop_by_hop},
    {"keep-alive", Kind::hop_by_hop},
    {"content-length", Kind::framing},
    {"l5d-retry-http", Kind::foreign_retry},
    {"l5d-retry-grpc", Kind::foreign_retry},
    {"x-forwarded-for", Kind::x_forwarded_for},
    {"l5d-retry-limit", Kind::foreign_retry},
    {"proxy-connection", Kind::hop_by_hop},
    {"x-envoy-retry-on", Kind::foreign_retry},
    {"transfer-encoding", Kind::framing},
    {"x-forwarded-proto", Kind::x_forwarded_proto},
    {"l5d-retry-timeout", Kind::foreign_retry},
    {"x-envoy-max-retries", Kind::foreign_retry},
    {"x-envoy-retry-grpc-on", Kind::foreign_retry},
    {"x-envoy-retriable-status-codes", Kind::foreign_retry},
    {"x-envoy-retriable-header-names", Kind::foreign_retry},
    {"x-envoy-hedge-on-per-try-timeout", Kind::foreign_retry},
    {"x-envoy-upstream-rq-per-try-timeout-ms", Kind::foreign_retry},
};
// Hop-by-hop: connection, keep-alive, proxy-connection, te, trailer, upgrade
// (RFC 9110 7.6.1 and the de-facto extras; transfer-encoding is framing).
// Foreign retry directives (docs/retries.md): Envoy and Linkerd request headers
// that would make an inner hop retry on its own. Expect: onelayer answers
// 100-continue itself (validation refuses any other), so it never goes on.

constexpr size_t kMaxKindLength = 38;
struct KindRange {
  uint8_t begin = 0, end = 0;
};
constexpr std::array<KindRange, kMaxKindLength + 1> make_kind_ranges() {
  std::array<KindRange, kMaxKindLength + 1> r{};
  for (size_t i = 0; i < std::size(kKinds); ++i) {
    KindRange& k = r[kKinds[i].name.size()];
    if (k.begin == k.end) k.begin = static_cast<uint8_t>(i);
    k.end = static_cast<uint8_t>(i + 1);
  }
  return r;
}
constexpr std::array<KindRange, kMaxKindLength + 1> kKindRanges = make_kind_ranges();

Kind classify(std::string_view name) {
  if (name.size() > kMaxKindLength) return Kind::other;
  const KindRange r = kKindRanges[name.size()];
  for (size_t i = r.begin; i < r.end; ++i)
    if (iequals(kKinds[i].name, name)) return kKinds[i].kind;
  return Kind::other;
}

bool is_connection(std::string_view name) { return name.size() == 10 && iequals(name, "connection"); }
// The same answers as classify(name) == Kind::..., for the scans that look
// for one name only.
bool is_baggage(std::string_view name) { return name.size() == 7 && iequals(name, kBaggage); }

// The connection-options of every Connection field, as views into the
// fields: a few inline, more on the heap (a legitimate peer sends one or two).
class ConnectionOptions {
 public:
  explicit ConnectionOptions(const Headers& h) {
    for (const Header& f : h) {
      if (is_connection(f.name)) for_each_list_element(f.value, [this](std::string_view o) { add(o); });
    }
  }
  bool lists(std::string_view name) const {
    for (size_t i = 0; i < n_ && i < kInline; ++i)
      if (iequals(name, inline_[i])) return true;
    for (std::string_view o : more_)
      if (iequals(name, o)) return true;
    return false;
  }

 private:
  static constexpr size_t kInline = 8;
  void add(std::string_view t) {
    if (n_ < kInline) {
      inline_[n_++] = t;
    } else {
      more_.push_back(t);
    }
  }
  std::string_view inline_[kInline];
  size_t n_ = 0;
  std::vector<std::string_view> more_;
};

bool is_valid_field(const Header& f) { return is_token(f.name) && is_valid_field_value(f.value); }

std::string_view owner_id(const Config& c) {
  if (c.layer_id.empty() || !is_valid_field_value(c.layer_id)) return kFallbackOwner;
  return c.layer_id;
}

// Joins every baggage field with "," (W3C: multiple headers are one list).
std::string joined_baggage(const Headers& h) {
  std::string joined;
  for (const Header& f : h) {
    if (!is_baggage(f.name)) continue;
    if (!joined.empty()) joined += ',';
    joined += f.value;
  }
  return joined;
}

// Where a rewrite writes its fields: a header list (rewrite_*_headers), or
// the serialized head itself (append_rewritten_*: the proxy's hot path, which
// copies each kept field once, into the bytes that go on the wire).
struct ListSink {
  Headers& out;
  void put(std::string_view name, std::string_view value) { out.push_back(Header{std::string(name), std::string(value)}); }
};
struct TextSink {
  std::string& out;
  void put(std::string_view name, std::string_view value) {
    out.append(name);
    out.append(": ", 2);
    out.append(value);
    out.append("\r\n", 2);
  }
};

// A list field the proxy appends a member to (Via, X-Forwarded-*): existing
// fields of that name are merged, in order, into the first one, with the
// member last (RFC 9110 5.3 makes that equivalent); without one, a new field
// is written after the received ones.
struct ListAppend {
  Kind kind;
  std::string_view name;  // spelling of a new field
  std::string_view member;
  bool written = false;
};

// Writes f, or for the first kept field of an appended list, the merged
// field; later fields of that list are dropped. `kept` decides which of the
// received fields count.
template <class Sink, class Kept>
void put_field(Sink& sink, const Headers& in, const Header& f, Kind kind, ListAppend* lists, size_t n_lists,
               const Kept& kept) {
  for (size_t i = 0; i < n_lists; ++i) {
    ListAppend& l = lists[i];
    if (l.kind != kind || l.member.empty()) continue;
    if (l.written) return;  // merged into the first field of its name
    l.written = true;
    std::string joined;
    for (const Header& g : in) {
      if (g.value.empty() || classify(g.name) != kind || !kept(g)) continue;
      joined.append(g.value);
      joined.append(", ");
    }
    joined.append(l.member);
    sink.put(f.name, joined);
    return;
  }
  sink.put(f.name, f.value);
}

template <class Sink>
void put_missing_lists(Sink& sink, ListAppend* lists, size_t n_lists) {
  for (size_t i = 0; i < n_lists; ++i)
    if (!lists[i].written && !lists[i].member.empty()) sink.put(lists[i].name, lists[i].member);
}

// Whether a received request field goes upstream (see rewrite_request_headers).
struct RequestFieldRule {
  const HeaderNames& names;
  const ConnectionOptions& listed;
  bool strip_foreign, claiming, rewrite_timeout;
  bool rewrite_grpc_timeout = false, rewrite_grpc_attempts = false;

  bool operator()(const Header& f) const { return keeps(f, classify(f.name)); }
  bool keeps(const Header& f, Kind kind) const {
    if (kind == Kind::framing || kind == Kind::hop_by_hop || kind == Kind::expectation || !is_valid_field(f))
      return false;
    if (strip_foreign && kind == Kind::foreign_retry) return false;
    const bool owner = iequals(f.name, names.retry_owner), attempt = iequals(f.name, names.retry_attempt);
    const bool timeout = iequals(f.name, names.request_timeout_ms);
    if (claiming && (owner || attempt)) return false;
    if (rewrite_timeout && timeout) return false;
    if (rewrite_grpc_timeout && iequals(f.name, kGrpcTimeoutField)) return false;
    if (rewrite_grpc_attempts && iequals(f.name, kGrpcPreviousAttemptsField)) return false;
    // A Connection option cannot remove Host, baggage or the protocol
    // fields: a hop must not be able to switch retry ownership off that way.
    const bool protected_field = kind == Kind::host || kind == Kind::baggage || owner || attempt || timeout;
    return protected_field || !listed.lists(f.name);
  }
};

template <class Sink>
bool rewrite_request_into(const Headers& in, const RequestRewrite& rw, Sink& sink) {
  const Config& config = *rw.config;
  const HeaderNames& names = config.headers;
  const ConnectionOptions listed(in);
  const bool claiming = rw.inner_hops == InnerHops::forbid && rw.claim_ownership;
  const RequestFieldRule rule{names,    listed, rw.inner_hops != InnerHops::pass, claiming, rw.time_left_ms >= 0,
                              rw.grpc && rw.time_left_ms >= 0, rw.grpc && claiming};
  const std::string_view owner = owner_id(config);

  // Claiming with baggage on: the ownership member is merged into the
  // received baggage fields (joined into the first one); a merge past the
  // size limit leaves them exactly as they were.
  std::optional<std::string> baggage;
  if (claiming && config.propagate_baggage) {
    std::string joined;
    for (const Header& f : in) {
      if (!is_baggage(f.name) || !rule(f)) continue;
      if (!joined.empty()) joined += ',';
      joined += f.value;
    }
    // Past the size limit the owner member alone still goes (it matters more).
    constexpr size_t kMemberBytes = HiddenRetryDetector::kBaggageMember.size() + 1 + 16 + 1 + 10 + 1;
    baggage = baggage_merge(joined, names.baggage_member, owner, rw.attempt_id != 0 ? kMemberBytes : 0);
    if (baggage && rw.attempt_id != 0) {
      if (baggage->find(HiddenRetryDetector::kBaggageMember) == std::string::npos) {
        // The usual case, appended in place (no second copy of the header).
        if (baggage->size() + kMemberBytes <= kMaxBaggageBytes) {
          if (!baggage->empty()) *baggage += ',';
          *baggage += HiddenRetryDetector::kBaggageMember;
          *baggage += '=';
          HiddenRetryDetector::append_member_value(rw.attempt_id, rw.attempt, *baggage);
        }
      } else {
        std::string value;
        HiddenRetryDetector::append_member_value(rw.attempt_id, rw.attempt, value);
        if (auto both = baggage_merge(*baggage, HiddenRetryDetector::kBaggageMember, value)) baggage = std::move(both);
      }
    }
  }
  bool baggage_written = false;
  ListAppend lists[] = {{Kind::via, "Via", rw.via},
                        {Kind::x_forwarded_for, "X-Forwarded-For", rw.client_ip},
                        {Kind::x_forwarded_proto, "X-Forwarded-Proto", rw.proto}};
  bool host = false;
  for (const Header& f : in) {
    const Kind kind = classify(f.name);
    if (!rule.keeps(f, kind)) continue;
    host = host || kind == Kind::host;
    if (baggage && kind == Kind::baggage) {
      if (!baggage_written) sink.put(f.name, *baggage);
      baggage_written = true;
      continue;
    }
    put_field(sink, in, f, kind, lists, std::size(lists), rule);
  }

  char digits[24];
  auto number = [&](int64_t v) {
    auto r = std::to_chars(digits, digits + sizeof digits, v);
    return std::string_view(digits, static_cast<size_t>(r.ptr - digits));
  };
  if (claiming) {
    if (baggage && !baggage_written) sink.put(kBaggage, *baggage);
    sink.put(names.retry_owner, owner);
    sink.put(names.retry_attempt, number(rw.attempt));
    sink.put(kEnvoyMaxRetries, "0");
  } else if (rw.inner_hops == InnerHops::forbid && rw.outer_owned) {
    sink.put(kEnvoyMaxRetries, "0");
  }
  if (rule.rewrite_timeout) sink.put(names.request_timeout_ms, number(rw.time_left_ms));
  if (rule.rewrite_grpc_timeout) sink.put(kGrpcTimeoutField, format_grpc_timeout(Millis{rw.time_left_ms}));
  if (rule.rewrite_grpc_attempts && rw.attempt > 1) sink.put(kGrpcPreviousAttemptsField, number(rw.attempt - 1));
  put_missing_lists(sink, lists, std::size(lists));
  return host;
}

template <class Sink>
size_t rewrite_response_into(const Headers& in, std::string_view via, Sink& sink) {
  const ConnectionOptions listed(in);
  size_t invalid = 0;
  auto kept = [&](const Header& f) {
    Kind kind = classify(f.name);
    return kind != Kind::framing && kind != Kind::hop_by_hop && is_valid_field(f) && !listed.lists(f.name);
  };
  ListAppend lists[] = {{Kind::via, "Via", via}};
  for (const Header& f : in) {
    const Kind kind = classify(f.name);
    if (kind == Kind::framing || kind == Kind::hop_by_hop || listed.lists(f.name)) continue;
    if (!is_valid_field(f)) {
      ++invalid;
      continue;
    }
    put_field(sink, in, f, kind, lists, std::size(lists), kept);
  }
  put_missing_lists(sink, lists, std::size(lists));
  return invalid;
}

bool is_decimal(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A line break followed by SP/HTAB inside a value: the wrapper kept an obs-fold.
bool contains_obs_fold(std::string_view v) {
  for (size_t i = 0; i + 1 < v.size(); ++i)
    if (v[i] == '\n' && (v[i + 1] == ' ' || v[i + 1] == '\t')) return true;
  return false;
}

}  // namespace

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

void append_decimal(std::string& out, uint64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  return true;
}

std::optional<uint64_t> parse_content_length(std::string_view v, size_t max_digits) {
  if (v.empty() || v.size() > std::min<size_t>(max_digits, 19)) return std::nullopt;
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

namespace {

// The top bit of each byte of `x` that is an ASCII capital: a byte b < 0x80
// is in 'A'..'Z' when b + (0x80 - 'A') has its top bit set and
// b + (0x80 - 'Z' - 1) has not; bytes with the top bit set are no letter.
uint64_t capital_bits(uint64_t x) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kTops = 0x8080808080808080ull;
  const uint64_t low7 = x & ~kTops;
  return (low7 + (0x80 - 'A') * kOnes) & ~(low7 + (0x80 - 'Z' - 1) * kOnes) & ~x & kTops;
}

uint64_t load8(const char* p) {
  uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}

}  // namespace

bool has_ascii_upper(std::string_view s) {
  if (s.size() < 8) {
    for (char c : s)
      if (c >= 'A' && c <= 'Z') return true;
    return false;
  }
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8)
    if (capital_bits(load8(s.data() + i))) return true;
  return i < s.size() && capital_bits(load8(s.data() + s.size() - 8)) != 0;  // the tail, overlapping
}

// Eight bytes at a time: the capitals' top bits, moved down to 0x20, are
// what lower-cases them.
char* copy_lowercase(std::string_view in, char* out) {
  auto lower8 = [&](size_t at) {
    uint64_t x = load8(in.data() + at);
    x |= capital_bits(x) >> 2;
    std::memcpy(out + at, &x, 8);
  };
  if (in.size() < 8) {
    for (size_t i = 0; i < in.size(); ++i) out[i] = ascii_lower(in[i]);
    return out + in.size();
  }
  size_t i = 0;
  for (; i + 8 <= in.size(); i += 8) lower8(i);
  // The last bytes as one more step over the last eight (lower-casing twice
  // changes nothing, and the input bytes there are read before written).
  if (i < in.size()) lower8(in.size() - 8);
  return out + in.size();
}

bool is_token(std::string_view s) {
  bool ok = !s.empty();
  for (unsigned char c : s) ok &= kTchar[c];  // no early exit: names are short, branches cost more
  return ok;
}

bool is_valid_field_value(std::string_view v) {
  auto bad = [](unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7F; };
  // Eight bytes at a time: a word with no byte below 0x20 and none equal to
  // 0x7F is clean (the usual case); a word with one (HTAB is below 0x20 too)
  // is checked byte by byte.
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHighs = 0x8080808080808080ULL;
  const char* p = v.data();
  size_t n = v.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t x;
    std::memcpy(&x, p, 8);
    uint64_t below_space = (x - kOnes * 0x20) & ~x & kHighs;
    uint64_t y = x ^ (kOnes * 0x7F);
    uint64_t del = (y - kOnes) & ~y & kHighs;
    if ((below_space | del) == 0) continue;
    for (int i = 0; i < 8; ++i)
      if (bad(static_cast<unsigned char>(p[i]))) return false;
  }
  for (; n > 0; ++p, --n)
    if (bad(static_cast<unsigned char>(*p))) return false;
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
  Kind kind = classify(name);
  return kind == Kind::hop_by_hop || iequals(name, "transfer-encoding") || ConnectionOptions(all).lists(name);
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
  ListSink sink{out};
  rewrite_request_into(in, rw, sink);
}

namespace {
struct ForwardingSink {
  HeaderSink& to;
  void put(std::string_view name, std::string_view value) { to.put(name, value); }
};
}  // namespace

void rewrite_request_headers(const Headers& in, const RequestRewrite& rw, HeaderSink& sink) {
  ForwardingSink forward{sink};
  rewrite_request_into(in, rw, forward);
}

bool append_rewritten_request_headers(const Headers& in, const RequestRewrite& rw, std::string& out) {
  TextSink sink{out};
  return rewrite_request_into(in, rw, sink);
}

void rewrite_response_headers(const Headers& in, std::string_view via, Headers& out) {
  out.clear();
  out.reserve(in.size() + 1);
  ListSink sink{out};
  rewrite_response_into(in, via, sink);
}

void rewrite_response_headers(const Headers& in, std::string_view via, HeaderSink& sink) {
  ForwardingSink forward{sink};
  rewrite_response_into(in, via, forward);
}

size_t append_rewritten_response_headers(const Headers& in, std::string_view via, std::string& out) {
  TextSink sink{out};
  return rewrite_response_into(in, via, sink);
}

void rewrite_trailers(const Headers& in, Headers& out) {
  out.clear();
  out.reserve(in.size());
  for (const Header& f : in) {
    const Kind kind = classify(f.name);
    if (kind == Kind::framing || kind == Kind::hop_by_hop || kind == Kind::host || !is_valid_field(f)) continue;
    out.push_back(f);
  }
}

std::string_view via_member_for(uint8_t major, uint8_t minor) {
  if (major >= 2) return "2 onelayer";
  return minor == 0 ? "1.0 onelayer" : "1.1 onelayer";
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

std::optional<std::string> response_transfer_codings(const Headers& h) {
  std::vector<std::string_view> codings;
  for (const Header& f : h) {
    if (!iequals(f.name, "transfer-encoding")) continue;
    for_each_list_element(f.value, [&](std::string_view c) { codings.push_back(c); });
  }
  if (!codings.empty() && iequals(codings.back(), "chunked")) codings.pop_back();
  std::string out;
  for (std::string_view c : codings) {
    if (iequals(c, "chunked")) return std::nullopt;
    if (!out.empty()) out += ", ";
    out += c;
  }
  return out;
}

bool is_clean_reason_phrase(std::string_view reason) {
  if (reason.empty()) return false;
  for (unsigned char c : reason)
    if (c != '\t' && (c < 0x20 || c > 0x7e)) return false;
  return true;
}

}  // namespace onelayer
