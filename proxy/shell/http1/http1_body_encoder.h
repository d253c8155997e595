// HTTP/1.1 framing of what onelayer writes, on either side: how a body is
// delimited, the head lines that say so, chunked re-framing of body pieces
// and the last chunk. The exchange says what to send; this says how it looks
// on an HTTP/1.1 connection (HttpParser is the reading half).
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/http/http_headers.h"

namespace onelayer {

enum class BodyFraming : uint8_t {
  none,             // no body (HEAD, 204, 304), or a Content-Length head that announces one not sent
  length,           // Content-Length
  chunked,          // Transfer-Encoding: chunked, re-framed piece by piece
  close_delimited,  // the body ends with the connection (an HTTP/1.0 client)
};

// How a response body goes to the client: `declared_length` when the
// upstream sent Content-Length, `no_body` for HEAD, 204 and 304, `http11`
// when the client speaks HTTP/1.1 (it can take chunked).
BodyFraming response_framing(bool declared_length, bool no_body, bool http11);

class Http1BodyEncoder {
 public:
  explicit Http1BodyEncoder(BodyFraming f = BodyFraming::length) : framing_(f) {}
  void set_framing(BodyFraming f) { framing_ = f; }
  BodyFraming framing() const { return framing_; }
  bool chunked() const { return framing_ == BodyFraming::chunked; }

  // The head lines for the framing, appended to `out`: "Content-Length: n"
  // (for length, and for none when `length_line` asks for it: a response to
  // HEAD or a 304 keeps its length), "Transfer-Encoding: <codings, >chunked"
  // for chunked, nothing for close_delimited.
  void append_head_lines(std::string& out, uint64_t content_length, std::string_view codings = {},
                         bool length_line = false) const;
  // One body piece as the parts to write (chunk-size line, bytes, CRLF when
  // chunked; the bytes alone otherwise), at most 3, into `parts`; returns how
  // many. The size line lives in this object until the next call.
  unsigned frame(std::string_view bytes, uv_buf_t* parts);
  // The same, appended to `out` (a piece that leaves with its head).
  void append(std::string& out, std::string_view bytes) const;
  // What ends the body: the last chunk when chunked, else nothing.
  std::string_view last() const { return chunked() ? std::string_view("0\r\n\r\n") : std::string_view(); }
  // The same end with `trailers` in the last chunk (RFC 9112 7.1.2),
  // appended to `out`: only chunked can carry them, other framings end
  // as last() does. The caller has filtered them (rewrite_trailers).
  void append_last(std::string& out, const Headers& trailers) const;

 private:
  char line_[24];
  BodyFraming framing_;
};

}  // namespace onelayer
