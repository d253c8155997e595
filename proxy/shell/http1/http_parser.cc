#include "shell/http1/http_parser.h"

#include <algorithm>
#include <cstring>

namespace onelayer {

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
  in_message_ = false;
  in_trailers_ = false;
  resume_after_message_ = false;
  restart_head_scan();
}

void HttpParser::start_over(llhttp_type_t type, Handler* handler) {
  llhttp_init(&llhttp_, type, const_cast<llhttp_settings_t*>(settings()));
  handler_ = handler;
  reset();
  head_.clear();
  head_bytes_ = 0;
  max_head_bytes_ = 64 * 1024;
  max_headers_ = 128;
  expect_new_field_ = true;
}

void HttpParser::restart_head_scan() {
  scan_ = Scan::line_start;
  scan_line_bytes_ = 0;
  scan_past_request_line_ = false;
  scan_prev_cr_ = false;
  scan_fold_ = false;
}

// RFC 9112 2.2 and 5.2: every line of the head ends in CRLF, and a line that
// starts with SP or HTAB continues the one before (obs-fold, refused by the
// caller). Only newline bytes are looked at one by one (memchr finds them),
// so a head costs a few comparisons per line.
size_t HttpParser::scan_request_head(const char* data, size_t len) {
  const char* p = data;
  const char* end = data + len;
  while (p < end && scan_ != Scan::done) {
    if (scan_ == Scan::line_start) {
      if (scan_past_request_line_ && (*p == ' ' || *p == '\t')) scan_fold_ = true;
      scan_ = Scan::in_line;
      scan_line_bytes_ = 0;
    }
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    if (!nl) {
      size_t n = static_cast<size_t>(end - p);
      scan_line_bytes_ = static_cast<uint8_t>(std::min<size_t>(2, scan_line_bytes_ + n));
      scan_prev_cr_ = end[-1] == '\r';
      return len;
    }
    bool cr = nl > p ? nl[-1] == '\r' : scan_prev_cr_;
    if (!cr) return static_cast<size_t>(nl - data);
    size_t line = std::min<size_t>(2, scan_line_bytes_ + static_cast<size_t>(nl - p));
    if (line == 1 && scan_past_request_line_) {
      scan_ = Scan::done;  // the empty line: the body (if any) follows
    } else {
      if (line > 1) scan_past_request_line_ = true;  // (empty lines before it are skipped)
      scan_ = Scan::line_start;
    }
    scan_prev_cr_ = false;
    p = nl + 1;
  }
  return len;
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
  s->in_message_ = true;
  s->in_trailers_ = false;
  s->trailers_.clear();
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
  Headers& h = s->fields();
  if (s->expect_new_field_) {
    if (h.size() >= s->max_headers_) {
      s->error_ = Error::too_many_headers;
      return HPE_USER;
    }
    h.emplace_back();
    s->expect_new_field_ = false;
  }
  h.back().name.append(at, len);
  return s->count_head_bytes(len + 4);  // ": " and CRLF
}

int HttpParser::s_header_value(llhttp_t* p, const char* at, size_t len) {
  HttpParser* s = self(p);
  Headers& h = s->fields();
  if (h.empty()) return -1;
  // Several fragments: a split read, or (responses) obs-fold continuation
  // lines, which are joined here; the request-head scan reports folds.
  h.back().value.append(at, len);
  return s->count_head_bytes(len);
}

int HttpParser::s_header_value_complete(llhttp_t* p) {
  HttpParser* s = self(p);
  Headers& h = s->fields();
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
  if (p->type == HTTP_REQUEST && p->http_major != 1) {
    // "HTTP/2.0" in a request line is not HTTP/2 (that starts with the
    // connection preface, told apart before this parser runs).
    s->error_ = Error::parse;
    llhttp_set_error_reason(p, "only HTTP/1.x is served in HTTP/1 syntax");
    return -1;
  }
  h.obs_fold = s->scan_fold_;
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
  // Field callbacks from here on are the trailer section of a chunked body
  // (llhttp uses the same ones); they count against the same head limits.
  s->in_trailers_ = true;
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
  s->in_trailers_ = false;
  s->restart_head_scan();
  if (!s->trailers_.empty()) s->handler_->on_trailers(s->trailers_);
  int rc = s->handler_->on_message_end();
  if (rc == 0 && p->type == HTTP_REQUEST) {
    // The next request may start in this same buffer: stop here, so that
    // feed() scans its head before llhttp parses it.
    s->resume_after_message_ = true;
    return HPE_PAUSED;
  }
  return rc;
}

size_t HttpParser::feed(const char* data, size_t len) {
  if (error_ != Error::none && error_ != Error::paused) return 0;
  feeding_ = true;
  size_t used = feed_some(data, len);
  feeding_ = false;
  return used;
}

size_t HttpParser::feed_some(const char* data, size_t len) {
  const bool request = llhttp_.type == HTTP_REQUEST;
  const char* start = data;
  const char* end = data + len;
  for (;;) {
    // llhttp parses up to a bare LF the scan found, so that what comes first
    // in the bytes decides the error, however the reads split them.
    size_t n = static_cast<size_t>(end - start);
    size_t clean = request && scan_ != Scan::done ? scan_request_head(start, n) : n;
    llhttp_errno_t rc = llhttp_execute(&llhttp_, start, clean);
    if (rc == HPE_OK && clean < n) {
      error_ = Error::parse;
      llhttp_set_error_reason(&llhttp_, "line ending without CR in the request head");
      return static_cast<size_t>(start + clean - data);
    }
    if (rc == HPE_OK) return len;
    const char* pos = llhttp_get_error_pos(&llhttp_);
    if (rc == HPE_PAUSED && resume_after_message_) {
      resume_after_message_ = false;
      llhttp_resume(&llhttp_);
      start = pos ? pos : end;
      if (start == end) return len;
      continue;
    }
    if (rc == HPE_PAUSED_UPGRADE && request) {
      // llhttp stops after a request that asks to upgrade. One that switches
      // leaves the parser behind (its bytes go to the tunnel); any other (an
      // ignored h2c offer, a refused or declined upgrade) goes on in HTTP/1.1.
      llhttp_resume_after_upgrade(&llhttp_);
      start = pos ? pos : end;
      if (start == end) return len;
      continue;
    }
    if (rc == HPE_PAUSED) {
      error_ = Error::paused;
      return pos ? static_cast<size_t>(pos - data) : len;
    }
    if (error_ == Error::none) error_ = Error::parse;
    return pos && pos >= data && pos <= end ? static_cast<size_t>(pos - data) : 0;
  }
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
