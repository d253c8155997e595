#include "shell/http_codec.h"

#include <cstring>

namespace onelayer {

void MessageHead::clear() {
  method.clear();
  target.clear();
  status = 0;
  reason.clear();
  http_major = http_minor = 1;
  headers.clear();  // keeps capacity: no churn on keep-alive connections
  obs_fold = false;
  chunked = false;
  has_content_length = false;
  content_length = 0;
  keep_alive = true;
}

static HttpParser* self(llhttp_t* p) { return static_cast<HttpParser*>(p->data); }

// One settings table for every parser: it only holds the trampolines.
const llhttp_settings_t* HttpParser::settings() {
  static const llhttp_settings_t s = [] {
    llhttp_settings_t t;
    llhttp_settings_init(&t);
    t.on_message_begin = s_message_begin;
    t.on_url = s_url;
    t.on_status = s_status;
    t.on_method = s_method;
    t.on_header_field = s_header_field;
    t.on_header_value = s_header_value;
    t.on_header_value_complete = s_header_value_complete;
    t.on_headers_complete = s_headers_complete;
    t.on_body = s_body;
    t.on_message_complete = s_message_complete;
    return t;
  }();
  return &s;
}

HttpParser::HttpParser(llhttp_type_t type, Handler* handler) : handler_(handler) {
  llhttp_init(&llhttp_, type, const_cast<llhttp_settings_t*>(settings()));
  llhttp_.data = this;
}

void HttpParser::reset() {
  llhttp_reset(&llhttp_);
  llhttp_.data = this;
  error_ = Error::none;
  in_head_ = in_message_ = false;
}

int HttpParser::count_head_bytes(size_t n) {
  head_bytes_ += n;
  if (head_bytes_ > max_head_bytes_) {
    error_ = Error::head_too_large;
    return HPE_USER;
  }
  return 0;
}

int HttpParser::s_message_begin(llhttp_t* p) {
  HttpParser* s = self(p);
  s->head_.clear();
  s->head_bytes_ = 0;
  s->in_head_ = true;
  s->in_message_ = true;
  s->value_open_ = false;
  s->expect_new_field_ = true;
  return 0;
}

int HttpParser::s_method(llhttp_t* p, const char* at, size_t len) {
  HttpParser* s = self(p);
  s->head_.method.append(at, len);
  return s->count_head_bytes(len);
}

int HttpParser::s_url(llhttp_t* p, const char* at, size_t len) {
  HttpParser* s = self(p);
  s->head_.target.append(at, len);
  return s->count_head_bytes(len);
}

int HttpParser::s_status(llhttp_t* p, const char* at, size_t len) {
  HttpParser* s = self(p);
  s->head_.reason.append(at, len);
  return s->count_head_bytes(len);
}

int HttpParser::s_header_field(llhttp_t* p, const char* at, size_t len) {
  HttpParser* s = self(p);
  Headers& h = s->head_.headers;
  if (s->expect_new_field_) {
    if (h.size() >= s->max_headers_) {
      s->error_ = Error::too_many_headers;
      return HPE_USER;
    }
    h.emplace_back();
    s->expect_new_field_ = false;
    s->value_open_ = false;
  }
  h.back().name.append(at, len);
  return s->count_head_bytes(len + 4);  // ": " and CRLF
}

int HttpParser::s_header_value(llhttp_t* p, const char* at, size_t len) {
  HttpParser* s = self(p);
  Headers& h = s->head_.headers;
  if (h.empty()) return -1;
  // A second fragment of the same value is a split read only when the first
  // one ran to the end of its buffer and this one starts the next buffer;
  // anything else is an obs-fold continuation line (RFC 9112 5.2).
  bool split = s->value_ended_at_feed_end_ && at == s->feed_start_ && s->feed_count_ == s->value_feed_ + 1;
  if (s->value_open_ && !split) {
    s->head_.obs_fold = true;
  }
  s->value_open_ = true;
  h.back().value.append(at, len);
  s->value_ended_at_feed_end_ = (at + len == s->feed_end_);
  s->value_feed_ = s->feed_count_;
  return s->count_head_bytes(len);
}

int HttpParser::s_header_value_complete(llhttp_t* p) {
  HttpParser* s = self(p);
  Headers& h = s->head_.headers;
  if (h.empty()) return 0;
  // Trim OWS on both ends (llhttp already skips leading spaces).
  std::string& v = h.back().value;
  size_t e = v.size();
  while (e > 0 && (v[e - 1] == ' ' || v[e - 1] == '\t')) --e;
  v.resize(e);
  size_t b = 0;
  while (b < v.size() && (v[b] == ' ' || v[b] == '\t')) ++b;
  if (b) v.erase(0, b);
  s->expect_new_field_ = true;
  s->value_open_ = false;
  return 0;
}

int HttpParser::s_headers_complete(llhttp_t* p) {
  HttpParser* s = self(p);
  MessageHead& h = s->head_;
  if (p->type == HTTP_REQUEST && (p->flags & F_TRANSFER_ENCODING) && !(p->flags & F_CHUNKED)) {
    // llhttp refuses this only after on_headers_complete returns; refuse it
    // before the head reaches the handler, so nothing is forwarded.
    s->error_ = Error::parse;
    llhttp_set_error_reason(p, "Transfer-Encoding does not end in chunked");
    return -1;
  }
  s->in_head_ = false;
  h.status = p->status_code;
  h.http_major = p->http_major;
  h.http_minor = p->http_minor;
  h.chunked = (p->flags & F_CHUNKED) != 0;
  h.has_content_length = (p->flags & F_CONTENT_LENGTH) != 0;
  h.content_length = h.has_content_length ? p->content_length : 0;
  h.keep_alive = llhttp_should_keep_alive(p) != 0;
  if (p->type == HTTP_REQUEST && h.method.empty())
    h.method = llhttp_method_name(static_cast<llhttp_method_t>(p->method));
  int rc = s->handler_->on_head(h);
  if (rc < 0) {
    if (s->error_ == Error::none) s->error_ = Error::user;
    return -1;
  }
  return rc;
}

int HttpParser::s_body(llhttp_t* p, const char* at, size_t len) {
  HttpParser* s = self(p);
  if (s->handler_->on_body(at, len) != 0) {
    if (s->error_ == Error::none) s->error_ = Error::user;
    return HPE_USER;
  }
  return 0;
}

int HttpParser::s_message_complete(llhttp_t* p) {
  HttpParser* s = self(p);
  s->in_message_ = false;
  return s->handler_->on_message_end();
}

size_t HttpParser::feed(const char* data, size_t len) {
  if (error_ != Error::none && error_ != Error::paused) return 0;
  feed_start_ = data;
  ++feed_count_;
  feed_end_ = data + len;
  llhttp_errno_t rc = llhttp_execute(&llhttp_, data, len);
  if (rc == HPE_OK) return len;
  if (rc == HPE_PAUSED) {
    error_ = Error::paused;
    const char* pos = llhttp_get_error_pos(&llhttp_);
    return pos ? static_cast<size_t>(pos - data) : len;
  }
  if (error_ == Error::none) error_ = Error::parse;
  const char* pos = llhttp_get_error_pos(&llhttp_);
  return pos && pos >= data && pos <= data + len ? static_cast<size_t>(pos - data) : 0;
}

HttpParser::Error HttpParser::finish() {
  if (error_ != Error::none) return error_;
  llhttp_errno_t rc = llhttp_finish(&llhttp_);
  if (rc != HPE_OK && rc != HPE_PAUSED && error_ == Error::none) error_ = Error::parse;
  return error_;
}

void HttpParser::resume() {
  if (error_ == Error::paused) {
    error_ = Error::none;
    llhttp_resume(&llhttp_);
  }
}

}  // namespace onelayer
