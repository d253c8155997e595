// One HTTP/2 connection to one address of an upstream endpoint, cleartext
// with prior knowledge (h2c) or over TLS with ALPN h2 (h2): it carries many
// attempts at once, one stream each (H2ClientStream), within the peer's
// SETTINGS_MAX_CONCURRENT_STREAMS. The
// worker keeps an endpoint's h2 connections in EndpointPool::h2; an
// attempt takes a connection with a free stream slot or opens another.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/clock.h"
#include "shell/io/conn.h"
#include "shell/io/deferred_writer.h"
#include "shell/http2/h2_session.h"
#include "shell/tls/tls_client_context.h"
#include "shell/stream/upstream_handover.h"
#include "shell/stream/upstream_stream.h"

namespace onelayer {

class H2ClientStream;
struct H2Request;
class EndpointPool;

class H2ClientConnection final : public Conn, private H2Session::Handler, private DeferredWriter {
 public:
  // `addr_index`: the endpoint address to connect to (the balancer's pick),
  // -1 for the endpoint's sticky one.
  // `tls`: the context to handshake with (null: cleartext, h2c).
  // `fresh`: a new TCP connection (counted in upstream_connections_total);
  // false for one taken over from an `auto` upstream's HTTP/1.1 connection,
  // counted already. `handover`: where it goes when an `auto` upstream's
  // handshake chooses http/1.1.
  H2ClientConnection(ConnectionHost* w, EndpointPool* ep, int addr_index, std::shared_ptr<TlsClientContext> tls,
                     UpstreamHandover* handover, std::string_view request_timeout_name, bool fresh = true);
  ~H2ClientConnection() override;

  // An `auto` upstream's connection whose handshake chose h2: its socket
  // `s` (the descriptor now this connection's, and the established TLS
  // channel) carries on as HTTP/2. The peer's SETTINGS must come within
  // `time_left` of the connect timeout (`s.connect_timeout`, as configured,
  // is what streams report). start_taken_over(), once the first stream is
  // attached, sends the preface and reads `early` (the plaintext that came
  // before the switch) ahead of what the channel holds.
  static H2ClientConnection* take_over(UpstreamHandover::Socket s, Millis time_left, UpstreamHandover* handover,
                                       std::string_view request_timeout_name);
  void start_taken_over(const std::string& early);
  // A stream on this connection for an attempt (`head_request`: the
  // response has no body).
  UpstreamStream* new_stream(UpstreamStream::Receiver* r, bool head_request);

  // Starts connecting (after a DNS lookup when the endpoint needs one).
  // Failures are reported to the streams on a later loop turn, never from
  // inside this call.
  void connect(Millis timeout);
  // The endpoint's lookup ended (EndpointPool::refresh_addresses): a connection
  // waiting for it connects now, or fails.
  void on_addresses_resolved(int status);

  // The connection a new stream to `ep`'s address `addr` rides: a
  // connected one with a free slot, else a connecting one, else a new one.
  // Connections made with another TLS context (before a reload) are not
  // used for new streams. `follows_refusal`: the stream re-sends a request
  // the peer refused, and only a connection opened since the endpoint's
  // latest refusal will do.
  // A new one is made with `handover`, never indexing `r`'s
  // request-timeout header.
  static H2ClientConnection* for_new_stream(ConnectionHost* w, EndpointPool* ep, int addr,
                                  const std::shared_ptr<TlsClientContext>& tls, Millis connect_timeout,
                                  UpstreamHandover* handover, const UpstreamStream::Receiver& r,
                                  bool follows_refusal = false);

  // One more stream fits: not closing, no GOAWAY or refused stream, fewer
  // streams than the peer allows at once.
  bool has_free_slot() const;
  // Streams may still come here, to wait for a slot when it has none: not
  // closing, no GOAWAY or refused stream.
  bool takes_streams() const;
  // Made for `addr` (-1: any address of the endpoint will do).
  bool serves_address(int addr) const;
  // Streams may be opened: TCP is up and the peer's SETTINGS came.
  bool connected() const { return connected_; }
  bool over_tls() const { return tls_ctx_ != nullptr; }
  Millis connect_timeout() const { return connect_timeout_; }
  size_t stream_count() const { return streams_.size(); }

  // H2ClientStream's side. attach: the stream rides this connection from now.
  void attach(H2ClientStream* s);
  // The stream is done with this connection (released or cancelled); the
  // connection stays pooled while the peer takes streams, and closes after
  // the endpoint's idle_timeout without any.
  void detach(H2ClientStream* s);
  // Opens s's HTTP/2 stream with `head`. Returns its id; 0 when no stream
  // slot is free now: `s` is queued and open_queued() comes once one frees
  // (or on_refused() when the connection cannot open it any more). An
  // opened stream takes the request's fields (the session holds them until
  // the HEADERS are written), leaving them empty; a queued one leaves them.
  int32_t open_stream(H2ClientStream* s, H2Request& request, bool end_stream);
  H2Session& session() { return session_; }
  // The session's output goes to the socket (after the read when called
  // from inside one, so one read's answers leave together).
  void flush();

  void on_read(ssize_t nread, const uv_buf_t* buf);
  void on_write_done(int status) override;
  // Conn::on_readable's TLS path (h2): the handshake's end (ALPN must be
  // h2), and a TLS error after it.
  void on_tls_handshake(bool ok);
  void on_tls_error() { lose(UV_EPROTO); }
  // The worker stops: closes now (streams still on it hear on_up_error).
  void close_for_shutdown() { lose(UV_ECANCELED); }

 private:
  void write_deferred() override;
  void read_input(const char* data, size_t len);
  void start_connect();
  void on_tcp_connected();
  void become_ready();
  void hand_over_to_http1();
  // The TLS handshake failed: every stream hears why.
  void fail_tls(const std::string& why, bool verify);
  // The connection failed before it was usable: every stream hears it.
  void fail_connect(int err, bool dns);
  // The connection is gone (EOF, read or write error): streams whose
  // request went out hear on_up_error(err), the others are refused.
  void lose(int err);
  void close_now();
  void arm_idle();
  void open_queued();
  void refuse_queued();
  // The peer refused a stream or sent GOAWAY: no new streams here, and the
  // endpoint's refusal mark moves past every connection opened so far.
  void stop_new_streams();
  void notify_drained();
  H2ClientStream* find(int32_t id) const;
  bool attached(const H2ClientStream* s) const;
  std::vector<H2ClientStream*> take_streams();

  // H2Session::Handler.
  void on_head(int32_t stream, H2Session::Head& head, bool end_stream) override;
  void on_data(int32_t stream, const uint8_t* data, size_t len) override;
  void on_trailers(int32_t stream, Headers& trailers) override;
  void on_end(int32_t stream) override;
  void on_reset(int32_t stream, uint32_t error_code) override;
  void on_closed(int32_t stream) override;
  void on_goaway(int32_t last_stream_id, uint32_t error_code) override;

  EndpointPool* ep_;
  std::shared_ptr<TlsClientContext> tls_ctx_;  // null: h2c
  UpstreamHandover* handover_;                 // to HTTP/1.1 when the handshake chose http/1.1
  H2Session session_;
  uint64_t serial_;  // the endpoint's HTTP/2 connections opened, this one included
  std::vector<H2ClientStream*> streams_;  // attached, in the order they came (by attach_seq)
  uint64_t next_attach_seq_ = 0;
  uint64_t detaches_ = 0;             // streams that left so far
  std::vector<H2ClientStream*> queued_;   // waiting for a stream slot
  std::vector<H2ClientStream*> touched_;  // had events in the current read, once each
  void touch(H2ClientStream* s);
  std::string out_;                   // the session's output, reused
  uv_connect_t connect_req_;
  Millis connect_timeout_{1000};
  Millis settings_wait_{0};  // taken over: what is left of the connect timeout
  int addr_index_ = -1;  // the balancer's pick, -1: the sticky address
  int addr_used_ = -1;   // the address it connected to
  int pending_error_ = 0;  // a connect failure reported on the next turn
  bool pending_dns_ = false;
  bool waiting_dns_ = false;
  bool tcp_up_ = false;     // TCP connected: the session's bytes may go
  bool connected_ = false;  // and the peer's SETTINGS came: streams may open
  bool reading_ = false;
  bool in_read_ = false;
  // Inside flush(): nghttp2's callbacks of that flush can end an attempt
  // whose stream leaving asks for a flush again; that one only asks
  // (flush_again_), the running one goes on.
  bool in_flush_ = false;
  bool flush_again_ = false;
  bool idle_after_flush_ = false;  // arm_idle() was called inside flush()
  bool no_new_streams_ = false;  // the peer sent GOAWAY or refused a stream
  bool spent_ = false;           // carried pool.max_requests_per_connection streams
  bool close_when_flushed_ = false;
  bool counted_ = true;           // in the upstream connection gauge
};

// A stream for one attempt on an HTTP/2 connection to `ep`'s address `addr`
// (-1: any): one with a free stream slot, else a new connection (streams on
// a connecting one get on_connected, on_connect_failed or on_tls_failed
// later). `tls`: the context for h2 (null: h2c). `head_request`: the
// response has no body. A new connection is made with `handover`.
UpstreamStream* open_h2_upstream_stream(ConnectionHost* w, EndpointPool* ep, int addr,
                                        const std::shared_ptr<TlsClientContext>& tls,
                                        UpstreamStream::Receiver* r, bool head_request, Millis connect_timeout,
                                        UpstreamHandover* handover);

}  // namespace onelayer
