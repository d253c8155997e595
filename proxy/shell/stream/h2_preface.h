// The first bytes of a client connection: the HTTP/2 prior-knowledge
// preface ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", RFC 9113 3.4), something else
// (HTTP/1), or too few bytes to tell. Here, below both server codecs: the
// HTTP/1 connection reads the first bytes and asks this before it knows
// whether it keeps the connection or hands it to the HTTP/2 codec.
#pragma once

#include <algorithm>
#include <string_view>

namespace onelayer {

inline constexpr std::string_view kH2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

enum class H2Preface { yes, no, need_more };

// Pure; `first_bytes` is everything read so far.
inline H2Preface detect_h2_preface(std::string_view first_bytes) {
  const size_t n = std::min(first_bytes.size(), kH2Preface.size());
  if (first_bytes.substr(0, n) != kH2Preface.substr(0, n)) return H2Preface::no;
  return n == kH2Preface.size() ? H2Preface::yes : H2Preface::need_more;
}

}  // namespace onelayer
