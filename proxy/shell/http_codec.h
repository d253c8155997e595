// llhttp wrapper used for both directions: joins header fragments, enforces
// head size limits, detects obs-fold, and hands complete heads, body bytes and
// message ends to its owner. One parser per connection, reused across messages.
#pragma once

#include <llhttp.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/http_headers.h"

namespace onelayer {

struct MessageHead {
  std::string method;   // requests
  std::string target;   // requests
  int status = 0;       // responses
  std::string reason;   // responses
  uint8_t http_major = 1, http_minor = 1;
  Headers headers;
  bool obs_fold = false;
  bool chunked = false;
  bool has_content_length = false;
  uint64_t content_length = 0;
  bool keep_alive = true;

  void clear();
};

class HttpParser {
 public:
  class Handler {
   public:
    virtual ~Handler() = default;
    // 0 continue, 1 no body (HEAD responses), -1 error (HPE_USER).
    virtual int on_head(MessageHead& head) = 0;
    virtual int on_body(const char* data, size_t len) = 0;  // 0 or -1
    // 0 continue parsing, or HPE_PAUSED to stop after this message.
    virtual int on_message_end() = 0;
  };

  enum class Error { none, head_too_large, too_many_headers, parse, user, paused };

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

  Error error() const { return error_; }
  const char* error_reason() const { return llhttp_.reason ? llhttp_.reason : ""; }
  bool message_needs_eof() const { return llhttp_message_needs_eof(&llhttp_) != 0; }
  bool in_head() const { return in_head_; }
  bool in_message() const { return in_message_; }
  uint8_t method_code() const { return llhttp_.method; }
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

  int count_head_bytes(size_t n);
  static const llhttp_settings_t* settings();

  llhttp_t llhttp_;
  Handler* handler_;
  MessageHead head_;
  // Ordered so that no padding sits between fields: every idle connection
  // holds a parser.
  uint64_t head_bytes_ = 0;
  uint64_t max_head_bytes_ = 64 * 1024;
  const char* feed_start_ = nullptr;  // the buffer being fed now
  const char* feed_end_ = nullptr;
  Error error_ = Error::none;
  uint32_t max_headers_ = 128;
  uint32_t feed_count_ = 0;           // buffers fed so far (wraps harmlessly)
  uint32_t value_feed_ = 0;           // the buffer the last value fragment came from
  bool in_head_ = false;
  bool in_message_ = false;
  bool expect_new_field_ = true;   // the next header-field callback starts a field
  bool value_open_ = false;        // a value of the current field has started
  bool value_ended_at_feed_end_ = false;
};

}  // namespace onelayer
