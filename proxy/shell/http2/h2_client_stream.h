// One attempt's stream on a multiplexed HTTP/2 upstream connection
// (H2ClientConnection): the request translated to HTTP/2 (pseudo-header fields,
// connection-specific fields dropped), the response translated back to the
// exchange's MessageHead, and flow control per stream: response bytes are
// consumed (the peer's window reopens) only as the exchange takes them, so
// a paused stream stops at its window while the connection's other streams
// go on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/http/http_headers.h"
#include "shell/memory/recycled_blocks.h"
#include "shell/http2/h2_field_block.h"
#include "shell/http2/h2_session.h"
#include "shell/stream/upstream_stream.h"

namespace onelayer {

class H2ClientConnection;

// The HTTP/2 request head for an attempt: :method, :scheme (`scheme`:
// http on h2c, https on h2), :path,
// :authority from Host (the default host when there is none), the fields
// core rewrite_request_headers keeps (H2Session drops the
// connection-specific ones), content-length when the request has one,
// te: trailers when asked for.
struct H2Request {
  std::string method, scheme, authority, path;
  H2FieldBlock fields;
  H2Session::RequestLine line() const { return {method, scheme, authority, path}; }
};
H2Request h2_request(const OutgoingRequest& req, std::string_view scheme);
// The same into `out` (cleared first), whose buffers are reused.
void h2_request(const OutgoingRequest& req, std::string_view scheme, H2Request& out);

class H2ClientStream final : public UpstreamStream {
 public:
  ONELAYER_RECYCLED_BLOCKS(H2ClientStream)
  H2ClientStream(H2ClientConnection* conn, Receiver* r, bool head_request);

  // UpstreamStream.
  bool ready() const override;
  bool closing() const override;
  Millis connect_timeout() const override { return connect_timeout_; }
  int send_request(const OutgoingRequest& req) override;
  void send_request_body(std::string_view bytes) override;
  void send_request_end() override;
  void send_request_trailers(const Headers& trailers) override;
  size_t queued_bytes() const override;
  void pause_response() override;
  void resume_response() override;
  void response_body_sent(size_t n) override;
  void release(bool reusable) override;
  void cancel(bool reset = false) override;
  // The first stream of a connection taken over from HTTP/1.1: it starts.
  void start_taken_over(const std::string& early) override;

  // From the connection.
  int32_t id() const { return id_; }
  // Its place in its connection's list: the connection numbers the streams
  // it takes in order, so the list is sorted by this number.
  uint64_t attach_seq() const { return attach_seq_; }
  void set_attach_seq(uint64_t seq) { attach_seq_ = seq; }
  // Its entry in the connection's list of streams with events in the
  // current read (kNotTouched: none).
  static constexpr size_t kNotTouched = SIZE_MAX;
  size_t touched_slot() const { return touched_slot_; }
  void set_touched_slot(size_t slot) { touched_slot_ = slot; }
  bool sent() const { return sent_; }
  void mark_sent() { sent_ = sent_ || id_ != 0; }
  // Before it was connected: another connection carries it (this one's
  // peer allows fewer streams).
  void move_to(H2ClientConnection* conn) { conn_ = conn; }
  // Before it sent anything, its connection turned out HTTP/1.1 (an `auto`
  // server chose http/1.1): the attempt goes on as `next` (made for
  // receiver() and head_request()), and this stream is gone.
  void move_attempt_to(UpstreamStream* next);
  Receiver* receiver() const { return r_; }
  bool head_request() const { return head_request_; }
  // A connection telling several of its streams at once (they left it
  // together: the connection failed or was lost) holds each until all
  // were told: telling one may end the exchange of another (the answer
  // to its client fails, and that client connection's other exchanges
  // end), which releases that stream meanwhile. unhold() frees it then.
  void hold() { ++busy_; }
  void unhold();
  bool released() const { return released_; }
  void on_connected();
  void on_connect_failed(int err, bool dns);
  void on_tls_failed(const std::string& why, bool verify);
  void on_head(H2Session::Head& head, bool end_stream);
  void on_data(const uint8_t* data, size_t len);
  void on_trailers(Headers& trailers);
  void on_end();
  void on_reset(uint32_t error_code);
  void on_closed();
  // The connection went away (err: the libuv error). The stream stays
  // until the exchange releases it.
  void on_lost(int err);
  // Never opened on the wire (a GOAWAY came first): safe to try elsewhere.
  void on_refused();
  void on_read_done();
  // A stream slot freed on the connection: the queued request opens now.
  void open_queued();
  // Request bytes left the session's queue: the exchange may send more.
  void on_drained();

 private:
  // Runs a Receiver callback; false when the stream was released or
  // cancelled inside it (it is freed then).
  template <class F>
  bool call(F&& f);
  void finish_with_conn();  // detaches from the connection, resets a live stream
  void gone();
  void deliver_held();
  // Reopens the window for `n` response bytes the receiver has taken,
  // unless it gives the window back itself (reopens_response_window).
  void consume_taken(size_t n);
  // Ends our side of the open stream: the trailing HEADERS, or END_STREAM.
  void end_request(const Headers& trailers);
  bool stream_open() const { return id_ != 0 && !finished_; }

  H2ClientConnection* conn_;
  Receiver* r_;
  Millis connect_timeout_;
  int32_t id_ = 0;
  uint64_t attach_seq_ = 0;
  size_t touched_slot_ = kNotTouched;
  // A request waiting for a stream slot (H2ClientConnection::open_stream said 0).
  std::optional<H2Request> queued_head_;
  std::string queued_body_;
  bool queued_end_ = false;
  Headers queued_trailers_;  // with queued_end_: the trailing HEADERS
  // Response bytes that arrived while paused: not consumed (the peer's
  // window for this stream stays closed by as much), handed on at resume.
  std::string held_;
  std::optional<Headers> held_trailers_;
  bool held_end_ = false;
  size_t last_queued_ = 0;  // request bytes queued when last looked
  int busy_ = 0;            // Receiver callbacks running
  bool head_request_;
  bool released_ = false;
  bool sent_ = false;        // its HEADERS went to the socket
  bool local_ended_ = false;
  bool peer_ended_ = false;
  bool finished_ = false;    // the HTTP/2 stream is closed
  bool head_seen_ = false;
  bool discard_body_ = false;
  bool paused_ = false;
  bool stopped_ = false;     // the exchange refused more (on_up_body -1, bad head)
};

}  // namespace onelayer
