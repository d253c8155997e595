#include "core/http/http_headers.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstring>

#include "core/base/ascii_words.h"
#include "core/base/grpc_field_names.h"
#include "core/base/grpc_timeout.h"
#include "core/http/baggage.h"
#include "core/http/hidden_retry_detector.h"

namespace onelayer {
namespace {

constexpr std::string_view kEnvoyMaxRetries = "x-envoy-max-retries";
constexpr std::string_view kBaggage = "baggage";
// Written when layer_id cannot be: ownership must still reach inner hops.
constexpr std::string_view kFallbackOwner = "onelayer";

using ascii_words::ascii_lower;
using ascii_words::capital_bits;
using ascii_words::load4_to_7;
using ascii_words::load8;
using ascii_words::lower8;

// RFC 3986 unreserved and sub-delims: the bytes of a reg-name (every Host
// field is checked).
constexpr std::array<bool, 256> kUnreservedOrSubDelim = make_byte_table("-._~!$&'()*+,;=");

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
  // Every listed name starts with a letter, and only a letter ORed with
  // 0x20 gives a lower-case one: the first byte rules out the other names
  // of that length before a whole comparison.
  const char first = static_cast<char>(name.empty() ? 0 : name[0] | 0x20);
  for (size_t i = r.begin; i < r.end; ++i)
    if (kKinds[i].name[0] == first && iequals_bytes(kKinds[i].name.data(), name.data(), name.size()))
      return kKinds[i].kind;
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
  bool checked_by_codec = false;

  bool operator()(const Header& f) const { return keeps(f, classify(f.name)); }
  bool keeps(const Header& f, Kind kind) const {
    if (kind == Kind::framing || kind == Kind::hop_by_hop || kind == Kind::expectation) return false;
    if (!checked_by_codec && !is_valid_field(f)) return false;
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

// The owner member of the baggage a claiming rewrite sends,
// key=<owner percent-encoded>, and what build_alone needs to know about it.
// It depends on the member's key and the owner alone, which come from the
// config: worked out once per thread for the pair last seen, and compared
// by content on every request (a reload that changes either is seen; a
// config at an address a freed one had is no different).
struct OwnerMember {
  std::string key, owner;  // what `text` was made from
  std::string text;
  bool key_is_token = false;
  bool names_attempt = false;  // `text` holds the attempt member's name

  static const OwnerMember& of(std::string_view key, std::string_view owner) {
    thread_local OwnerMember m;
    if (!m.made_ || key != m.key || owner != m.owner) m.make(key, owner);
    return m;
  }

 private:
  void make(std::string_view k, std::string_view o) {
    key.assign(k);
    owner.assign(o);
    key_is_token = is_token(k);
    text.assign(k);
    text += '=';
    const size_t at = text.size();
    text.resize(at + percent_encoded_baggage_size(o));
    write_percent_encoded_baggage_value(o, text.data() + at);
    names_attempt = text.find(HiddenRetryDetector::kBaggageMember) != std::string::npos;
    made_ = true;
  }
  bool made_ = false;
};

// The baggage value a claiming rewrite sends. Without received baggage
// (the usual case) it is the owner member and the attempt member alone,
// built on the stack; with received baggage the members are merged into it
// (baggage_merge).
class OutgoingBaggage {
 public:
  void build(const Headers& in, const RequestFieldRule& rule, std::string_view key, std::string_view owner,
             const RequestRewrite& rw) {
    std::string_view received;
    std::string joined;
    size_t fields = 0;
    for (const Header& f : in) {
      if (!is_baggage(f.name) || !rule(f)) continue;
      if (++fields == 1) received = f.value;
    }
    if (fields > 1) {
      for (const Header& f : in) {
        if (!is_baggage(f.name) || !rule(f)) continue;
        if (!joined.empty()) joined += ',';
        joined += f.value;
      }
      received = joined;
    }
    if (!(received.empty() && build_alone(key, owner, rw))) merge(received, key, owner, rw);
  }
  bool written() const { return written_; }
  std::string_view value() const { return on_stack_ ? std::string_view(stack_, stack_size_) : std::string_view(heap_); }

 private:
  // Past the size limit the owner member alone still goes (it matters more).
  static constexpr size_t kAttemptMemberBytes =
      1 + HiddenRetryDetector::kBaggageMember.size() + 1 + HiddenRetryDetector::kMemberValueBytes;

  // key=<owner>[,retry-attempt=<id>.<attempt>] as merging them into nothing
  // gives it; false when that takes the general path (an owner member that
  // does not fit here, or one that holds the attempt member's name).
  bool build_alone(std::string_view key, std::string_view owner, const RequestRewrite& rw) {
    const OwnerMember& member = OwnerMember::of(key, owner);
    if (!member.key_is_token) return true;  // baggage_merge refuses it: nothing written
    if (member.text.size() + kAttemptMemberBytes > sizeof stack_) return false;
    char* p = ascii_words::copy_short(member.text, stack_);
    if (rw.attempt_id != 0) {
      if (member.names_attempt) return false;
      *p++ = ',';
      p = std::copy(HiddenRetryDetector::kBaggageMember.begin(), HiddenRetryDetector::kBaggageMember.end(), p);
      *p++ = '=';
      p = HiddenRetryDetector::write_member_value(rw.attempt_id, rw.attempt, p);
    }
    stack_size_ = static_cast<size_t>(p - stack_);
    on_stack_ = true;
    written_ = true;
    return true;
  }

  void merge(std::string_view received, std::string_view key, std::string_view owner, const RequestRewrite& rw) {
    std::optional<std::string> merged =
        baggage_merge(received, key, owner, rw.attempt_id != 0 ? kAttemptMemberBytes : 0);
    if (!merged) return;
    heap_ = std::move(*merged);
    written_ = true;
    if (rw.attempt_id == 0) return;
    if (heap_.find(HiddenRetryDetector::kBaggageMember) == std::string::npos) {
      // The usual case, appended in place (no second copy of the header).
      if (heap_.size() + kAttemptMemberBytes <= kMaxBaggageBytes) {
        if (!heap_.empty()) heap_ += ',';
        heap_ += HiddenRetryDetector::kBaggageMember;
        heap_ += '=';
        HiddenRetryDetector::append_member_value(rw.attempt_id, rw.attempt, heap_);
      }
    } else {
      std::string value;
      HiddenRetryDetector::append_member_value(rw.attempt_id, rw.attempt, value);
      if (auto both = baggage_merge(heap_, HiddenRetryDetector::kBaggageMember, value)) heap_ = std::move(*both);
    }
  }

  char stack_[256];
  size_t stack_size_ = 0;
  std::string heap_;
  bool on_stack_ = false;
  bool written_ = false;
};

// With `host_out`, Host fields are not put: the first non-empty value is
// kept there instead.
template <class Sink>
bool rewrite_request_into(const Headers& in, const RequestRewrite& rw, Sink& sink,
                          std::string_view* host_out = nullptr) {
  const Config& config = *rw.config;
  const HeaderNames& names = config.headers;
  const ConnectionOptions listed(in);
  const bool claiming = rw.inner_hops == InnerHops::forbid && rw.claim_ownership;
  const RequestFieldRule rule{names,    listed, rw.inner_hops != InnerHops::pass, claiming, rw.time_left_ms >= 0,
                              rw.grpc && rw.time_left_ms >= 0, rw.grpc && claiming, rw.checked_by_codec};
  const std::string_view owner = owner_id(config);

  // Claiming with baggage on: the ownership member is merged into the
  // received baggage fields (joined into the first one); a merge past the
  // size limit leaves them exactly as they were.
  OutgoingBaggage baggage;
  if (claiming && config.propagate_baggage) baggage.build(in, rule, names.baggage_member, owner, rw);
  bool baggage_written = false;
  ListAppend lists[] = {{Kind::via, "Via", rw.via},
                        {Kind::x_forwarded_for, "X-Forwarded-For", rw.client_ip},
                        {Kind::x_forwarded_proto, "X-Forwarded-Proto", rw.proto}};
  bool host = false;
  for (const Header& f : in) {
    const Kind kind = classify(f.name);
    if (!rule.keeps(f, kind)) continue;
    if (kind == Kind::host) {
      host = true;
      if (host_out) {
        if (host_out->empty()) *host_out = f.value;
        continue;
      }
    }
    if (baggage.written() && kind == Kind::baggage) {
      if (!baggage_written) sink.put(f.name, baggage.value());
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
    if (baggage.written() && !baggage_written) sink.put(kBaggage, baggage.value());
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
size_t rewrite_response_into(const Headers& in, std::string_view via, Sink& sink, bool checked_by_codec) {
  const ConnectionOptions listed(in);
  size_t invalid = 0;
  auto kept = [&](const Header& f) {
    Kind kind = classify(f.name);
    return kind != Kind::framing && kind != Kind::hop_by_hop && (checked_by_codec || is_valid_field(f)) &&
           !listed.lists(f.name);
  };
  ListAppend lists[] = {{Kind::via, "Via", via}};
  for (const Header& f : in) {
    const Kind kind = classify(f.name);
    if (kind == Kind::framing || kind == Kind::hop_by_hop || listed.lists(f.name)) continue;
    if (!checked_by_codec && !is_valid_field(f)) {
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
  auto is_unreserved_or_sub_delim = [](unsigned char c) { return kUnreservedOrSubDelim[c]; };
  const size_t n = v.size();
  size_t i = 0;  // where the port part starts
  if (n != 0 && v.front() == '[') {
    size_t close = v.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    // IPv6 / IPvFuture: hex, ':', '.', plus the IPvFuture and zone-id characters.
    for (i = 1; i < close; ++i) {
      const unsigned char c = static_cast<unsigned char>(v[i]);
      if (!is_unreserved_or_sub_delim(c) && c != ':' && c != '%') return false;
    }
    i = close + 1;
  } else {
    // reg-name / IPv4address up to the first byte that is neither an
    // unreserved or sub-delim byte nor a pct-encoded octet (one pass, no
    // search for the ':' first): every Host field of every request is read.
    // ':' is not a hex digit, so a '%' cannot take the port's colon.
    auto is_hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
    const auto* p = reinterpret_cast<const unsigned char*>(v.data());
    while (i < n) {
      // Four plain bytes a step (one branch), then one at a time.
      while (i + 4 <= n && (kUnreservedOrSubDelim[p[i]] & kUnreservedOrSubDelim[p[i + 1]] &
                            kUnreservedOrSubDelim[p[i + 2]] & kUnreservedOrSubDelim[p[i + 3]]))
        i += 4;
      if (i == n) break;
      const unsigned char c = p[i];
      if (is_unreserved_or_sub_delim(c)) {
        ++i;
      } else if (c == '%') {  // pct-encoded
        if (i + 2 >= n || !is_hex(v[i + 1]) || !is_hex(v[i + 2])) return false;
        i += 3;
      } else {
        break;
      }
    }
  }
  if (i == n) return true;
  if (v[i] != ':') return false;
  return i + 1 == n || is_decimal(v.substr(i + 1));  // port = *DIGIT
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

std::optional<uint64_t> parse_content_length(std::string_view v, size_t max_digits) {
  if (v.empty() || v.size() > std::min<size_t>(max_digits, 19)) return std::nullopt;
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}


bool iequals_bytes(const char* a, const char* b, size_t n) {
  if (n < 4) {
    for (size_t i = 0; i < n; ++i)
      if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
    return true;
  }
  if (n < 8) return lower8(load4_to_7(a, n)) == lower8(load4_to_7(b, n));
  if (n <= 16)  // the first eight and the last eight (overlapping)
    return lower8(load8(a)) == lower8(load8(b)) && lower8(load8(a + n - 8)) == lower8(load8(b + n - 8));
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    if (lower8(load8(a + i)) != lower8(load8(b + i))) return false;
  // The last bytes as one more step over the last eight.
  return i == n || lower8(load8(a + n - 8)) == lower8(load8(b + n - 8));
}

bool has_ascii_upper(std::string_view s) {
  if (s.size() < 4) {
    for (char c : s)
      if (c >= 'A' && c <= 'Z') return true;
    return false;
  }
  if (s.size() < 8) return capital_bits(load4_to_7(s.data(), s.size())) != 0;
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8)
    if (capital_bits(load8(s.data() + i))) return true;
  return i < s.size() && capital_bits(load8(s.data() + s.size() - 8)) != 0;  // the tail, overlapping
}


char* copy_lowercase(std::string_view in, char* out) { return ascii_words::copy_lowercase(in, out); }

namespace {

// Whether a word has a byte below 0x20 or equal to 0x7F: exact when there
// is none (the usual case); HTAB is below 0x20 too, so a word that has one
// is looked at byte by byte.
bool has_control_byte(uint64_t x) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHighs = 0x8080808080808080ULL;
  const uint64_t below_space = (x - kOnes * 0x20) & ~x & kHighs;
  const uint64_t y = x ^ (kOnes * 0x7F);
  const uint64_t del = (y - kOnes) & ~y & kHighs;
  return (below_space | del) != 0;
}

bool is_valid_field_value_bytewise(std::string_view v) {
  for (unsigned char c : v)
    if ((c < 0x20 && c != '\t') || c == 0x7F) return false;
  return true;
}

}  // namespace

bool is_valid_field_value(std::string_view v) {
  // Eight bytes at a time (4 to 7 as one overlapping word, the tail as an
  // overlapping last word); any word with a control byte sends the whole
  // value to the byte-by-byte rule.
  const char* p = v.data();
  const size_t n = v.size();
  if (n < 4) return is_valid_field_value_bytewise(v);
  if (n < 8) return !has_control_byte(load4_to_7(p, n)) || is_valid_field_value_bytewise(v);
  if (n <= 16)  // the first eight and the last eight (overlapping)
    return (!has_control_byte(load8(p)) && !has_control_byte(load8(p + n - 8))) || is_valid_field_value_bytewise(v);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    if (has_control_byte(load8(p + i))) return is_valid_field_value_bytewise(v);
  return i == n || !has_control_byte(load8(p + n - 8)) || is_valid_field_value_bytewise(v);
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
  const Header* host = nullptr;
  return validate_request_headers(h, http11, max_headers, &host);
}

RequestHeaderProblem validate_request_headers(const Headers& h, bool http11, size_t max_headers,
                                              const Header** found_host, bool checked_by_codec) {
  *found_host = nullptr;
  if (max_headers != 0 && h.size() > max_headers) return RequestHeaderProblem::too_many_headers;
  // One pass: the per-field problems in field order, and the Host fields.
  const Header* host = nullptr;
  size_t hosts = 0;
  for (const Header& f : h) {
    if (!checked_by_codec) {
      if (!is_token(f.name)) return RequestHeaderProblem::invalid_name;
      if (!is_valid_field_value(f.value)) {
        // Only a value with a control byte can hold a fold.
        return contains_obs_fold(f.value) ? RequestHeaderProblem::obs_fold : RequestHeaderProblem::invalid_value;
      }
    }
    if (iequals(f.name, "host") && hosts++ == 0) host = &f;
  }
  if (hosts > 1) return RequestHeaderProblem::duplicate_host;
  if (hosts == 0) return http11 ? RequestHeaderProblem::missing_host : RequestHeaderProblem::none;
  if (!is_valid_host_value(host->value)) return RequestHeaderProblem::invalid_value;
  *found_host = host;
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

void rewrite_request_headers(const Headers& in, const RequestRewrite& rw, HeaderSink& sink, std::string_view& host) {
  ForwardingSink forward{sink};
  rewrite_request_into(in, rw, forward, &host);
}

bool append_rewritten_request_headers(const Headers& in, const RequestRewrite& rw, std::string& out) {
  TextSink sink{out};
  return rewrite_request_into(in, rw, sink);
}

void rewrite_response_headers(const Headers& in, std::string_view via, Headers& out) {
  out.clear();
  out.reserve(in.size() + 1);
  ListSink sink{out};
  rewrite_response_into(in, via, sink, false);
}

void rewrite_response_headers(const Headers& in, std::string_view via, HeaderSink& sink, bool checked_by_codec) {
  ForwardingSink forward{sink};
  rewrite_response_into(in, via, forward, checked_by_codec);
}

size_t append_rewritten_response_headers(const Headers& in, std::string_view via, std::string& out,
                                          bool checked_by_codec) {
  TextSink sink{out};
  return rewrite_response_into(in, via, sink, checked_by_codec);
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
