#include "core/h2wire/h2_message_rules.h"

#include <array>
#include <cstring>

#include "core/http/http_headers.h"

namespace onelayer {

namespace {

// One bit per character class, each byte's classes in one table.
enum CharClass : uint8_t {
  kTokenByte = 1 << 0,       // tchar (RFC 9110 5.6.2)
  kLowerTokenByte = 1 << 1,  // tchar without A-Z: an HTTP/2 field name
  kPathByte = 1 << 2,    // any visible byte or obs-text: no SP, no control
  kAuthorityByte = 1 << 3,   // RFC 3986 authority: unreserved, sub-delims, ":", "@", "[", "]", "%"
  kSchemeByte = 1 << 4,  // ALPHA / DIGIT / "+" / "-" / "."
};

constexpr bool in(char c, const char* set) {
  for (; *set; ++set)
    if (*set == c) return true;
  return false;
}

constexpr std::array<uint8_t, 256> make_classes() {
  std::array<uint8_t, 256> t{};
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const bool alpha = (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z');
    const bool digit = b >= '0' && b <= '9';
    uint8_t k = 0;
    if (alpha || digit || in(c, "!#$%&'*+-.^_`|~")) k |= kTokenByte;
    if ((k & kTokenByte) && !(b >= 'A' && b <= 'Z')) k |= kLowerTokenByte;
    if ((b > 0x20 && b <= 0x7E) || b >= 0x80) k |= kPathByte;
    if (alpha || digit || in(c, "-._~!$&'()*+,;=:@[]%")) k |= kAuthorityByte;
    if (alpha || digit || in(c, "+-.")) k |= kSchemeByte;
    t[static_cast<size_t>(b)] = k;
  }
  return t;
}

constexpr std::array<uint8_t, 256> kClasses = make_classes();

// Whether every byte of `s` is of class `k`: the classes ANDed over the
// bytes, four at a time in two chains, without a branch per byte.
inline bool all_of_class(std::string_view s, uint8_t k) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  uint8_t a = 0xFF, b = 0xFF;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a &= kClasses[p[i]] & kClasses[p[i + 1]];
    b &= kClasses[p[i + 2]] & kClasses[p[i + 3]];
  }
  for (; i < n; ++i) a &= kClasses[p[i]];
  return (a & b & k) != 0;
}

// `n` is `literal`: the length, then one compare of a length known at
// compile time (a load or two).
template <size_t N>
inline bool is(std::string_view n, const char (&literal)[N]) {
  return n.size() == N - 1 && std::memcmp(n.data(), literal, N - 1) == 0;
}

// A field value (RFC 9113 8.2.1): the bytes of any field value (no control
// byte but HTAB, no DEL), and no SP or HTAB at either end; empty is allowed.
bool good_value(std::string_view v) {
  if (v.empty()) return true;
  const char first = v.front(), last = v.back();
  if (first == ' ' || first == '\t' || last == ' ' || last == '\t') return false;
  return is_valid_field_value(v);
}

bool good_scheme(std::string_view v) {
  const unsigned char c = static_cast<unsigned char>(v[0]);
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return alpha && all_of_class(v, kSchemeByte);
}

// content-length (RFC 9110 8.6): digits only, at least one; -1 when not,
// or past 2^63 - 1.
int64_t parse_length(std::string_view v) {
  if (v.empty()) return -1;
  int64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return -1;
    const int d = c - '0';
    if (n > (INT64_MAX - d) / 10) return -1;
    n = n * 10 + d;
  }
  return n;
}

}  // namespace

void H2MessageRules::expect_response_to(std::string_view method) {
  sent_head_ = method == "HEAD";
  sent_connect_ = method == "CONNECT";
}

void H2MessageRules::begin_block() {
  if (phase_ == Phase::body) phase_ = Phase::trailers;
}

H2MessageRules::Field H2MessageRules::field(std::string_view name, std::string_view value) {
  if (name.empty()) return Field::malformed;
  if (name[0] == ':') return pseudo(name, value);
  if (!all_of_class(name, kLowerTokenByte) || !good_value(value)) return Field::malformed;
  seen_ |= kRegular;
  // Names that have rules of their own, told apart by length first.
  switch (name.size()) {
    case 2: return is(name, "te") && !iequals(value, "trailers") ? Field::malformed : Field::regular;
    case 4:
      if (!is(name, "host") || side_ != Side::request || phase_ == Phase::trailers) return Field::regular;
      return once(kHost, value) && all_of_class(value, kAuthorityByte) ? Field::regular : Field::malformed;
    case 7: return is(name, "upgrade") ? Field::malformed : Field::regular;
    case 10: return is(name, "connection") || is(name, "keep-alive") ? Field::malformed : Field::regular;
    case 14:
      if (!is(name, "content-length")) return Field::regular;
      // In trailers it frames nothing (RFC 9110 6.5.1): dropped, as from
      // an HTTP/1.1 chunked trailer section.
      return phase_ == Phase::trailers ? Field::drop : content_length_field(value);
    case 16: return is(name, "proxy-connection") ? Field::malformed : Field::regular;
    case 17: return is(name, "transfer-encoding") ? Field::malformed : Field::regular;
    default: return Field::regular;
  }
}

H2MessageRules::Field H2MessageRules::content_length_field(std::string_view value) {
  if (side_ == Side::response) {
    if (status_ == 204) {
      // RFC 9110 8.6 forbids it; servers send "0" anyway: dropped.
      if (content_length_ != -1 || value != "0") return Field::malformed;
      content_length_ = 0;
      return Field::drop;
    }
    if (status_ / 100 == 1) return Field::malformed;
    if (status_ / 100 == 2 && sent_connect_) return Field::drop;  // a tunnel has no length
  }
  if (content_length_ != -1) return Field::malformed;
  content_length_ = parse_length(value);
  return content_length_ == -1 ? Field::malformed : Field::regular;
}

bool H2MessageRules::once(uint16_t flag, std::string_view value) {
  if ((seen_ & flag) || value.empty()) return false;
  seen_ |= flag;
  return true;
}

H2MessageRules::Field H2MessageRules::pseudo(std::string_view name, std::string_view value) {
  if (phase_ == Phase::trailers || (seen_ & kRegular)) return Field::malformed;
  return side_ == Side::request ? request_pseudo(name, value) : response_pseudo(name, value);
}

H2MessageRules::Field H2MessageRules::request_pseudo(std::string_view name, std::string_view value) {
  switch (name.size()) {
    case 5:
      if (!is(name, ":path") || !once(kPath, value) || !all_of_class(value, kPathByte)) return Field::malformed;
      if (value[0] == '/') seen_ |= kPathSlash;
      else if (value == "*") seen_ |= kPathAsterisk;
      return Field::path;
    case 7:
      if (is(name, ":method")) {
        if (!once(kMethod, value) || !is_token(value)) return Field::malformed;
        if (is(value, "HEAD")) seen_ |= kMethodHead;
        else if (is(value, "CONNECT")) seen_ |= kMethodConnect;
        else if (is(value, "OPTIONS")) seen_ |= kMethodOptions;
        return Field::method;
      }
      if (!is(name, ":scheme") || !once(kScheme, value) || !good_scheme(value)) return Field::malformed;
      if (iequals(value, "http") || iequals(value, "https")) seen_ |= kSchemeHttp;
      return Field::scheme;
    case 10:
      if (!is(name, ":authority") || !once(kAuthority, value) || !all_of_class(value, kAuthorityByte))
        return Field::malformed;
      return Field::authority;
    default:
      return Field::malformed;  // :status, :protocol (not offered) and unknown ones
  }
}

H2MessageRules::Field H2MessageRules::response_pseudo(std::string_view name, std::string_view value) {
  if (!is(name, ":status") || !once(kStatus, value) || value.size() != 3) return Field::malformed;
  int code = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return Field::malformed;
    code = code * 10 + (c - '0');
  }
  if (code == 101) return Field::malformed;  // no Upgrade in HTTP/2 (RFC 9113 8.6)
  status_ = code;
  return Field::status;
}

bool H2MessageRules::end_block(bool ends_stream) {
  switch (phase_) {
    case Phase::head:
      if (!(side_ == Side::request ? end_request_head() : end_response_head())) return false;
      break;
    case Phase::trailers:
      if (!ends_stream) return false;  // trailers end the stream (RFC 9113 8.1)
      break;
    case Phase::body:
      return false;  // no block begun
  }
  return !ends_stream || end_stream();
}

bool H2MessageRules::end_request_head() {
  if ((seen_ & kMethodConnect)) {
    // RFC 9113 8.5: :authority only.
    if ((seen_ & (kScheme | kPath)) || !(seen_ & kAuthority)) return false;
    content_length_ = -1;
  } else {
    if ((seen_ & (kMethod | kScheme | kPath)) != (kMethod | kScheme | kPath)) return false;
    if (!(seen_ & (kAuthority | kHost))) return false;
    // RFC 9113 8.3.1: an http(s) :path is absolute or "*" (OPTIONS).
    if ((seen_ & kSchemeHttp) && !(seen_ & kPathSlash) && !((seen_ & kMethodOptions) && (seen_ & kPathAsterisk)))
      return false;
  }
  phase_ = Phase::body;
  return true;
}

bool H2MessageRules::end_response_head() {
  if (!(seen_ & kStatus)) return false;
  if (status_ / 100 == 1) {
    // Interim: the final head follows, with fields of its own.
    seen_ = 0;
    content_length_ = -1;
    return true;
  }
  if (sent_head_ || status_ == 204 || status_ == 304) content_length_ = 0;
  else if (sent_connect_ && status_ / 100 == 2) content_length_ = -1;
  phase_ = Phase::body;
  return true;
}

bool H2MessageRules::data(size_t n) {
  received_ += static_cast<int64_t>(n);
  if (phase_ == Phase::head) return false;  // no DATA before the (final) head
  return content_length_ == -1 || received_ <= content_length_;
}

bool H2MessageRules::end_stream() const {
  if (phase_ == Phase::head) return false;  // a 1xx, then the end
  return content_length_ == -1 || received_ == content_length_;
}

}  // namespace onelayer
