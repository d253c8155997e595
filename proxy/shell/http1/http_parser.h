// llhttp wrapper used for both directions: joins header fragments, enforces
// head size limits, and hands complete heads, body bytes and message ends to
// its owner. One parser per connection, reused across messages.
//
// A request head is also scanned line by line before llhttp sees its bytes
// (RequestHeadScan below), for the two things llhttp 8.1 lets through that
// a hop in front may read differently: obs-fold continuation lines (even
// after an empty first line, "Content-Length:" CRLF " 5") and line endings
// that are a bare LF (after the request line, or ending the head).
#pragma once

#include <llhttp.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/http/http_headers.h"
#include "core/http/message_head.h"

namespace onelayer {

class HttpParser {
 public:
  class Handler {
   public:
    virtual ~Handler() = default;
    // 0 continue, 1 no body (HEAD responses), -1 error (HPE_USER).
    virtual int on_head(MessageHead& head) = 0;
    virtual int on_body(const char* data, size_t len) = 0;  // 0 or -1
    // The trailer section of a chunked body (RFC 9112 7.1.2), when it had
    // fields: just before on_message_end. The fields are as received.
    virtual void on_trailers(Headers&) {}
    // 0 continue parsing, or HPE_PAUSED to stop after this message.
    virtual int on_message_end() = 0;
  };

  enum class Error : uint8_t { none, head_too_large, too_many_headers, parse, user, paused };

  HttpParser(llhttp_type_t type, Handler* handler);
  HttpParser(const HttpParser&) = delete;
  HttpParser& operator=(const HttpParser&) = delete;

  void set_limits(uint64_t max_head_bytes, uint32_t max_headers) {
    max_head_bytes_ = max_head_bytes;
    max_headers_ = max_headers;
  }

  // Feeds bytes. Returns how many were consumed: all of them unless the
  // parser paused (then the rest must be fed again after resume()) or failed.
  size_t feed(const char* data, size_t len);
  Error finish();  // EOF from the peer
  void resume();
  void reset();    // new connection or after an error
  // A parser from a pool, for a new owner: as if just constructed, but the
  // head keeps its capacity (HttpParserPool).
  void start_over(llhttp_type_t type, Handler* handler);

  Error error() const { return error_; }
  const char* error_reason() const { return llhttp_.reason ? llhttp_.reason : ""; }
  bool message_needs_eof() const { return llhttp_message_needs_eof(&llhttp_) != 0; }
  bool in_message() const { return in_message_; }
  // The message asks to switch protocols (llhttp's reading: a request with
  // Upgrade and Connection: upgrade, or CONNECT; a 101 response). Parsing
  // goes on in HTTP/1.1 after it: an owner that never switches decides
  // what follows.
  bool upgrade() const { return llhttp_.upgrade != 0; }
  // The request just parsed asks to switch protocols and carried no body
  // (CONNECT, or Upgrade without a body): what follows it is not
  // HTTP/1.1. A server that never switches answers it and closes.
  bool request_switches_protocols() const {
    return upgrade() && (head_.method == "CONNECT" || !(head_.chunked || head_.content_length > 0));
  }
  // Inside feed(): a handler callback runs (the parser must outlive it).
  bool feeding() const { return feeding_; }
  const MessageHead& head() const { return head_; }  // the message being parsed (or the last one)

 private:
  static int s_message_begin(llhttp_t*);
  static int s_url(llhttp_t*, const char*, size_t);
  static int s_status(llhttp_t*, const char*, size_t);
  static int s_method(llhttp_t*, const char*, size_t);
  static int s_header_field(llhttp_t*, const char*, size_t);
  static int s_header_value(llhttp_t*, const char*, size_t);
  static int s_header_value_complete(llhttp_t*);
  static int s_headers_complete(llhttp_t*);
  static int s_body(llhttp_t*, const char*, size_t);
  static int s_message_complete(llhttp_t*);

  size_t feed_some(const char* data, size_t len);  // feed() without the guard
  int count_head_bytes(size_t n);
  // Runs the request-head scan over [data, data + len): the offset of the
  // first LF without CR before it, or len.
  size_t scan_request_head(const char* data, size_t len);
  void restart_head_scan();
  static const llhttp_settings_t* settings();

  // Where header-field callbacks go: the head, or after it the trailers.
  Headers& fields() { return in_trailers_ ? trailers_ : head_.headers; }

  llhttp_t llhttp_;
  Handler* handler_;
  MessageHead head_;
  Headers trailers_;  // the trailer section of the message being parsed
  // Ordered so that no padding sits between fields: every idle connection
  // holds a parser.
  uint64_t head_bytes_ = 0;
  uint64_t max_head_bytes_ = 64 * 1024;
  uint32_t max_headers_ = 128;
  Error error_ = Error::none;
  bool in_message_ = false;
  bool feeding_ = false;
  bool expect_new_field_ = true;   // the next header-field callback starts a field
  bool in_trailers_ = false;       // the head is complete: fields are trailers
  // A message llhttp finished inside a buffer that goes on: feed() resumes
  // and scans the rest as the next message's head.
  bool resume_after_message_ = false;
  // The request-head scan: where it stands in the head (done once the empty
  // line that ends it was seen), how many bytes of the current line it has
  // seen (saturating at 2: an empty line is just CR), whether the request
  // line is behind it, whether the last byte was CR, and whether a line
  // began with SP or HTAB (obs-fold).
  enum class Scan : uint8_t { line_start, in_line, done };
  Scan scan_ = Scan::line_start;
  uint8_t scan_line_bytes_ = 0;
  bool scan_past_request_line_ = false;
  bool scan_prev_cr_ = false;
  bool scan_fold_ = false;
};

}  // namespace onelayer
