// W3C Baggage (https://www.w3.org/TR/baggage/) reading and merging, enough to
// carry the retry-owner member through apps that propagate only `baggage`.
//
//   baggage     = list-member *( OWS "," OWS list-member )
//   list-member = key OWS "=" OWS value *( OWS ";" OWS property )
//   property    = key OWS "=" OWS value / key OWS
//   key = token;  value = *baggage-octet (percent-encoded UTF-8)
//
// Malformed input never fails: malformed members are skipped when reading and
// kept verbatim when merging. Keys are case-sensitive.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace onelayer {

inline constexpr size_t kMaxBaggageBytes = 8192;

// The decoded value of the first well-formed member with this key (percent
// sequences decoded, invalid UTF-8 replaced with U+FFFD as the spec asks).
// nullopt when there is none or key is not a token.
std::optional<std::string> baggage_get(std::string_view header_value, std::string_view key);

// Returns the header value with key=value set. `value` is plain text: it is
// percent-encoded here. The first member with that key (even a malformed one)
// is kept as-is, properties included, when its decoded value equals `value`,
// and replaced in place otherwise; later members with that key are dropped, so
// the key is never duplicated. A missing member is appended at the end. Other
// members keep their order. When nothing changes the input comes back
// byte-for-byte; otherwise members are re-joined with "," (OWS and empty
// members dropped).
// Multiple baggage headers: the caller joins them with "," first.
// nullopt if the result would exceed kMaxBaggageBytes or key is not a token
// (leave the header as it was).
// `reserve_extra`: room to keep in the result for what the caller appends
// next (one allocation instead of two).
std::optional<std::string> baggage_merge(std::string_view header_value, std::string_view key, std::string_view value,
                                         size_t reserve_extra = 0);

// Percent-encodes every octet that is not a baggage-octet, and '%'.
std::string percent_encode_baggage_value(std::string_view v);
// The same, without a string: how many bytes the encoding takes, and
// writing them to `out` (room for that many); returns the end.
size_t percent_encoded_baggage_size(std::string_view v);
char* write_percent_encoded_baggage_value(std::string_view v, char* out);

}  // namespace onelayer
