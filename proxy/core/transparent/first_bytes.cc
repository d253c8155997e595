#include "core/transparent/first_bytes.h"

namespace onelayer {

namespace {

// RFC 9110 methods plus PATCH (RFC 5789); "PRI" is HTTP/2's preface.
constexpr std::string_view kMethods[] = {"GET ",    "HEAD ",  "POST ",    "PUT ",   "DELETE ",
                                         "CONNECT ", "OPTIONS ", "TRACE ", "PATCH "};
constexpr std::string_view kH2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// `bytes` is `word` or a start of it.
bool starts(std::string_view bytes, std::string_view word, bool* partial) {
  if (bytes.size() < word.size()) {
    if (word.substr(0, bytes.size()) == bytes) *partial = true;
    return false;
  }
  return bytes.substr(0, word.size()) == word;
}

}  // namespace

FirstBytes classify_first_bytes(std::string_view bytes) {
  if (bytes.empty()) return FirstBytes::need_more;
  // TLS record: type 22 (handshake), version major 3.
  if (static_cast<unsigned char>(bytes[0]) == 0x16) {
    if (bytes.size() < 2) return FirstBytes::need_more;
    return bytes[1] == 0x03 ? FirstBytes::tls : FirstBytes::other;
  }
  bool partial = false;
  if (starts(bytes, kH2Preface, &partial)) return FirstBytes::h2c;
  for (std::string_view m : kMethods) {
    if (starts(bytes, m, &partial)) return FirstBytes::http1;
  }
  return partial ? FirstBytes::need_more : FirstBytes::other;
}

const char* passthrough_reason(FirstBytes b) { return b == FirstBytes::tls ? "tls" : "unknown"; }

}  // namespace onelayer
