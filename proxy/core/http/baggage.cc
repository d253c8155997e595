#include "core/http/baggage.h"

#include <array>

#include "core/http/http_headers.h"

namespace onelayer {
namespace {

// US-ASCII except CTLs, whitespace, DQUOTE, comma, semicolon and backslash
// (a table: every byte of an owner is looked up on every claiming request).
constexpr std::array<bool, 256> kBaggageOctet = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c)
    t[static_cast<size_t>(c)] = c == 0x21 || (c >= 0x23 && c <= 0x2B) || (c >= 0x2D && c <= 0x3A) ||
                                (c >= 0x3C && c <= 0x5B) || (c >= 0x5D && c <= 0x7E);
  return t;
}();
bool is_baggage_octet(unsigned char c) { return kBaggageOctet[c]; }

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// One list member, split at its first '=' (before any ';').
struct Member {
  std::string_view key;    // OWS trimmed; the whole pre-';' text when there is no '='
  std::string_view value;  // OWS trimmed, still encoded
  bool well_formed = false;
};

Member parse_member(std::string_view text) {
  Member m;
  std::string_view kv = text.substr(0, text.find(';'));
  size_t eq = kv.find('=');
  if (eq == std::string_view::npos) {
    m.key = trim_ows(kv);
    return m;
  }
  m.key = trim_ows(kv.substr(0, eq));
  m.value = trim_ows(kv.substr(eq + 1));
  m.well_formed = is_token(m.key);
  for (unsigned char c : m.value) m.well_formed = m.well_formed && is_baggage_octet(c);
  return m;
}


// Percent-decodes to raw octets; a '%' not followed by two hex digits stays.
std::string percent_decode(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '%' && i + 2 < v.size() && hex_digit(v[i + 1]) >= 0 && hex_digit(v[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex_digit(v[i + 1]) * 16 + hex_digit(v[i + 2])));
      i += 2;
    } else {
      out.push_back(v[i]);
    }
  }
  return out;
}

// Length of the valid UTF-8 sequence starting at s[i], 0 if invalid
// (RFC 3629 table: no overlongs, no surrogates, nothing above U+10FFFF).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return len;
}

std::string replace_invalid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len = utf8_sequence_length(s, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> baggage_get(std::string_view header_value, std::string_view key) {
  if (!is_token(key)) return std::nullopt;
  std::optional<std::string> found;
  for_each_list_element(header_value, [&](std::string_view text) {
    if (found) return;
    Member m = parse_member(text);
    if (m.well_formed && m.key == key) found = replace_invalid_utf8(percent_decode(m.value));
  });
  return found;
}

namespace {

// Whether `encoded`, percent-decoded as percent_decode does, is `plain`
// (without building the decoded copy).
bool percent_decodes_to(std::string_view encoded, std::string_view plain) {
  size_t at = 0;
  for (size_t i = 0; i < encoded.size(); ++i, ++at) {
    char c = encoded[i];
    if (c == '%' && i + 2 < encoded.size() && hex_digit(encoded[i + 1]) >= 0 && hex_digit(encoded[i + 2]) >= 0) {
      c = static_cast<char>(hex_digit(encoded[i + 1]) * 16 + hex_digit(encoded[i + 2]));
      i += 2;
    }
    if (at == plain.size() || plain[at] != c) return false;
  }
  return at == plain.size();
}

}  // namespace

std::optional<std::string> baggage_merge(std::string_view header_value, std::string_view key, std::string_view value,
                                         size_t reserve_extra) {
  if (!is_token(key)) return std::nullopt;
  const size_t ours_bytes = key.size() + 1 + percent_encoded_baggage_size(value);
  // The members re-joined with ours in, written as they are read; when
  // nothing changes, the input goes back instead.
  std::string result;
  result.reserve(header_value.size() + 1 + ours_bytes + reserve_extra);
  auto add = [&](std::string_view text) {
    if (!result.empty()) result.push_back(',');
    result.append(text);
  };
  auto add_ours = [&] {
    if (!result.empty()) result.push_back(',');
    result.append(key);
    result.push_back('=');
    const size_t at = result.size();
    result.resize(at + ours_bytes - key.size() - 1);
    write_percent_encoded_baggage_value(value, result.data() + at);
  };
  bool found = false;
  bool changed = false;
  bool too_long = false;
  for_each_list_element(header_value, [&](std::string_view text) {
    if (too_long) return;
    Member m = parse_member(text);
    if (m.key != key) {
      add(text);
    } else if (found) {  // a duplicate of our key: drop it
      changed = true;
    } else {
      found = true;
      // Compared as raw octets so that a replacement is itself kept next time.
      if (m.well_formed && percent_decodes_to(m.value, value)) {
        add(text);
      } else {
        add_ours();
        changed = true;
      }
    }
    // Unchanged, the result is no longer than the input: past the limit
    // either way.
    too_long = result.size() > kMaxBaggageBytes;
  });
  if (too_long) return std::nullopt;
  if (!found) {
    add_ours();
    changed = true;
  }
  if (!changed) result.assign(header_value);
  if (result.size() > kMaxBaggageBytes) return std::nullopt;
  return result;
}

size_t percent_encoded_baggage_size(std::string_view v) {
  size_t n = v.size();
  for (unsigned char c : v)
    if (!is_baggage_octet(c) || c == '%') n += 2;
  return n;
}

char* write_percent_encoded_baggage_value(std::string_view v, char* out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : v) {
    if (is_baggage_octet(c) && c != '%') {
      *out++ = static_cast<char>(c);
    } else {
      *out++ = '%';
      *out++ = kHex[c >> 4];
      *out++ = kHex[c & 0xF];
    }
  }
  return out;
}

std::string percent_encode_baggage_value(std::string_view v) {
  std::string out(percent_encoded_baggage_size(v), '\0');
  write_percent_encoded_baggage_value(v, out.data());
  return out;
}

}  // namespace onelayer
