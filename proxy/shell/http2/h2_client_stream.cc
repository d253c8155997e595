// One attempt on an HTTP/2 upstream connection: request translation, the
// response's events to the exchange, per-stream flow control and the end
// of the stream (release, cancel, reset by the peer, connection loss).
#include "shell/http2/h2_client_stream.h"

#include <uv.h>

#include <charconv>
#include <utility>

#include "core/request/request_validation.h"
#include "shell/http2/h2_client_connection.h"
#include "core/http/message_head.h"

namespace onelayer {

namespace {

// The client asked for trailers (TE: trailers): HTTP/2 keeps that one TE
// value (RFC 9113 8.2.2); gRPC needs it.
bool wants_trailers(const Headers& fields) {
  bool yes = false;
  for (const Header& h : fields) {
    if (!iequals(h.name, "te")) continue;
    for_each_list_element(h.value, [&](std::string_view e) {
      if (iequals(trim_ows(e.substr(0, e.find(';'))), "trailers")) yes = true;
    });
  }
  return yes;
}

}  // namespace

namespace {

// Host becomes :authority (the first one); every other field goes to the
// block as it comes.
class RequestFieldSink final : public HeaderSink {
 public:
  explicit RequestFieldSink(H2Request& r) : r_(r) {}
  void put(std::string_view name, std::string_view value) override {
    if (name.size() == 4 && iequals(name, "host")) {
      if (r_.authority.empty()) r_.authority = value;
      return;
    }
    r_.fields.put(name, value);
  }

 private:
  H2Request& r_;
};

}  // namespace

H2Request h2_request(const OutgoingRequest& req, std::string_view scheme) {
  H2Request r;
  h2_request(req, scheme, r);
  return r;
}

void h2_request(const OutgoingRequest& req, std::string_view scheme, H2Request& r) {
  const MessageHead& m = *req.head;
  r.fields.clear();
  r.authority.clear();
  r.method = m.method;
  r.scheme = scheme;
  r.path = req.target;
  // What the rewrite adds (the protocol fields, Via, X-Forwarded-*) fits in
  // the slack: one allocation each for the spans and the bytes.
  size_t bytes = 512;
  for (const Header& f : m.headers) bytes += f.name.size() + f.value.size();
  r.fields.reserve(m.headers.size() + 12, bytes);
  if (req.rewrite) {
    // The fields straight into the block (no sink of our own in between
    // for every field): the rewrite hands Host over on its own.
    std::string_view host;
    rewrite_request_headers(m.headers, *req.rewrite, r.fields, host);
    r.authority = host;
  } else {
    RequestFieldSink sink(r);
    for (const Header& f : m.headers)
      if (!is_hop_by_hop(f.name, m.headers) && !iequals(f.name, "content-length")) sink.put(f.name, f.value);
  }
  if (r.authority.empty()) r.authority = req.default_host;
  if (m.has_content_length) {
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, m.content_length).ptr;
    r.fields.put("content-length", std::string_view(digits, static_cast<size_t>(end - digits)));
  }
  if (wants_trailers(m.headers)) r.fields.put("te", "trailers");
}

H2ClientStream::H2ClientStream(H2ClientConnection* conn, Receiver* r, bool head_request)
    : conn_(conn), r_(r), connect_timeout_(conn->connect_timeout()), head_request_(head_request) {}

void H2ClientStream::unhold() {
  if (--busy_ == 0 && released_) delete this;
}

template <class F>
bool H2ClientStream::call(F&& f) {
  hold();
  f();
  const bool kept = !released_;
  unhold();
  return kept;
}

bool H2ClientStream::ready() const { return conn_ && !conn_->closing() && conn_->connected(); }

bool H2ClientStream::closing() const { return !conn_ || conn_->closing(); }

int H2ClientStream::send_request(const OutgoingRequest& req) {
  if (!conn_ || conn_->closing()) return UV_ECONNRESET;
  // Built in the worker's scratch head, whose buffers stay allocated from
  // one request to the next (an opened stream trades its fields' buffers
  // with a head the session held before); only a request that must wait
  // keeps a copy.
  thread_local H2Request t_head;
  H2Request& head = t_head;
  h2_request(req, conn_->over_tls() ? "https" : "http", head);
  std::string_view body = req.has_body ? req.body : std::string_view();
  bool end = !req.has_body || req.end;
  const Headers no_trailers;
  const Headers& trailers = end && req.trailers ? *req.trailers : no_trailers;
  bool end_with_head = end && body.empty() && trailers.empty();
  int32_t id = conn_->open_stream(this, head, end_with_head);
  local_ended_ = end;
  if (id == 0) {  // no slot yet: the request waits in the stream
    queued_head_ = head;
    queued_body_.assign(body);
    queued_end_ = end;
    queued_trailers_ = trailers;
    last_queued_ = queued_bytes();
    return 0;
  }
  id_ = id;
  H2Session& s = conn_->session();
  if (!end_with_head) {
    if (!body.empty()) s.send_data(id_, body);
    if (end) end_request(trailers);
  }
  conn_->flush();
  if (conn_) last_queued_ = queued_bytes();
  return 0;
}

void H2ClientStream::open_queued() {
  if (!conn_ || !queued_head_) return;
  bool end_with_head = queued_end_ && queued_body_.empty() && queued_trailers_.empty();
  int32_t id = conn_->open_stream(this, *queued_head_, end_with_head);
  if (id == 0) return;
  id_ = id;
  queued_head_.reset();
  H2Session& s = conn_->session();
  if (!end_with_head) {
    if (!queued_body_.empty()) s.send_data(id_, queued_body_);
    if (queued_end_) end_request(queued_trailers_);
  }
  queued_body_.clear();
  queued_trailers_.clear();
}

void H2ClientStream::end_request(const Headers& trailers) {
  if (trailers.empty()) {
    conn_->session().end_stream(id_);
  } else {
    conn_->session().send_trailers(id_, trailers);
  }
}

void H2ClientStream::send_request_body(std::string_view bytes) {
  if (!conn_ || finished_ || local_ended_ || bytes.empty()) return;
  if (queued_head_) {
    queued_body_.append(bytes);
  } else if (id_ != 0) {
    conn_->session().send_data(id_, bytes);
    conn_->flush();
  }
  if (conn_) last_queued_ = queued_bytes();
}

void H2ClientStream::send_request_end() { send_request_trailers(Headers()); }

void H2ClientStream::send_request_trailers(const Headers& trailers) {
  if (!conn_ || finished_ || local_ended_) return;
  local_ended_ = true;
  if (queued_head_) {
    queued_end_ = true;
    queued_trailers_ = trailers;
  } else if (id_ != 0) {
    end_request(trailers);
    conn_->flush();
  }
}

size_t H2ClientStream::queued_bytes() const {
  if (!conn_) return 0;
  size_t mine = queued_head_ ? queued_body_.size() : conn_->session().queued_bytes(id_);
  return mine + conn_->write_queue();
}

void H2ClientStream::on_drained() {
  size_t q = queued_bytes();
  bool less = q < last_queued_;
  last_queued_ = q;
  if (less) call([&] { r_->on_up_drained(); });
}

void H2ClientStream::pause_response() { paused_ = true; }

void H2ClientStream::resume_response() {
  if (!paused_) return;
  paused_ = false;
  ++busy_;  // deliver_held's callbacks may release the stream
  deliver_held();
  --busy_;
  if (released_) {
    if (busy_ == 0) delete this;
    return;
  }
  if (conn_) conn_->flush();  // the WINDOW_UPDATE for what was handed on
}

void H2ClientStream::response_body_sent(size_t n) {
  if (!conn_ || id_ == 0) return;
  conn_->session().consume(id_, n);
  conn_->flush();  // the WINDOW_UPDATE, when the stream's window is half spent
}

void H2ClientStream::consume_taken(size_t n) {
  if (conn_ && id_ != 0 && !r_->reopens_response_window()) conn_->session().consume(id_, n);
}

void H2ClientStream::deliver_held() {
  if (!held_.empty()) {
    std::string bytes;
    bytes.swap(held_);
    int rc = r_->on_up_body(bytes.data(), bytes.size());
    if (released_) return;
    consume_taken(bytes.size());
    if (rc < 0) {
      stopped_ = true;
      if (stream_open() && conn_) conn_->session().reset_stream(id_, H2Session::kCancel);
      r_->on_up_bad_response();
      return;
    }
  }
  if (paused_) return;
  if (held_trailers_) {
    Headers t = std::move(*held_trailers_);
    held_trailers_.reset();
    r_->on_up_trailers(t);
    if (released_ || paused_) return;
  }
  if (held_end_) {
    held_end_ = false;
    r_->on_up_end(true);
  }
}

void H2ClientStream::finish_with_conn() {
  if (!conn_) return;
  H2ClientConnection* c = conn_;
  conn_ = nullptr;
  // Our side still open, or the response not read to its end: the peer
  // learns the stream is abandoned (RST_STREAM CANCEL).
  if (stream_open() && !(local_ended_ && peer_ended_)) c->session().reset_stream(id_, H2Session::kCancel);
  c->detach(this);
}

void H2ClientStream::gone() {
  released_ = true;
  if (busy_ == 0) delete this;
}

void H2ClientStream::release(bool) {
  // An HTTP/2 connection outlives its streams whatever happened to this one.
  finish_with_conn();
  gone();
}

void H2ClientStream::cancel(bool) {
  finish_with_conn();
  gone();
}

void H2ClientStream::start_taken_over(const std::string& early) {
  if (conn_) conn_->start_taken_over(early);
}

void H2ClientStream::move_attempt_to(UpstreamStream* next) {
  conn_ = nullptr;
  r_->on_stream_moved(next);
  gone();
}

void H2ClientStream::on_connected() { call([&] { r_->on_connected(); }); }

void H2ClientStream::on_connect_failed(int err, bool dns) {
  conn_ = nullptr;
  call([&] { r_->on_connect_failed(err, dns); });
}

void H2ClientStream::on_tls_failed(const std::string& why, bool verify) {
  conn_ = nullptr;
  call([&] { r_->on_tls_failed(why, verify); });
}

void H2ClientStream::on_head(H2Session::Head& h, bool end_stream) {
  if (stopped_) return;
  head_seen_ = true;
  MessageHead head;
  head.status = h.status;
  head.http_major = 2;
  head.http_minor = 0;
  head.headers = std::move(h.fields);
  head.keep_alive = true;
  head.checked_by_codec = true;
  // Digits only (the session has refused a message whose DATA does not add
  // up to it). Above 2^53-1 is a broken response, as from an HTTP/1.1
  // upstream: no client may be handed a length it cannot hold.
  bool too_long = false;
  if (const Header* cl = find_header(head.headers, "content-length")) {
    std::optional<uint64_t> n = parse_content_length(cl->value, 19);
    head.has_content_length = n.has_value();
    head.content_length = n.value_or(0);
    too_long = n && *n > kMaxContentLength;
  }
  bool no_body = end_stream || head_request_ || head.status == 204 || head.status == 304;
  head.chunked = !no_body && !head.has_content_length;
  // Three digits from 600 up are no status (RFC 9110 15 ends at 599): a
  // broken response, as from an HTTP/1.1 upstream.
  const bool bad_status = head.status < 100 || head.status > 599;
  int rc = -1;
  const bool alive = too_long || bad_status || call([&] { rc = r_->on_up_head(head); });
  h.fields = std::move(head.headers);  // back to the session, for the next head's fields
  if (!alive) return;
  if (rc < 0) {
    stopped_ = true;
    if (stream_open() && conn_) conn_->session().reset_stream(id_, H2Session::kCancel);
    call([&] { r_->on_up_bad_response(); });
    return;
  }
  if (rc == 1 || no_body) discard_body_ = true;
}

void H2ClientStream::on_data(const uint8_t* data, size_t len) {
  if (stopped_ || discard_body_) {
    if (conn_) conn_->session().consume(id_, len);
    return;
  }
  if (paused_ || !held_.empty()) {
    // Held, not consumed: the stream's window closes by as much.
    held_.append(reinterpret_cast<const char*>(data), len);
    return;
  }
  int rc = 0;
  if (!call([&] { rc = r_->on_up_body(reinterpret_cast<const char*>(data), len); })) return;
  consume_taken(len);
  if (rc < 0) {
    stopped_ = true;
    if (stream_open() && conn_) conn_->session().reset_stream(id_, H2Session::kCancel);
    call([&] { r_->on_up_bad_response(); });
  }
}

void H2ClientStream::on_trailers(Headers& trailers) {
  if (stopped_) return;
  if (paused_ || !held_.empty()) {
    held_trailers_ = std::move(trailers);
    return;
  }
  call([&] { r_->on_up_trailers(trailers); });
}

void H2ClientStream::on_end() {
  peer_ended_ = true;
  if (stopped_) return;
  if (paused_ || !held_.empty() || held_trailers_) {
    held_end_ = true;
    return;
  }
  call([&] { r_->on_up_end(true); });
}

void H2ClientStream::on_reset(uint32_t error_code) {
  finished_ = true;
  if (stopped_) return;
  held_.clear();
  held_trailers_.reset();
  held_end_ = false;
  // REFUSED_STREAM (sent by the peer, or the session's verdict for a
  // stream above a GOAWAY's last-stream-id): the request was not
  // processed, so it may go again elsewhere whatever its method.
  if (error_code == H2Session::kRefusedStream && !head_seen_) {
    call([&] { r_->on_up_refused(); });
    return;
  }
  call([&] { r_->on_up_error(UV_ECONNRESET); });
}

void H2ClientStream::on_closed() { finished_ = true; }

void H2ClientStream::on_lost(int err) {
  conn_ = nullptr;
  // A response read to its end (perhaps held while paused) stays good.
  if (finished_ || stopped_ || peer_ended_) return;
  bool was_sent = sent_;
  finished_ = true;
  held_.clear();
  held_trailers_.reset();
  held_end_ = false;
  if (!was_sent) {  // its HEADERS never left: the upstream has not seen it
    call([&] { r_->on_up_refused(); });
    return;
  }
  call([&] { r_->on_up_error(err); });
}

void H2ClientStream::on_refused() {
  if (finished_ || stopped_ || sent_) return;
  finished_ = true;
  call([&] { r_->on_up_refused(); });
}

void H2ClientStream::on_read_done() {
  if (!stopped_ && head_seen_) call([&] { r_->on_up_read_done(); });
}

}  // namespace onelayer
