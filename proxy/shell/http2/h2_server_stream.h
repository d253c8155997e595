// One stream of an HTTP/2 client connection: the DownstreamStream of one
// request. It turns the stream's head into a MessageHead, hands it to the
// host's ExchangeStarter (refused, or an exchange), runs the exchange, feeds it the request body (the stream's
// flow-control window reopens only for bytes the exchange took, so a slow
// upstream stalls this stream alone) and writes the exchange's answer as
// HEADERS/DATA frames through the connection's H2Session.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "shell/memory/recycled_blocks.h"
#include "shell/stream/downstream_stream.h"
#include "shell/stream/request_exchange.h"
#include "shell/stream/server_codec_host.h"
#include "shell/http2/h2_request_head.h"
#include "shell/http2/h2_session.h"

namespace onelayer {

class H2ServerConnection;

class H2ServerStream final : public DownstreamStream {
 public:
  ONELAYER_RECYCLED_BLOCKS(H2ServerStream)
  H2ServerStream(H2ServerConnection* conn, int32_t id);
  ~H2ServerStream() override;
  H2ServerStream(const H2ServerStream&) = delete;
  H2ServerStream& operator=(const H2ServerStream&) = delete;

  // The session's events for this stream (H2ServerConnection passes them on).
  void on_head(H2Session::Head& head, bool end_stream);
  void on_data(const uint8_t* data, size_t len);
  void on_trailers(Headers& trailers);  // the request's trailing HEADERS
  void on_end();
  // The stream ended before its answer did: the client reset it, or the
  // connection went away. A running exchange is aborted with `reason`.
  void on_gone(const char* reason);
  // The connection wrote bytes: an exchange that paused its upstream for
  // this stream's queue (and asked by notify_when_drained) may resume it.
  void on_drained();
  // `n` bytes of the response body left the stream's queue (framed).
  void on_body_sent(size_t n);
  // The session answered this stream's head 431 itself (over
  // max_header_bytes; `partial`: what it decoded): counted and logged.
  void note_codec_refusal(const H2Session::Head& partial);

  // DownstreamStream.
  WireProtocol protocol() const override { return WireProtocol::h2; }
  const std::string& peer_ip() const override;
  const std::string& caller() const override;
  bool over_tls() const override;
  uint32_t stream_id() const override { return static_cast<uint32_t>(id_); }
  uint64_t client_connection() const override;
  bool send_response_head(const MessageHead& head, const ResponseMeta& meta) override;
  bool send_response_body(std::string_view bytes) override;
  void send_response_trailers(const Headers& trailers) override;
  void send_response_end() override;
  void flush() override;
  void send_proxy_response(int status, const char* reason, const Headers& extra, bool head_request,
                           bool request_complete) override;
  size_t queued_bytes() const override;
  Watermarks message_watermarks() const override;
  void notify_when_drained() override;
  bool reports_body_sent() const override { return true; }
  uint64_t response_bytes() const override { return response_bytes_; }
  void hold_request_body() override { held_ = true; }
  void release_request_body() override;
  bool request_body_held() const override { return held_; }
  void exchange_done() override;
  void abort_stream(const char* reason) override;

 private:
  // onelayer's own answer: status, text/plain, x-onelayer-error, a body of
  // the reason (and `hint`) unless `head_request`.
  void answer(int status, const char* reason, const Headers& extra, bool head_request, std::string_view hint);
  // A refusal before any exchange: answered, counted and logged here.
  void refuse(int status, const char* reason, const char* detail, const Headers& extra,
              struct RouteMetrics* counted_in, std::string_view hint);
  // Counts and logs a refusal answered already (unrouted unless `counted_in`).
  void account_refusal(int status, const char* reason, const char* detail, struct RouteMetrics* counted_in);
  void retire_exchange();
  // Submits a head held back for body bytes (`end`: nothing follows it).
  bool submit_pending_head(bool end);
  // The session takes the head's fields (left empty).
  bool submit_head(H2Response& head, bool end);
  H2Session& session() const;
  ServerCodecHost* host() const;

  friend class H2ServerConnection;  // its list of open streams
  H2ServerStream* prev_open_ = nullptr;
  H2ServerStream* next_open_ = nullptr;

  H2ServerConnection* conn_;
  int32_t id_;
  std::unique_ptr<RequestExchange> ex_;
  std::unique_ptr<H2Response> pending_head_;  // a response head held back (send_response_head)
  std::string method_, path_;   // for the access line of a refusal
  uint64_t response_bytes_ = 0;  // head estimate and DATA payload given to the session
  size_t unconsumed_ = 0;       // request bytes taken while held: their window reopens on release
  bool held_ = false;
  bool drain_notice_wanted_ = false;  // on the connection's list of streams to wake
  bool head_seen_ = false;
  bool head_pending_ = false;     // pending_head_ waits for body bytes, the end or flush()
  bool ended_ = false;            // our side is ended (or reset)
  bool grpc_ = false;             // a gRPC call: onelayer's own answers are gRPC (docs/grpc.md)
};

}  // namespace onelayer
