// One HTTP/2 request stream as the exchange's DownstreamStream
// (h2_server_stream.h).
#include "shell/http2/h2_server_stream.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>

#include "core/grpc/grpc_error_answer.h"
#include "core/grpc/grpc_protocol.h"
#include "core/request/request_validation.h"
#include "core/metrics/metrics.h"
#include "shell/http2/h2_server_connection.h"
#include "shell/http2/h2_request_head.h"
#include "shell/io/logging.h"
#include "shell/memory/spare_list.h"

namespace onelayer {

namespace {

// What one stream's messages may queue, either way (message_watermarks()).
constexpr size_t kH2StreamHighWater = 64 * 1024;
constexpr size_t kH2StreamLowWater = 16 * 1024;

// What a head costs on the wire, roughly (HPACK makes it less): for the
// access log's bytes_out.
uint64_t head_size(const H2Session::Head& h) {
  uint64_t n = 9 + 4;  // frame header, :status
  for (const Header& f : h.fields) n += f.name.size() + f.value.size() + 2;
  return n;
}
uint64_t head_size(const H2Response& h) {
  return 9 + 4 + h.fields.bytes() + 2 * h.fields.size();  // the same count from a field block
}

// Response heads are built in blocks kept per worker, whose buffers stay
// allocated from one response to the next. Bounded: a few dozen kept, and
// one that held a large head is freed instead.
constexpr size_t kSpareHeadBytes = 8 * 1024;
using SpareHeads = SpareList<std::unique_ptr<H2Response>, 64>;

std::unique_ptr<H2Response> take_spare_head() {
  std::unique_ptr<H2Response> h;
  if (!SpareHeads::take(h)) h = std::make_unique<H2Response>();
  return h;
}

void give_back(std::unique_ptr<H2Response>& h) {
  if (h && h->fields.bytes() <= kSpareHeadBytes) SpareHeads::give_back(std::move(h));
  h.reset();
}

}  // namespace

H2ServerStream::H2ServerStream(H2ServerConnection* conn, int32_t id) : conn_(conn), id_(id) {}

H2ServerStream::~H2ServerStream() {
  if (ex_) on_gone("client_closed");
  give_back(pending_head_);
}

H2Session& H2ServerStream::session() const { return conn_->session(); }
ServerCodecHost* H2ServerStream::host() const { return conn_->host(); }
const std::string& H2ServerStream::peer_ip() const { return conn_->connection()->peer_ip(); }
bool H2ServerStream::over_tls() const { return conn_->connection()->over_tls(); }
uint64_t H2ServerStream::client_connection() const { return conn_->connection()->client_connection(); }
const std::string& H2ServerStream::caller() const { return conn_->connection()->caller(); }

void H2ServerStream::on_head(H2Session::Head& head, bool end_stream) {
  MessageHead mh;
  const char* malformed = translate_h2_request(head, end_stream, mh);
  method_ = mh.method;
  path_ = mh.target;
  grpc_ = is_grpc_request(mh.headers);
  if (malformed) {
    refuse(400, "bad_request", malformed, {}, nullptr, {});
    return;
  }
  // The HTTP/1.1 front's field limit (Host counted, as a field there).
  if (mh.headers.size() > kMaxRequestHeaderFields) {
    refuse(431, "headers_too_large", "request over the header field count limit", {}, nullptr, {});
    return;
  }
  ExchangeStarter::Start a = host()->exchanges().start(*this, conn_->listener()->name(), mh, caller(),
                                                       conn_->connection()->original_destination());
  if (a.refused()) {
    refuse(a.status, a.reason, a.detail, a.extra, a.counted_in, a.hint);
    return;
  }
  // An Upgrade cannot reach here (HTTP/2 forbids the field). Expect:
  // 100-continue gets an interim :status 100 now, as on HTTP/1: the body
  // is needed anyway (for replay), and the upstream never has to speak 1xx.
  if (a.expect_continue && !end_stream && session().submit_interim(id_, 100)) {
    response_bytes_ += 9 + 1;  // frame header, :status 100 (indexed)
    conn_->write_out();
  }
  ex_ = std::move(a.exchange);
  ex_->start();
}

void H2ServerStream::on_data(const uint8_t* data, size_t len) {
  if (ex_) ex_->on_request_body(reinterpret_cast<const char*>(data), len);
  // The window reopens for bytes the exchange took and did not ask to hold;
  // held ones wait for release_request_body(). Bytes of a request answered
  // already are dropped.
  if (ex_ && held_) {
    unconsumed_ += len;
  } else {
    session().consume(id_, len);
  }
}

void H2ServerStream::on_trailers(Headers& trailers) {
  if (ex_) ex_->on_request_trailers(trailers);
}

void H2ServerStream::on_end() {
  if (ex_) ex_->on_request_end();
}

void H2ServerStream::on_gone(const char* reason) {
  ended_ = true;
  head_pending_ = false;
  if (!ex_) return;
  ex_->abort(reason);
  retire_exchange();
}

void H2ServerStream::on_drained() {
  drain_notice_wanted_ = false;
  if (ex_) ex_->on_down_drained();
}

void H2ServerStream::on_body_sent(size_t n) {
  if (ex_) ex_->on_down_body_sent(n);
}

void H2ServerStream::notify_when_drained() {
  if (drain_notice_wanted_) return;
  drain_notice_wanted_ = true;
  conn_->wake_when_drained(id_);
}

void H2ServerStream::retire_exchange() {
  if (ex_) host()->retire(std::move(ex_));
  held_ = false;
  if (unconsumed_ > 0) {  // nobody reads them now: the window must not stay shut
    session().consume(id_, unconsumed_);
    unconsumed_ = 0;
  }
}

bool H2ServerStream::submit_pending_head(bool end) {
  head_pending_ = false;
  bool ok = submit_head(*pending_head_, end);
  give_back(pending_head_);
  return ok;
}

bool H2ServerStream::submit_head(H2Response& head, bool end) {
  const uint64_t head_bytes = head_size(head);  // counted before the session takes the fields
  if (!session().submit_response(id_, head.status, std::move(head.fields), end)) {
    ended_ = true;
    return false;
  }
  response_bytes_ += head_bytes;
  if (end) ended_ = true;
  return true;
}

bool H2ServerStream::send_response_head(const MessageHead& head, const ResponseMeta& meta) {
  if (ended_) return false;
  // A head whose body is sure to follow (a length above zero) goes now.
  // Any other waits in the stream for what comes next, to go out with
  // END_STREAM if the end does: a gRPC Trailers-Only answer must be one
  // HEADERS frame.
  const bool body_follows = !meta.no_body && head.has_content_length && head.content_length > 0;
  std::unique_ptr<H2Response> out = take_spare_head();
  if (!translate_response_for_h2(head, meta, *out)) {
    give_back(out);
    spdlog::info("listener {}: response with a transfer coding cannot reach an HTTP/2 client",
                 conn_->listener()->name());
    return false;
  }
  if (body_follows) {
    // A refused submit (the client reset the stream) leaves the stream
    // ended: the body's send then fails, as it does for a held head.
    submit_head(*out, false);
    give_back(out);
    return true;
  }
  give_back(pending_head_);
  pending_head_ = std::move(out);
  head_pending_ = true;
  return true;
}

bool H2ServerStream::send_response_body(std::string_view bytes) {
  if (ended_) return false;
  if (head_pending_ && !submit_pending_head(false)) return false;
  if (!session().send_data(id_, bytes)) return false;
  response_bytes_ += bytes.size();
  conn_->write_out();
  return !ended_;
}

void H2ServerStream::send_response_trailers(const Headers& trailers) {
  if (ended_) return;
  if (head_pending_ && !submit_pending_head(false)) return;
  Headers kept;
  rewrite_trailers(trailers, kept);
  for (const Header& f : kept) response_bytes_ += f.name.size() + f.value.size() + 2;
  session().send_trailers(id_, kept);
  ended_ = true;
  conn_->write_out();
}

void H2ServerStream::send_response_end() {
  if (head_pending_) {
    submit_pending_head(true);
  } else if (!ended_) {
    session().end_stream(id_);
  }
  ended_ = true;
  conn_->write_out();
}

void H2ServerStream::flush() {
  if (head_pending_) submit_pending_head(false);
  conn_->write_out();
}

void H2ServerStream::answer(int status, const char* reason, const Headers& extra, bool head_request,
                          std::string_view hint) {
  if (ended_) return;
  if (grpc_) {
    // A gRPC caller gets gRPC: HTTP 200, Trailers-Only (one HEADERS frame
    // that ends the stream) with grpc-status for the reason.
    H2Session::Head h;
    h.status = 200;
    append_grpc_error_fields(h.fields, reason, status, extra);
    ended_ = true;
    head_pending_ = false;
    if (!session().submit_response(id_, h, true)) return;
    response_bytes_ += head_size(h);
    conn_->write_out();
    return;
  }
  std::string body(reason);
  body += '\n';
  if (!hint.empty()) {
    body.append(hint);
    body += '\n';
  }
  H2Session::Head h;
  h.status = status;
  h.fields.push_back({"content-type", "text/plain"});
  std::string length;
  append_decimal(length, body.size());
  h.fields.push_back({"content-length", std::move(length)});
  h.fields.push_back({"x-onelayer-error", reason});
  h.fields.insert(h.fields.end(), extra.begin(), extra.end());
  ended_ = true;
  head_pending_ = false;
  if (!session().submit_response(id_, h, head_request)) return;
  response_bytes_ += head_size(h);
  if (!head_request) {
    session().send_data(id_, body);
    session().end_stream(id_);
    response_bytes_ += body.size();
  }
  conn_->write_out();
}

void H2ServerStream::send_proxy_response(int status, const char* reason, const Headers& extra, bool head_request,
                                       bool /*request_complete: HTTP/2 may answer before the body ends*/) {
  answer(status, reason, extra, head_request, {});
}

void H2ServerStream::refuse(int status, const char* reason, const char* detail, const Headers& extra,
                          RouteMetrics* counted_in, std::string_view hint) {
  answer(status, reason, extra, method_ == "HEAD", hint);
  account_refusal(status, reason, detail, counted_in);
}

void H2ServerStream::note_codec_refusal(const H2Session::Head& partial) {
  method_ = partial.method;
  path_ = partial.path;
  response_bytes_ = 9 + 4 + 36;  // frame header, :status, x-onelayer-error (roughly, as head_size)
  account_refusal(431, "headers_too_large", "request header list over max_header_bytes", nullptr);
}

void H2ServerStream::account_refusal(int status, const char* reason, const char* detail, RouteMetrics* counted_in) {
  ServerListener* l = conn_->listener();
  spdlog::info("listener {}: {} {} from {} (HTTP/2 stream {}): {}", l->name(), status, reason, peer_ip(), id_,
               detail ? detail : "");
  if (!counted_in && !l->unrouted()) l->unrouted() = host()->metrics().route(l->name(), "", "");
  auto now_ms = std::chrono::duration_cast<Millis>(Clock::now().time_since_epoch()).count();
  (counted_in ? counted_in : l->unrouted())->on_response(status, 0, 0, now_ms, true);
  const GrpcStatus grpc_status = grpc_status_for_error(reason, status);
  if (grpc_) (counted_in ? counted_in : l->unrouted())->on_grpc_response(grpc_status);
  host()->metrics().bytes_out_total.fetch_add(response_bytes_, std::memory_order_relaxed);
  if (!host()->logs_access(l->name())) return;
  AccessRecord r;
  r.listener = l->name();
  if (counted_in) r.route = counted_in->route;
  r.method = method_;
  r.path = path_;
  r.status = status;
  r.error = reason;
  r.protocol = wire_protocol_name(WireProtocol::h2);
  r.stream_id = stream_id();
  r.unix_ms = std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch()).count();
  r.bytes_out = response_bytes_;
  if (grpc_) r.grpc_status = grpc_code(grpc_status);
  r.caller = caller();
  write_access_log(r);
}

size_t H2ServerStream::queued_bytes() const { return session().queued_bytes(id_); }

// One default stream window (64 KiB), either way: a client cannot take
// more than its window before it reads, nor send more than ours before we
// consume. A response from an HTTP/2 upstream never reaches the mark (its
// window is given back only as this stream frames it: reports_body_sent);
// one from an HTTP/1.1 upstream pauses there. A streaming request body is
// held there while the upstream takes it slowly.
H2ServerStream::Watermarks H2ServerStream::message_watermarks() const {
  return {kH2StreamHighWater, kH2StreamLowWater};
}

void H2ServerStream::release_request_body() {
  held_ = false;
  if (unconsumed_ == 0) return;
  session().consume(id_, unconsumed_);
  unconsumed_ = 0;
  conn_->write_out();  // the WINDOW_UPDATE
}

void H2ServerStream::exchange_done() { retire_exchange(); }

void H2ServerStream::abort_stream(const char* reason) {
  retire_exchange();
  const bool client_closed = std::strcmp(reason, "client_closed") == 0;
  // The upstream failed after its head: the client gets that head, then
  // RST_STREAM INTERNAL_ERROR, as an HTTP/1.1 client gets the head and then
  // the close. That holds for a head still held for what follows it (no
  // length, or a gRPC answer that might have been Trailers-Only) and for
  // one submitted but not yet written, which nghttp2 would drop on a reset.
  // A client that went away gets CANCEL and nothing more.
  if (!client_closed && head_pending_ && !ended_) submit_pending_head(false);
  ended_ = true;
  head_pending_ = false;
  if (client_closed) {
    session().reset_stream(id_, H2Session::kCancel);
  } else {
    session().reset_stream_after_head(id_, H2Session::kInternalError);
  }
  conn_->write_out();
}

}  // namespace onelayer
