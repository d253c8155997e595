// Header rules of the proxy: request validation that llhttp leaves to us,
// hop-by-hop removal, Via / X-Forwarded-* and the single-layer retry protocol
// (docs/retries.md). Pure functions over a parsed header list; the shell
// parses, calls these, and serializes the result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/http_token.h"
#include "core/config/config.h"

namespace onelayer {

struct Header {
  std::string name;   // as received (case kept)
  std::string value;  // OWS trimmed
  bool operator==(const Header&) const = default;
};
using Headers = std::vector<Header>;

// Whether the n bytes at a and b are equal but for ASCII case, eight bytes
// at a time (iequals once the sizes agree).
bool iequals_bytes(const char* a, const char* b, size_t n);
// ASCII case-insensitive. Inline: most comparisons are of names of
// different lengths, which this answers without a call.
inline bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && iequals_bytes(a.data(), b.data(), a.size());
}
// Copies `in` to `out` (room for in.size() bytes) with ASCII capitals in
// lower case, eight bytes at a time; `out` may be in.data() (lowering in
// place). Returns the end of what it wrote. (ascii_words::copy_lowercase
// is the same, inline.)
char* copy_lowercase(std::string_view in, char* out);
// Whether `s` holds an ASCII capital, eight bytes at a time.
bool has_ascii_upper(std::string_view s);
// False for CR, LF, NUL and every other CTL except HTAB (and DEL); obs-text is allowed.
bool is_valid_field_value(std::string_view v);

std::string_view trim_ows(std::string_view s);
// RFC 9112 3.2 / RFC 3986 3.2.2: uri-host [ ":" port ], or empty.
bool is_valid_host_value(std::string_view v);

// A Content-Length value: 1 to `max_digits` decimal digits, nothing else
// (no sign, no OWS, no list). `max_digits` is capped at 19, the most that
// cannot overflow 64 bits; a caller with a smaller limit on the value
// refuses more digits before they are read. nullopt otherwise.
std::optional<uint64_t> parse_content_length(std::string_view v, size_t max_digits);

// Appends v in decimal (heads, access-log lines: no format string per request).
void append_decimal(std::string& out, uint64_t v);  // without leading and trailing SP / HTAB

// Calls fn(element) for each non-empty element of a comma-separated list
// (RFC 9110 5.6.1: Connection options, baggage members), OWS trimmed.
template <class Fn>
void for_each_list_element(std::string_view list, Fn&& fn) {
  while (true) {
    size_t comma = list.find(',');
    std::string_view element = trim_ows(list.substr(0, comma));
    if (!element.empty()) fn(element);
    if (comma == std::string_view::npos) return;
    list.remove_prefix(comma + 1);
  }
}

const Header* find_header(const Headers& h, std::string_view name);  // first, case-insensitive
size_t count_headers(const Headers& h, std::string_view name);

// The Connection header's listed names + the fixed hop-by-hop set: Connection,
// Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade.
// Content-Length is NOT hop-by-hop (the shell handles framing).
bool is_hop_by_hop(std::string_view name, const Headers& all);

// What the proxy checks on every downstream request before routing (llhttp 8.1 lets
// these through). All of them mean 400 bad_request.
//
// obs-fold: llhttp hands a folded line to the parser wrapper as one more value
// callback, without the CRLF, so only the wrapper can see it. The wrapper
// reports RequestHeaderProblem::obs_fold itself without calling this function,
// or, equivalently, keeps the fold's bytes in the value ("a\r\n b"):
// validate_request_headers reports a line break followed by SP/HTAB as
// obs_fold (any other CR/LF is invalid_value).
//
// Checks, first problem wins: too_many_headers (h.size() > max_headers;
// max_headers 0 means no limit), then per field in order invalid_name (not a
// token, e.g. "Bad Name"), obs_fold, invalid_value; then duplicate_host (any
// version), missing_host (HTTP/1.1 only), and a Host value that is not
// uri-host[:port] (RFC 9112 3.2) is invalid_value.
enum class RequestHeaderProblem { none, invalid_name, invalid_value, missing_host, duplicate_host, obs_fold, too_many_headers };
RequestHeaderProblem validate_request_headers(const Headers& h, bool http11, size_t max_headers);
// The same, and with no problem `*host` is the Host field (nullptr without
// one): the caller need not look for it again. checked_by_codec: the codec
// already refused any name that is not a token and any value with a control
// byte (an HTTP/2 head: the session resets such a stream before it opens), so
// only the count and the Host fields are checked.
RequestHeaderProblem validate_request_headers(const Headers& h, bool http11, size_t max_headers,
                                              const Header** host, bool checked_by_codec = false);
const char* to_string(RequestHeaderProblem p);  // "invalid_name", ... for logs

// Ingress analysis of the single-layer protocol, done once per request.
// Owned when the x-retry-owner header (first one) has a non-empty value, else
// when the baggage headers (joined with ",") carry a well-formed member
// names.baggage_member with a non-empty value. `owner` is that value (decoded
// for baggage).
struct RetryOwnership {
  bool outer_owned = false;
  std::string owner;
};
RetryOwnership detect_outer_owner(const Headers& h, const HeaderNames& names);
// Digits only (no sign, at most 18 digits); several fields: the smallest valid
// one. Anything else: nullopt (the route's own deadline applies).
std::optional<int64_t> incoming_timeout_ms(const Headers& h, const HeaderNames& names);

struct RequestRewrite {
  const Config* config = nullptr;  // layer_id, headers names, propagate_baggage
  InnerHops inner_hops = InnerHops::forbid;
  bool claim_ownership = false;  // route retries (max_attempts>1) and not outer-owned: write x-retry-owner etc.
  uint32_t attempt = 1;          // x-retry-attempt
  // The request's names and values were checked by its codec (an HTTP/2
  // head, see validate_request_headers): they are not checked again.
  bool checked_by_codec = false;
  int64_t time_left_ms = -1;     // x-request-timeout-ms value for this attempt; <0: don't write
  std::string_view client_ip = {};  // appended to X-Forwarded-For ("" : not appended)
  std::string_view proto = "http";        // X-Forwarded-Proto appended ("" : not appended)
  std::string_view via = "1.1 onelayer";  // appended to Via ("" : not appended)
  // Added: the request is owned by an outer layer (detect_outer_owner). With
  // forbid this writes x-envoy-max-retries: 0 as well: the incoming one was
  // stripped as a foreign directive, and Envoy hops further in must still be
  // told not to retry. Ignored when claim_ownership is set.
  bool outer_owned = false;
  // With claim_ownership and propagate_baggage: also merge the baggage
  // member retry-attempt=<attempt_id as 16 hex digits>.<attempt>, which lets
  // an inner onelayer see a hop in between repeat an attempt
  // (hidden_retry_detector.h). 0: not written.
  uint64_t attempt_id = 0;
  // A gRPC call (grpc_protocol.h): grpc-timeout is replaced by time_left_ms
  // in gRPC's format whenever x-request-timeout-ms is (any mode), and with
  // claim_ownership grpc-previous-rpc-attempts (gRPC A6) is replaced by
  // attempt - 1 on retries (dropped on the first attempt).
  bool grpc = false;
};

// Builds the header list to send upstream for ONE attempt (out is cleared first):
// - drops hop-by-hop headers (fixed set and Connection-listed names),
//   Content-Length / Transfer-Encoding (the shell writes its own framing)
//   and Expect (the proxy answered 100-continue itself);
//   a Connection option cannot remove Host, baggage or the protocol headers
//   (names.*): a hop must not be able to switch retry ownership off that way;
// - drops fields with an invalid name or value (validation should have
//   refused them already; this keeps header injection impossible here);
// - forbid/strip: removes the foreign retry directives (docs/retries.md);
// - forbid + claim_ownership: replaces x-retry-owner / x-retry-attempt with
//   <layer_id> / <attempt>, sets x-envoy-max-retries: 0 and merges the baggage
//   member (names.baggage_member=<layer_id>) into the baggage headers (joined
//   into one) when propagate_baggage is on; a merge past 8192 bytes leaves
//   the baggage headers as they were;
// - not claiming: x-retry-owner, x-retry-attempt and baggage pass unchanged;
// - x-request-timeout-ms is replaced when time_left_ms >= 0 (any mode);
// - pass: nothing else is touched.
// Host is kept. Via, X-Forwarded-For and X-Forwarded-Proto get the value
// appended, comma-joined onto existing fields of that name (merged into the
// first one). Written protocol fields are appended after the received ones.
void rewrite_request_headers(const Headers& in, const RequestRewrite& rw, Headers& out);
// Where a rewrite can put its fields one at a time instead of into a list.
// The views passed to put() live only for the call.
class HeaderSink {
 public:
  virtual void put(std::string_view name, std::string_view value) = 0;

 protected:
  ~HeaderSink() = default;
};
// The same fields as rewrite_request_headers, each given to `sink` in order
// (an HTTP/2 head is built from them without a list of strings first).
void rewrite_request_headers(const Headers& in, const RequestRewrite& rw, HeaderSink& sink);
// The same, but no Host field goes to `sink`: `host` becomes the value of
// the first kept one that is not empty (an HTTP/2 head carries it as
// :authority), or stays as it was. The view is into `in`.
void rewrite_request_headers(const Headers& in, const RequestRewrite& rw, HeaderSink& sink, std::string_view& host);
// The same fields as rewrite_request_headers + append_serialized, written
// straight into `out` (the proxy's hot path: no list, no copy of a kept
// field but the serialized one). Returns whether a Host field was written.
bool append_rewritten_request_headers(const Headers& in, const RequestRewrite& rw, std::string& out);

// Response: drops hop-by-hop (incl. Connection-listed) and framing headers and
// fields whose name is not a token or whose value has CR/LF/NUL/CTL; appends Via.
void rewrite_response_headers(const Headers& in, std::string_view via, Headers& out);
// The same fields, each given to `sink` in order (the HTTP/2 downstream
// builds its head from them without a list of strings first).
// checked_by_codec: as for validate_request_headers (an HTTP/2 upstream's
// head), the names and values are not checked again.
void rewrite_response_headers(const Headers& in, std::string_view via, HeaderSink& sink,
                              bool checked_by_codec = false);
// Trailer fields to forward (a chunked body's trailer section, an HTTP/2
// trailing HEADERS), either direction: drops what only means something in
// a header section or to one hop (RFC 9110 6.5.1): hop-by-hop fields
// (Trailer and TE included), framing (Content-Length, Transfer-Encoding),
// Host, and fields with an invalid name or value. Order kept.
void rewrite_trailers(const Headers& in, Headers& out);
// The Via member for a message that arrived in HTTP/`major`.`minor`
// (RFC 9110 7.6.3: the received protocol, "2" for HTTP/2): "1.0 onelayer",
// "1.1 onelayer" or "2 onelayer".
std::string_view via_member_for(uint8_t major, uint8_t minor);
// The response carries names.retry_exhausted (any value): an inner owner has
// given up on it, so it is final here.
bool response_marks_exhausted(const Headers& h, const HeaderNames& names);
// The same result as rewrite_response_headers + append_serialized, written
// straight into `out` without copying fields (the proxy's hot path). Returns
// how many fields it dropped for an invalid name or value (for a log line).
size_t append_rewritten_response_headers(const Headers& in, std::string_view via, std::string& out,
                                          bool checked_by_codec = false);

// The transfer codings of a response other than a final `chunked`, as a
// comma-separated list ("gzip" for "gzip, chunked" or for "gzip" alone, ""
// for "chunked" or none). The proxy re-frames bodies, so it writes its own
// chunked, but these codings describe the bytes and must reach the client.
// nullopt when chunked appears anywhere but last (RFC 9112 6.1 forbids
// applying it twice or under another coding): no framing can carry that.
std::optional<std::string> response_transfer_codings(const Headers& h);

// RFC 9112 4: reason-phrase = 1*( HTAB / SP / VCHAR / obs-text ); this also
// refuses obs-text and an empty phrase (the proxy writes the standard one).
bool is_clean_reason_phrase(std::string_view reason);

// Serializes "Name: value\r\n" for each header into out (appends).
void append_serialized(const Headers& h, std::string& out);

}  // namespace onelayer
