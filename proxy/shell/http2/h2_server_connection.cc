// The HTTP/2 side of one client connection (h2_server_connection.h).
#include "shell/http2/h2_server_connection.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

#include "shell/http2/h2_server_stream.h"
#include "core/config/config.h"
#include "core/metrics/metrics.h"
#include "shell/io/connection_host.h"

namespace onelayer {

namespace {

// The socket's queue above which the session keeps its frames (the streams'
// queues then grow, which pauses their upstreams).
constexpr size_t kSocketHighWater = 64 * 1024;

// The preface and the frame header of the client's first SETTINGS.
constexpr size_t kPrefaceBytes = 24;
constexpr size_t kFrameHeaderBytes = 9;

// A drain's final GOAWAY goes when the client acknowledges the PING sent
// with the first, or this long after it at most (a client that never
// answers; the drain's own timeout still bounds the whole).
constexpr uint64_t kDrainNoticeMs = 1000;

H2Session::Limits limits_for(const Listener* cfg) {
  H2Session::Limits lim;
  if (cfg) {
    lim.max_concurrent_streams = cfg->limits.max_concurrent_streams;
    lim.max_header_list_bytes = static_cast<uint32_t>(
        std::min<uint64_t>(cfg->limits.max_header_bytes, std::numeric_limits<uint32_t>::max()));
  }
  return lim;
}

}  // namespace

H2ServerConnection::H2ServerConnection(ClientSocket* conn, ServerCodecHost* host, ServerListener* listener,
                                       const Listener* cfg, std::string_view request_timeout_name)
    : conn_(conn), host_(host), listener_(listener), session_(H2Session::Role::server, this, limits_for(cfg)) {
  reaper_.owner = this;
  drain_notice_.owner = this;
  session_.leave_front_field();  // for Host (translate_h2_request)
  session_.set_request_timeout_name(request_timeout_name);
  Limits lim;
  if (cfg) lim = cfg->limits;
  header_timeout_ms_ = static_cast<uint64_t>(lim.header_timeout.count());
  idle_timeout_ms_ = static_cast<uint64_t>(lim.idle_timeout.count());
  host_->metrics().downstream_h2_connections_active.fetch_add(1, std::memory_order_relaxed);
  host_->timers().arm(*this, header_timeout_ms_, on_timer);
}

H2ServerConnection::~H2ServerConnection() {
  host_->forget_write(this);
  host_->metrics().downstream_h2_connections_active.fetch_sub(1, std::memory_order_relaxed);
  // Streams before the session (a stream still holding an exchange aborts
  // it; nothing of that reaches the session).
  while (H2ServerStream* s = first_stream_) {
    first_stream_ = s->next_open_;
    delete s;
  }
  stream_count_ = 0;
  buried_.clear();
  reaping_.clear();
}

H2ServerStream* H2ServerConnection::find(int32_t id) { return static_cast<H2ServerStream*>(session_.stream_owner(id)); }

void H2ServerConnection::on_input(const char* data, size_t len) {
  if (lost_) return;
  if (!settings_seen_) note_settings(data, len);
  // What this input makes the session and the upstreams write leaves after
  // the poll, in one write per connection (write_deferred()).
  host_->enter_read();
  in_recv_ = true;
  bool ok = session_.recv(reinterpret_cast<const uint8_t*>(data), len, uv_now(host_->loop()));
  in_recv_ = false;
  if (!ok) log_error_end();
  write_out();
  host_->leave_read();
}

void H2ServerConnection::write_deferred() {
  write_out();
  // WINDOW_UPDATEs read, or the frames just written, may let queued DATA go.
  wake_waiting_streams();
}

// header_timeout runs until the client's first SETTINGS frame is complete:
// the preface, a 9-byte frame header (its length in the first 3 bytes),
// that many bytes of payload.
void H2ServerConnection::note_settings(const char* data, size_t len) {
  const uint64_t before = bytes_seen_;
  bytes_seen_ += len;
  for (size_t i = 0; i < len; ++i) {
    uint64_t at = before + i;
    if (at >= kPrefaceBytes + 3) break;
    if (at >= kPrefaceBytes) first_frame_length_ = (first_frame_length_ << 8) | static_cast<uint8_t>(data[i]);
  }
  if (bytes_seen_ < kPrefaceBytes + kFrameHeaderBytes + first_frame_length_) return;
  settings_seen_ = true;
  arm_idle_timer();
}

void H2ServerConnection::write_out() {
  if (lost_ || conn_->closing()) return;
  if (host_->defer_write(this)) return;
  if (in_recv_ || writing_) {
    write_wanted_ = true;
    return;
  }
  writing_ = true;
  do {
    write_wanted_ = false;
    if (conn_->write_queue() > kSocketHighWater) break;  // on_write_done() goes on
    out_.clear();
    session_.flush(out_);
    if (out_.empty()) continue;
    if (host_->write(conn_, out_) < 0) {
      writing_ = false;
      conn_->abort_connection("client_closed");
      return;
    }
  } while (write_wanted_ && !lost_);
  writing_ = false;
  report_body_sent();
  close_if_done();
}

// Outside the flush (nghttp2 is not in a callback of this session) and
// taken whole: a stream's exchange gives its upstream window back, which
// may write to the upstream and, through it, come back here.
void H2ServerConnection::report_body_sent() {
  if (!session_.has_framed()) return;
  for (auto [id, n] : session_.take_framed())
    if (H2ServerStream* s = find(id)) s->on_body_sent(n);
}

// Once per connection that ends in an error GOAWAY: ours (found while
// reading) or nghttp2's own (a protocol error it finds, known once its
// GOAWAY is written).
void H2ServerConnection::log_error_end() {
  if (!session_.take_error_end()) return;
  spdlog::info("listener {}: HTTP/2 connection from {} ended: GOAWAY code {} ({})", conn_->listener_name(),
               conn_->peer_ip(), session_.goaway_code(), session_.close_reason());
}

void H2ServerConnection::close_if_done() {
  log_error_end();
  if (lost_ || !session_.want_close()) return;
  lost_ = true;
  host_->timers().disarm(*this);
  conn_->close_when_flushed();
}

void H2ServerConnection::on_write_done() {
  write_out();
  wake_waiting_streams();
}

void H2ServerConnection::wake_waiting_streams() {
  if (lost_ || drain_waiters_.empty()) return;
  // Taken whole: a woken exchange may end its stream, or ask again.
  std::vector<int32_t> ids;
  ids.swap(drain_waiters_);
  for (int32_t id : ids)
    if (H2ServerStream* s = find(id)) s->on_drained();
}

void H2ServerConnection::on_connection_lost(const char* reason) {
  if (lost_ && stream_count_ == 0) return;
  lost_ = true;
  host_->timers().disarm(*this);
  lost_reason_ = reason;
  session_.close_streams(H2Session::kCancel);
}

void H2ServerConnection::drain() {
  if (lost_) return;
  // Before the client's SETTINGS it has sent no stream to protect.
  if (settings_seen_ && session_.announce_drain())
    host_->timers().arm(drain_notice_, kDrainNoticeMs, on_drain_notice_timer);
  else
    session_.drain();
  write_out();
}

void H2ServerConnection::on_drain_notice_timer(TimerList::Entry* e) {
  H2ServerConnection* self = static_cast<DrainNotice*>(e)->owner;
  if (self->lost_) return;
  self->session_.drain();  // nothing when the PING's answer already did it
  self->write_out();
}

void H2ServerConnection::arm_idle_timer() {
  if (lost_ || !settings_seen_ || stream_count_ != 0) return;
  host_->timers().arm(*this, idle_timeout_ms_, on_timer);
}

void H2ServerConnection::on_timer(TimerList::Entry* e) {
  auto* self = static_cast<H2ServerConnection*>(e);
  if (self->lost_) return;
  if (self->settings_seen_ && self->stream_count_ != 0) return;  // a stream came: not idle
  spdlog::info("listener {}: HTTP/2 connection from {} {}, closed", self->conn_->listener_name(), self->conn_->peer_ip(),
               self->settings_seen_ ? "idle" : "sent no SETTINGS in header_timeout");
  self->session_.drain();
  self->write_out();
  if (!self->lost_) {  // the GOAWAY is queued: close behind it whatever the session says
    self->lost_ = true;
    self->session_.close_streams(H2Session::kCancel);
    self->conn_->close_when_flushed();
  }
}

void H2ServerConnection::bury(int32_t id) {
  H2ServerStream* s = find(id);
  if (!s) return;
  session_.set_stream_owner(id, nullptr);
  if (s->prev_open_) s->prev_open_->next_open_ = s->next_open_;
  else first_stream_ = s->next_open_;
  if (s->next_open_) s->next_open_->prev_open_ = s->prev_open_;
  s->prev_open_ = s->next_open_ = nullptr;
  --stream_count_;
  buried_.emplace_back(s);
  host_->timers().arm(reaper_, 0, on_reap);
  arm_idle_timer();
}

void H2ServerConnection::on_reap(TimerList::Entry* e) {
  H2ServerConnection* self = static_cast<Reaper*>(e)->owner;
  // Freed from a list of their own (a stream's end may bury another); both
  // lists keep their room for the next ones.
  self->reaping_.swap(self->buried_);
  self->reaping_.clear();
}

// ---- H2Session::Handler

void H2ServerConnection::on_head(int32_t stream, H2Session::Head& head, bool end_stream) {
  host_->timers().disarm(*this);  // not idle while a stream is open
  auto* raw = new H2ServerStream(this, stream);
  raw->next_open_ = first_stream_;
  if (first_stream_) first_stream_->prev_open_ = raw;
  first_stream_ = raw;
  ++stream_count_;
  session_.set_stream_owner(stream, raw);
  session_.count_framed(stream);  // for report_body_sent()
  raw->on_head(head, end_stream);
}

void H2ServerConnection::on_data(int32_t stream, const uint8_t* data, size_t len) {
  if (H2ServerStream* s = find(stream)) {
    s->on_data(data, len);
  } else {
    session_.consume(stream, len);
  }
}

void H2ServerConnection::on_trailers(int32_t stream, Headers& trailers) {
  if (H2ServerStream* s = find(stream)) s->on_trailers(trailers);
}

void H2ServerConnection::on_end(int32_t stream) {
  if (H2ServerStream* s = find(stream)) s->on_end();
}

void H2ServerConnection::on_reset(int32_t stream, uint32_t) {
  if (H2ServerStream* s = find(stream)) s->on_gone(lost_ ? lost_reason_ : "client_reset");
  bury(stream);
}

void H2ServerConnection::on_closed(int32_t stream) {
  // Both sides ended (an exchange that ended our side is just finishing),
  // or we reset it (its exchange has ended already).
  bury(stream);
}

// The session answered 431 itself: counted and logged like the other
// refusals, by a stream object that lives for this call only.
void H2ServerConnection::on_head_refused(int32_t stream, const H2Session::Head& partial) {
  H2ServerStream(this, stream).note_codec_refusal(partial);
}

void H2ServerConnection::on_goaway(int32_t, uint32_t error_code) {
  if (error_code != H2Session::kNoError) {
    spdlog::info("listener {}: HTTP/2 client {} sent GOAWAY code {}", conn_->listener_name(), conn_->peer_ip(),
                 error_code);
  }
}

}  // namespace onelayer
