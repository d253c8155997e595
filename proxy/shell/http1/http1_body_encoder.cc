#include "shell/http1/http1_body_encoder.h"

#include <charconv>

#include "core/http/http_headers.h"

namespace onelayer {

// "<hex len>\r\n" into buf, without a format string (this runs per body
// piece); returns its length.
static unsigned chunk_size_line(char (&buf)[24], size_t len) {
  char* end = std::to_chars(buf, buf + 20, len, 16).ptr;
  end[0] = '\r';
  end[1] = '\n';
  return static_cast<unsigned>(end + 2 - buf);
}

BodyFraming response_framing(bool declared_length, bool no_body, bool http11) {
  if (no_body) return BodyFraming::none;
  if (declared_length) return BodyFraming::length;
  return http11 ? BodyFraming::chunked : BodyFraming::close_delimited;
}

void Http1BodyEncoder::append_head_lines(std::string& out, uint64_t content_length, std::string_view codings,
                                         bool length_line) const {
  if (framing_ == BodyFraming::length || (framing_ == BodyFraming::none && length_line)) {
    out += "Content-Length: ";
    append_decimal(out, content_length);
    out += "\r\n";
  } else if (framing_ == BodyFraming::chunked) {
    // Codings the sender applied stay in front of chunked.
    out += "Transfer-Encoding: ";
    if (!codings.empty()) {
      out += codings;
      out += ", ";
    }
    out += "chunked\r\n";
  }
}

unsigned Http1BodyEncoder::frame(std::string_view bytes, uv_buf_t* parts) {
  unsigned n = 0;
  if (chunked()) parts[n++] = uv_buf_init(line_, chunk_size_line(line_, bytes.size()));
  parts[n++] = uv_buf_init(const_cast<char*>(bytes.data()), static_cast<unsigned>(bytes.size()));
  if (chunked()) parts[n++] = uv_buf_init(const_cast<char*>("\r\n"), 2);
  return n;
}

void Http1BodyEncoder::append(std::string& out, std::string_view bytes) const {
  if (chunked()) {
    char line[24];
    out.append(line, chunk_size_line(line, bytes.size()));
    out.append(bytes);
    out += "\r\n";
  } else {
    out.append(bytes);
  }
}

void Http1BodyEncoder::append_last(std::string& out, const Headers& trailers) const {
  if (!chunked()) return;
  out += "0\r\n";
  append_serialized(trailers, out);
  out += "\r\n";
}

}  // namespace onelayer
