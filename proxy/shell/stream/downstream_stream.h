// What an exchange needs of the client side of its request, whatever the
// protocol: an HTTP/1.1 connection (Http1ServerConnection, one request at a time) or one
// stream of an HTTP/2 connection (H2ServerConnection). The exchange says what the
// answer is; the codec behind this interface says how it looks on the wire
// (HTTP/1 framing and Connection handling, or HEADERS/DATA frames).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/http/http_headers.h"

namespace onelayer {

class Http1ServerConnection;
struct MessageHead;

enum class WireProtocol : uint8_t { http1, h2 };
// "http1" / "h2": the `protocol` label of metrics and the access log.
inline const char* wire_protocol_name(WireProtocol p) { return p == WireProtocol::h2 ? "h2" : "http1"; }

class DownstreamStream {
 public:
  virtual ~DownstreamStream() = default;

  virtual WireProtocol protocol() const = 0;
  virtual const std::string& peer_ip() const = 0;
  virtual bool over_tls() const = 0;
  // The client's verified identity (docs/tls.md "Callers"): from the
  // certificate it presented to a listener with client_ca_file; "" none.
  virtual const std::string& caller() const {
    static const std::string none;
    return none;
  }
  // The HTTP/2 stream id (0 on HTTP/1), for the access log.
  virtual uint32_t stream_id() const { return 0; }
  // Which client connection this is, unique on this thread (0: unknown):
  // `reuse: safe` hands an idle upstream connection only to later requests
  // of the client connection it served.
  virtual uint64_t client_connection() const { return 0; }
  // A serial for a new client connection (per thread, never 0).
  static uint64_t next_client_connection() {
    static thread_local uint32_t last = 0;
    if (++last == 0) ++last;
    return last;
  }

  // What goes with a proxied response head besides the upstream's fields.
  struct ResponseMeta {
    bool no_body = false;        // HEAD, 204, 304: no body whatever the head says
    bool head_request = false;   // the request was HEAD (a length is kept)
    std::string_view via;        // the Via member to append ("": none)
    const Headers* extra = nullptr;  // fields onelayer adds (x-retry-exhausted)
  };
  // The upstream's response head. The codec drops hop-by-hop and framing
  // fields, appends Via and `meta.extra`, and chooses the body framing.
  // It may hold the head back until the first body bytes or flush().
  // False: this response cannot reach this client (the exchange gives up
  // on it as a bad upstream response); nothing was written.
  virtual bool send_response_head(const MessageHead& head, const ResponseMeta& meta) = 0;
  // Body bytes; false when the client is gone (the stream is aborted).
  virtual bool send_response_body(std::string_view bytes) = 0;
  // The upstream's trailers, then the end: where the protocol cannot carry
  // trailers (HTTP/1 without chunked) they are dropped.
  virtual void send_response_trailers(const Headers& trailers) = 0;
  virtual void send_response_end() = 0;
  // A head held back for body bytes goes out now.
  virtual void flush() = 0;
  // onelayer's own answer (errors, refusals): `extra` fields besides the
  // standard ones; `request_complete`: the request was read whole (if not,
  // HTTP/1 closes the connection after the answer).
  virtual void send_proxy_response(int status, const char* reason, const Headers& extra, bool head_request,
                                   bool request_complete) = 0;
  // Response bytes written but not yet taken by the client (backpressure).
  virtual size_t queued_bytes() const = 0;
  // What one message may queue on its way through, either way. A
  // response: above high water queued here the exchange pauses its
  // upstream until the queue is below low water. A request body that
  // streams: above high water queued towards the upstream the exchange
  // holds this client's side (hold_request_body) until that queue is below
  // low water. One HTTP/1.1 connection carries one message each way at a
  // time; an HTTP/2 connection carries up to max_concurrent_streams, each
  // with its own queues, so its streams keep less each (a client that
  // reads none of its responses, or uploads to an upstream that reads
  // slowly, would otherwise hold that many times as much).
  struct Watermarks {
    size_t high, low;
  };
  static constexpr Watermarks kMessageWatermarks{256 * 1024, 64 * 1024};
  virtual Watermarks message_watermarks() const { return kMessageWatermarks; }
  // The exchange paused its upstream for this stream's queue: it wants
  // on_down_drained() once the client has taken bytes. HTTP/1 calls that on
  // every completed write anyway; HTTP/2 calls it only for the streams
  // that asked, so a write does not visit every stream of the connection.
  virtual void notify_when_drained() {}
  // Whether the exchange hears on_down_body_sent(n) as the response body
  // bytes it queued leave the queue (HTTP/2: framed within the client's
  // windows). Then an HTTP/2 upstream's window is given back only as the
  // client takes the body, and a stream whose client reads nothing holds
  // no more than that window. HTTP/1.1 writes at once: the watermarks
  // alone bound its queue.
  virtual bool reports_body_sent() const { return false; }
  // Bytes of this exchange's answer written so far, framing included (the
  // access log's bytes_out).
  virtual uint64_t response_bytes() const = 0;

  // Backpressure on the request body: the upstream cannot take it as fast.
  virtual void hold_request_body() = 0;
  virtual void release_request_body() = 0;
  virtual bool request_body_held() const = 0;

  // The exchange is over (its answer is complete): the owner retires it on
  // the next loop turn, never from inside this call.
  virtual void exchange_done() = 0;
  // The answer was cut short or the client must not wait: HTTP/1 closes the
  // connection, HTTP/2 resets the stream. The exchange has ended already.
  virtual void abort_stream(const char* reason) = 0;

  // The HTTP/1 connection behind this stream (upgrade tunnels), else null.
  virtual Http1ServerConnection* http1_connection() { return nullptr; }
};

}  // namespace onelayer
