// One client connection: read, parse, validate, route; one exchange at a
// time, pipelining, keep-alive, header and idle timeouts, refusals, drain.
// What it needs of the worker besides I/O comes through Http1ServerHost (its
// host), requests become exchanges through the host's ExchangeStarter, and
// a connection whose first bytes are the HTTP/2 preface is handed to the
// codec the host makes for it (a ClientSocketCodec), which runs on this
// connection as its ClientSocket.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "shell/http1/http1_server_host.h"
#include "shell/http1/http_parser.h"
#include "shell/stream/client_socket.h"
#include "shell/stream/client_socket_codec.h"
#include "shell/stream/downstream_stream.h"
#include "shell/stream/request_exchange.h"
#include "shell/stream/server_listener.h"

namespace onelayer {

struct TransparentConn;
struct RouteMetrics;

// The HTTP/1 codec of the client side: the exchange's DownstreamStream
// (one request at a time) writes its answer here in HTTP/1.1 framing.
class Http1ServerConnection final : public ClientSocket, public DownstreamStream, private HttpParser::Handler {
 public:
  Http1ServerConnection(Http1ServerHost* host, ServerListener* l);
  ~Http1ServerConnection() override;
  void start();

  void on_read(ssize_t nread, const uv_buf_t* buf);
  void on_write_done(int status) override;
  void on_closed() override;  // leaves the worker's list and its listener's count

  // DownstreamStream: the exchange's answer, in HTTP/1.1.
  WireProtocol protocol() const override { return WireProtocol::http1; }
  const std::string& peer_ip() const override { return peer_ip_; }
  bool over_tls() const override { return tls_ != nullptr; }
  uint64_t client_connection() const override { return client_connection_; }
  // Kept in the TLS channel: a cleartext connection pays nothing for it.
  const std::string& caller() const override;
  bool send_response_head(const MessageHead& head, const ResponseMeta& meta) override;
  bool send_response_body(std::string_view bytes) override;
  void send_response_trailers(const Headers& trailers) override;
  void send_response_end() override;
  void flush() override;
  void send_proxy_response(int status, const char* reason, const Headers& extra, bool head_request,
                           bool request_complete) override;
  size_t queued_bytes() const override { return write_queue(); }
  uint64_t response_bytes() const override;
  void hold_request_body() override { hold_reading(); }
  void release_request_body() override { release_reading(); }
  bool request_body_held() const override { return !want_read_; }
  void exchange_done() override;
  // The response is cut after its head: what of it is framed but not
  // written yet goes first, then the connection closes.
  void abort_stream(const char* reason) override;
  Http1ServerConnection* http1_connection() override { return this; }

  void abort_connection(const char* reason = "client_closed") override;
  // Closes once what is written has gone (HTTP/2: after the GOAWAY).
  void close_when_flushed() override;
  // Backpressure: the upstream cannot take the body as fast as it comes.
  void hold_reading();
  void release_reading();
  // Upgrade tunnels (after a 101): the connection's bytes go to the
  // exchange's tunnel; bytes the client sent early are handed over once.
  void enter_tunnel() { tunnel_ = true; }
  void take_pending_input(std::string& out) {
    if (pending_in_) out.swap(*pending_in_);
  }
  bool saw_eof() const { return eof_; }
  // Transparent listeners (shell/transparent/transparent_down.cc): the
  // connection's original destination (null elsewhere).
  const Destination* original_destination() const override;
  // A TLS listener's handshake end and errors (Conn::tls_pump).
  void on_tls_handshake(bool ok);
  void on_tls_error();

  // From the worker.
  void drain();
  ServerListener* listener() const { return listener_; }
  const std::string& listener_name() const override { return listener_->name(); }
  // The worker's intrusive list of its connections (`tracked` lives with
  // the connection's other flags, so idle connections pay no padding).
  struct Link {
    Http1ServerConnection* prev = nullptr;
    Http1ServerConnection* next = nullptr;
  };
  bool tracked() const { return tracked_; }
  // Closed as a Http1ServerConnection but alive as a parked socket (ParkedConnections).
  bool parked() const { return parked_; }
  // A parked socket became readable: this connection now holds it.
  void resume_after_park();
  void set_tracked(bool t) { tracked_ = t; }
  Link& worker_link() { return link_; }

 private:
  int on_head(MessageHead& head) override;
  int on_body(const char* data, size_t len) override;
  void on_trailers(Headers& trailers) override;
  int on_message_end() override;

  static void on_head_or_idle_timeout(TimerList::Entry* t);
  static void on_resume_timer(TimerList::Entry* t);
  // Idle long enough to park (ParkedConnections::kParkAfterMs).
  static void on_idle_long(TimerList::Entry* t);
  bool park(uint64_t idle_left_ms);
  void remember_peer();
  void process_input(const char* data, size_t len);
  // `extra`: raw header lines for the answer; `counted_in`: the route's
  // metrics when a route matched (else the listener's unrouted ones).
  // `hint`: a sentence for the answer's body that says what to do instead.
  void reject(int status, const char* reason, bool close_after, const char* log_detail,
              std::string_view extra = {}, RouteMetrics* counted_in = nullptr, const char* hint = nullptr);
  void arm_idle_timer();
  void arm_header_timer();
  void pause_reading();
  void resume_reading();
  // The write queue is empty and the connection is to close: closed at once,
  // or (plain TCP with input perhaps still coming) lingering first.
  void finish_close();
  void account_in(size_t n);
  void buffer_pipelined(const char* data, size_t len);
  // The connection's first bytes: the HTTP/2 preface (an H2ServerConnection takes
  // the connection over) or HTTP/1, each only where the listener's
  // `protocols` allow it; too few bytes to tell wait in pending_in_.
  void take_first_bytes(const char* data, size_t len);
  // Transparent listeners: reads the original destination and applies the
  // loop guard (-1: refused and closed; 0: not transparent; 1: detecting);
  // then the first bytes say HTTP (as take_first_bytes) or passthrough.
  int start_transparent();
  void detect_first_bytes(const char* data, size_t len);
  static void on_detect_timeout(TimerList::Entry* t);
  void start_passthrough(const char* reason);
  bool passing_through() const;
  bool detecting_protocol() const;
  void pass_through(ssize_t nread, const uv_buf_t* buf);
  void passthrough_drained();
  TransparentConn* transparent_state() const;
  HttpParser& parser();  // the lent parser, taken from the pool if none
  // The host it was made with, as what it is (no pointer of its own).
  Http1ServerHost* server_host() const { return static_cast<Http1ServerHost*>(host_); }
  bool parser_paused() const { return parser_ && parser_->error() == HttpParser::Error::paused; }
  bool in_request() const { return parser_ && parser_->in_message(); }
  // Idle (no exchange, no request begun, nothing pipelined): the parser and
  // an empty pipelining buffer go back. Never from inside the parser.
  void release_if_idle();
  // What a response that keeps the connection open must say: an HTTP/1.0
  // client is told "Connection: keep-alive", an HTTP/1.1 one nothing.
  std::string_view keep_alive_header() const {
    return http10_ && !close_after_ ? "Connection: keep-alive\r\n" : "";
  }
  // The answer being written: its body framing, a head held back for the
  // first body bytes, bytes written. Only while an exchange runs.
  struct Response;
  Response& response();

  ServerListener* listener_;  // outlives its connections (it frees itself after the last)
  // Lent by the worker's pool from a request's first bytes until the
  // connection is idle again: an idle connection holds none.
  std::unique_ptr<HttpParser> parser_;
  std::unique_ptr<std::string> pending_in_;  // bytes after a paused (pipelined) message; rare
  std::unique_ptr<RequestExchange> ex_;
  std::unique_ptr<Response> response_;
  std::unique_ptr<ClientSocketCodec> h2_;  // set once the preface said HTTP/2: every byte goes there
  std::string peer_ip_;
  Link link_;
  // One bit each: every idle connection holds these.
  bool tracked_ : 1 = false;
  bool reading_ : 1 = false;
  bool want_read_ : 1 = true;       // backpressure may turn this off
  bool close_after_ : 1 = false;    // Connection: close, HTTP/1.0 without keep-alive, drain, errors
  bool http10_ : 1 = false;         // the current request is HTTP/1.0
  bool close_pending_ : 1 = false;  // close once the write queue drains
  bool eof_ : 1 = false;
  bool in_exchange_ : 1 = false;
  bool tunnel_ : 1 = false;  // after a 101, bytes go to the exchange's tunnel
  bool protocol_known_ : 1 = false;  // the first bytes told HTTP/1 from HTTP/2
  bool parked_ : 1 = false;
  bool lingering_ : 1 = false;  // FIN sent after the last write: input discarded until EOF
  bool transparent_ : 1 = false;  // the worker holds its TransparentConn (transparent listeners)
  // In the padding after the bits (32 bits: a serial that comes round
  // again after 2^32 connections of one worker, when the idle upstream
  // connection of the first is long gone).
  const uint32_t client_connection_ = static_cast<uint32_t>(next_client_connection());
};

}  // namespace onelayer
