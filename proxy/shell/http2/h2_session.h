// One HTTP/2 connection (RFC 9113) over nghttp2, in either role: server for a
// downstream h2c connection, client for an upstream one. No I/O here: bytes
// read from the socket go in through recv(), bytes to write come out of
// flush() (appended to the caller's buffer), and time comes in as an
// argument, so the class is testable on its own and in memory.
//
// Stream events go to a Handler. Every stream the Handler has seen ends with
// exactly one on_closed() or on_reset().
//
// Memory is bounded by flow control: WINDOW_UPDATEs are not automatic. The
// connection window is given back as DATA arrives; a stream's window only
// when the owner calls consume() for bytes it has passed on, so a stream
// whose reader is slow stops at its window without stopping the others.
// Bytes held for one connection: at most max_concurrent_streams x
// stream_window_bytes of request (server) or response (client) bodies.
//
// Defences against a misbehaving peer (each limit in Limits): the
// connection gets a GOAWAY with the matching error code and want_close()
// turns true; see docs/http2.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/config/config.h"
#include "core/http/http_headers.h"
#include "shell/http2/hpack_splice.h"
#include "shell/memory/recycled_blocks.h"

struct nghttp2_session;

namespace onelayer {

class H2FieldBlock;

class H2Session {
 public:
  enum class Role { server, client };

  // RFC 9113 error codes used here (section 7).
  enum ErrorCode : uint32_t {
    kNoError = 0x0,
    kProtocolError = 0x1,
    kInternalError = 0x2,
    kFlowControlError = 0x3,
    kRefusedStream = 0x7,
    kCancel = 0x8,
    kCompressionError = 0x9,
    kEnhanceYourCalm = 0xb,
  };

  struct Limits {
    // SETTINGS_MAX_CONCURRENT_STREAMS advertised and enforced (streams the
    // peer opens above it are refused).
    uint32_t max_concurrent_streams = 100;
    // Client: streams we open at once on the connection, within the peer's
    // SETTINGS_MAX_CONCURRENT_STREAMS (and, until that arrives, within
    // max_concurrent_streams: RFC 9113 6.5.2 recommends no less than 100).
    uint32_t max_opened_streams = 100;
    // SETTINGS_MAX_HEADER_LIST_SIZE (name + value + 32 per field, RFC 9113
    // 6.5.2). A received head over it is refused: 431 (server), RST_STREAM
    // (client). The owner sets it from max_header_bytes.
    uint32_t max_header_list_bytes = 16 * 1024;
    // A head that decodes to more than this many times max_header_list_bytes
    // (an HPACK bomb) ends the connection: decoding stops.
    uint32_t header_list_hard_factor = 4;
    // Oversized heads on one connection before it gets GOAWAY.
    uint32_t max_oversized_heads = 3;
    // HPACK dynamic table: SETTINGS_HEADER_TABLE_SIZE for what we decode
    // (never advertised below 4096: nghttp2 would refuse our empty blocks,
    // hpack_splice.h invariant 8), and the most we use for encoding whatever
    // the peer allows.
    uint32_t header_table_bytes = 4096;
    uint32_t stream_window_bytes = 64 * 1024;        // SETTINGS_INITIAL_WINDOW_SIZE
    uint32_t connection_window_bytes = 1024 * 1024;  // stream 0
    uint32_t max_continuations = 8;      // CONTINUATION frames after one HEADERS
    uint32_t max_settings_entries = 32;  // per SETTINGS frame
    uint32_t max_outbound_acks = 1000;   // SETTINGS/PING ACKs queued, not yet flushed
    // Streams the peer opened that ended in a reset before a response head:
    // reset by the peer, or by us because of its protocol errors on the
    // stream. Token bucket: `rapid_reset_burst` at once, refilled at
    // `rapid_reset_per_second`. Empty bucket: GOAWAY ENHANCE_YOUR_CALM.
    uint32_t rapid_reset_burst = 100;
    uint32_t rapid_reset_per_second = 33;
    // Frames with an empty payload in a row (DATA without END_STREAM,
    // HEADERS, CONTINUATION): more than this is a GOAWAY ENHANCE_YOUR_CALM.
    uint32_t max_empty_frames = 10;
    // Frames that were stream errors (zero-increment WINDOW_UPDATE on a
    // stream, DATA on a half-closed stream, bad headers, ...): more than this
    // on one connection is a GOAWAY PROTOCOL_ERROR.
    uint32_t max_stream_errors = 20;
  };

  struct Head {
    std::string method, scheme, authority, path;  // requests
    int status = 0;                               // responses
    Headers fields;  // regular fields in order (names in lower case)
    // fields[0] is not a received field but room for the Handler's own first
    // one (what an earlier head left there): see leave_front_field().
    bool front_field = false;
  };

  // Calls into the session from these callbacks are allowed (submit,
  // send, consume, reset, drain, terminate); destroying it is not.
  class Handler {
   public:
    virtual ~Handler() = default;
    // A request head (server) or the final response head (client; 1xx heads
    // are skipped). `end_stream`: no body follows (on_end() still comes).
    // A field list left in `head.fields` when this returns (moved back after
    // use) is kept for a later head.
    // A request head over max_header_list_bytes never gets here: the
    // session answers it 431 itself.
    virtual void on_head(int32_t stream, Head& head, bool end_stream) = 0;
    // Body bytes. Call consume(stream, n) once they have been passed on.
    virtual void on_data(int32_t stream, const uint8_t* data, size_t len) = 0;
    virtual void on_trailers(int32_t stream, Headers& trailers) = 0;
    virtual void on_end(int32_t stream) = 0;  // the peer's side ended
    // The stream ended abnormally, not by the owner's reset_stream(): the
    // peer reset it, we reset it for a protocol error, it is above the
    // last-stream-id of a received GOAWAY (REFUSED_STREAM), or the
    // connection ended (its GOAWAY code, or CANCEL from close_streams()).
    virtual void on_reset(int32_t stream, uint32_t error_code) = 0;
    // Both sides ended cleanly, or the owner reset the stream.
    virtual void on_closed(int32_t stream) = 0;
    // The peer sent GOAWAY: no new streams; streams above last_stream_id
    // were not processed (they get on_reset REFUSED_STREAM).
    virtual void on_goaway(int32_t last_stream_id, uint32_t error_code) = 0;
    // Server: a request head over max_header_list_bytes that the session
    // answered 431 itself (the stream never reaches on_head). `partial`:
    // what was decoded before the limit (the pseudo-headers come first).
    virtual void on_head_refused(int32_t /*stream*/, const Head& /*partial*/) {}
  };

  struct Stats {
    uint64_t streams_opened = 0;   // by the peer
    uint64_t oversized_heads = 0;  // refused heads over max_header_list_bytes
    uint64_t early_resets = 0;     // peer's streams reset before a response head
    uint64_t stream_errors = 0;
    uint64_t malformed_messages = 0;  // streams reset for breaking RFC 9113 8.1-8.3 (H2MessageRules)
  };

  H2Session(Role role, Handler* handler);  // default Limits
  H2Session(Role role, Handler* handler, const Limits& limits);
  ~H2Session();
  H2Session(const H2Session&) = delete;
  H2Session& operator=(const H2Session&) = delete;

  // Bytes read from the connection. `now_ms`: a monotonic clock, for the
  // rate limits. Returns false when the session failed (the GOAWAY is in
  // the next flush()); some connection errors only show after that flush:
  // always flush() and check want_close().
  bool recv(const uint8_t* data, size_t len, uint64_t now_ms);
  // Appends everything there is to write to `out`; returns the byte count.
  // A connection whose socket does not drain should stop calling this (and
  // keep reading): unsent ACKs then pile up here and trip the flood limit.
  size_t flush(std::string& out);
  // True once nothing more will be read or written: close the connection
  // after writing what flush() gave.
  bool want_close() const;
  // The GOAWAY code we sent or will send, and why (for logs); kNoError and
  // "" while none.
  uint32_t goaway_code() const { return goaway_code_; }
  const std::string& close_reason() const { return close_reason_; }
  // True once, the first time it is asked after the session chose an error
  // GOAWAY (ours or nghttp2's): the connection's owner logs it then.
  bool take_error_end() {
    if (error_end_taken_ || goaway_code_ == kNoError) return false;
    error_end_taken_ = true;
    return true;
  }

  // Client: opens a stream. Returns its id, or 0 when refused: the peer's
  // SETTINGS_MAX_CONCURRENT_STREAMS is reached, a GOAWAY was sent or
  // received, or the session ended.
  int32_t submit_request(const Head& head, bool end_stream);
  // The same from views of the pseudo-header fields and a field block
  // (the upstream path: no Head of strings built first). The views are read
  // during the call only.
  struct RequestLine {
    std::string_view method, scheme, authority, path;
  };
  int32_t submit_request(const RequestLine& line, const H2FieldBlock& fields, bool end_stream);
  // The same taking the block instead of copying it (the upstream path): a
  // stream opened leaves `fields` empty, with the buffers of a head held
  // before (room to build the next one in); a refused one leaves it as it
  // was.
  int32_t submit_request(const RequestLine& line, H2FieldBlock&& fields, bool end_stream);
  bool can_submit_request() const;
  // Client: how many of our streams may be open at once: the peer's
  // SETTINGS_MAX_CONCURRENT_STREAMS (Limits::max_concurrent_streams until
  // its SETTINGS arrive), never above Limits::max_opened_streams.
  uint32_t stream_limit() const;
  // The peer's first SETTINGS frame has arrived (its limits are known).
  bool peer_settings_received() const { return peer_settings_received_; }
  // Server: the response head (status and fields of `head`).
  bool submit_response(int32_t stream, const Head& head, bool end_stream);
  // The same from a status and a field block (the proxied response: no Head
  // of strings built first). The block is read during the call only.
  bool submit_response(int32_t stream, int status, const H2FieldBlock& fields, bool end_stream);
  // The same taking the block, as submit_request() does.
  bool submit_response(int32_t stream, int status, H2FieldBlock&& fields, bool end_stream);
  // Server: an interim (1xx, not 101) response head before the final one,
  // e.g. 100 Continue (RFC 9113 8.1).
  bool submit_interim(int32_t stream, int status);
  // Body bytes after a head submitted without end_stream: queued per stream
  // and sent as the stream's and the connection's send windows allow.
  bool send_data(int32_t stream, std::string_view bytes);
  bool send_trailers(int32_t stream, const Headers& trailers);  // ends our side
  bool end_stream(int32_t stream);                              // ends our side
  size_t queued_bytes(int32_t stream) const;  // queued by send_data, not yet sent
  // Body bytes that left a stream's send_data queue for the connection's
  // output (nghttp2 framed them, within the peer's windows), counted for
  // the streams given to count_framed() and handed over by take_framed()
  // as (stream, bytes), oldest first. An owner that stands between two
  // windows (a proxied response) reopens the other one by as much: what it
  // holds for a stream is then that window, however slowly the peer reads.
  using FramedBytes = std::vector<std::pair<int32_t, size_t>>;
  void count_framed(int32_t stream);
  bool has_framed() const { return !framed_.empty(); }
  FramedBytes take_framed() { return std::exchange(framed_, {}); }
  // The owner's own pointer for a stream (its object for it), found as
  // cheaply as the session finds the stream; nullptr when none was set or
  // the stream is gone.
  void set_stream_owner(int32_t stream, void* owner);
  // Request heads (a server session) come with a field ahead of the received
  // ones (Head::front_field): the downstream puts Host there instead of
  // moving every field up by one.
  void leave_front_field() { front_field_ = true; }
  void* stream_owner(int32_t stream) const;
  // RST_STREAM; the Handler gets on_closed() for it (not on_reset()).
  bool reset_stream(int32_t stream, uint32_t error_code = kCancel);
  // The same, after the response head submitted for `stream` has gone out:
  // nghttp2 drops a head not yet framed when the stream is reset, and a
  // client should see an answer that came before the upstream failed.
  // Nothing more of the body goes once this is called.
  bool reset_stream_after_head(int32_t stream, uint32_t error_code);
  // The owner passed on n body bytes of `stream`: its window reopens.
  void consume(int32_t stream, size_t n);

  // Graceful drain: GOAWAY NO_ERROR with the last stream we took; open
  // streams finish, new ones are refused. want_close() turns true once
  // none is left.
  void drain();
  // The first of a server's two GOAWAYs (RFC 9113 6.8): GOAWAY NO_ERROR
  // with the largest stream identifier (the client opens no more streams,
  // and those already on their way are still taken) and a PING behind it.
  // The client's acknowledgement of that PING comes after whatever it sent
  // before it read the GOAWAY, so on it the session calls drain() itself:
  // the final GOAWAY names the last stream taken, and nothing the client
  // sent in good faith is refused. The owner calls drain() after a bound
  // of its own for a client that never acknowledges. False (nothing sent)
  // for a client session or once a GOAWAY has gone.
  bool announce_drain();
  // GOAWAY with an error code: the connection ends after it is written.
  void terminate(uint32_t error_code, std::string_view reason);
  // The connection is gone (EOF, read error): every open stream gets
  // on_reset(error_code).
  void close_streams(uint32_t error_code = kCancel);

  // A received request head's field list its owner is done with (the
  // fields of a request whose exchange ended): kept for a later request
  // head of a server session on this thread, unless it holds too much (then
  // left as it is).
  static void keep_field_list(Headers& fields);
  // How many request field lists this thread keeps for reuse (none once
  // its last session is gone; so are the string rooms of
  // shell/memory/spare_string_rooms.h).
  static size_t spare_field_lists();

  size_t open_streams() const { return stream_count_; }
  const Stats& stats() const { return stats_; }
  Role role() const { return role_; }

  // What a connection sent with the names sent as literals never
  // indexed (listed in h2_session.cc): how many fields of each, which
  // decides when one seeds the name into the HPACK encoder's table, and
  // the last value of each time-left field, which decides when a value
  // that repeats goes indexed after all.
  static constexpr size_t kPerMessageNames = 14;
  static constexpr size_t kTimeLeftNames = 2;  // the request timeout header, grpc-timeout
  struct PerMessageFields {
    std::array<uint32_t, kPerMessageNames> sent{};
    std::array<std::array<char, 20>, kTimeLeftNames> last_value{};
    std::array<uint8_t, kTimeLeftNames> last_size{};
    // The request timeout header's name (headers.request_timeout_ms of the
    // config; set_request_timeout_name()), in lower case.
    std::string request_timeout_name = HeaderNames{}.request_timeout_ms;
  };
  // The configured name of the request timeout header (a time-left field,
  // never indexed unless its value repeats). A connection keeps the name
  // it was given: a reload that renames the header reaches new connections.
  void set_request_timeout_name(std::string_view name);

 private:
  struct Stream;
  using HeldHead = HpackSplice::HeldHead;
  struct Callbacks;  // nghttp2's C callbacks, friends of this class
  friend struct Callbacks;
  class FramesPassed;  // what splice_ passed into nghttp2, seen to
  class StreamFields;  // the decoded fields, onto a stream

  // Inline for the last stream found: the callbacks of one frame, and the
  // owner's calls that follow them, ask for the same stream in a row. The
  // slot table of find_and_remember() does not replace it: answering every
  // find() from a slot inline cost about 550 more instructions per proxied
  // request (profile.sh --h2).
  Stream* find(int32_t id) { return id > 0 && id == last_found_id_ ? last_found_ : find_and_remember(id); }
  const Stream* find(int32_t id) const { return const_cast<H2Session*>(this)->find(id); }
  Stream* find_and_remember(int32_t id);
  Stream& add_stream(int32_t id, bool peer_opened, std::unique_ptr<Stream> st = nullptr);
  // Null when not ours. nghttp2's stream (if it still has one) no longer
  // points at ours after it.
  std::unique_ptr<Stream> remove_stream(int32_t id);
  // unopened_: where `id` is or would go.
  std::vector<std::pair<int32_t, Stream*>>::iterator unopened_at(int32_t id);
  void forget_unopened(int32_t id);  // nghttp2 opened it, or it is gone
  bool submit_head(int32_t stream, const Head& head, bool request, bool end_stream);
  // Frees the field lists, string rooms and held heads this thread keeps
  // (its last session is gone).
  static void free_thread_spares();
  void head_framed(int32_t stream);  // our head of `stream` went out (or was dropped): a held reset goes
  bool can_answer(int32_t stream) const;
  void resume(Stream& s);
  int headers_received(int32_t id, bool end_stream);  // a header block is complete
  // The received header block of `id` (nghttp2 has framed its last frame),
  // if splice_ holds one: decoded onto the stream. False when that failed
  // the session.
  bool decode_block(int32_t id);
  // One received field of `st`'s block. False when that failed the session.
  bool take_field(Stream& st, std::string_view name, std::string_view value);
  void peer_ended(int32_t id);
  // The peer's message on `id` broke a message rule: RST_STREAM
  // PROTOCOL_ERROR, counted among the stream errors. False when that
  // failed the session.
  bool refuse_malformed(int32_t id, Stream& st);
  void charge_early_reset();
  void finish_stream(int32_t id, uint32_t error_code);  // nghttp2 closed it
  void fail(uint32_t error_code, std::string_view reason);

  Role role_;
  bool front_field_ = false;  // leave_front_field()
  FramedBytes framed_;        // count_framed() streams' bytes framed since take_framed()
  Handler* handler_;
  Limits limits_;
  nghttp2_session* session_ = nullptr;
  // Every Stream, owned through a list threaded through them: found through
  // nghttp2's stream map (its user data, see find_and_remember()), so a
  // map of our own would only be kept up to date, at a hash insertion and
  // erasure per stream.
  Stream* first_stream_ = nullptr;
  size_t stream_count_ = 0;
  size_t own_streams_ = 0;  // streams we opened (client)
  // Streams we opened that nghttp2 has not opened yet (their HEADERS are
  // queued: it has no user data for them), by id, which is their order of
  // submission; entries before unopened_from_ (and null ones) are gone.
  std::vector<std::pair<int32_t, Stream*>> unopened_;
  size_t unopened_from_ = 0;
  // Everything that meets both nghttp2 and our HPACK: the heads held until
  // their frames go out, the encoder and decoder, the blocks taken out of
  // received frames.
  HpackSplice splice_;
  int32_t last_found_id_ = 0;  // find()'s memory of its last answer
  Stream* last_found_ = nullptr;
  // Streams by id, one per slot (find_and_remember()): allocated with the
  // first stream, so an idle connection has none.
  struct FoundSlot {
    int32_t id = 0;
    Stream* stream = nullptr;
  };
  static constexpr size_t kFoundSlots = 64;
  static size_t found_slot(int32_t id) { return (static_cast<uint32_t>(id) >> 1) & (kFoundSlots - 1); }
  std::unique_ptr<FoundSlot[]> found_;
  // The stream whose on_closed()/on_reset() is running: gone from streams_,
  // its owner pointer still answers stream_owner() during the call.
  struct Ending {
    Ending(H2Session& s, int32_t id, void* owner) : s_(s), id_(s.ending_id_), owner_(s.ending_owner_) {
      s.ending_id_ = id;
      s.ending_owner_ = owner;
    }
    ~Ending() {
      s_.ending_id_ = id_;
      s_.ending_owner_ = owner_;
    }
    H2Session& s_;
    int32_t id_;
    void* owner_;
  };
  int32_t ending_id_ = 0;
  void* ending_owner_ = nullptr;
  Stats stats_;
  uint64_t now_ms_ = 0;
  double reset_tokens_ = 0;
  uint64_t reset_refill_ms_ = 0;
  uint32_t empty_frames_in_a_row_ = 0;
  uint32_t goaway_code_ = kNoError;
  std::string close_reason_;
  bool goaway_sent_ = false;
  bool drain_announced_ = false;  // announce_drain() said yes
  bool drain_ping_sent_ = false;  // its PING is written: the answer to it ends the first step
  bool goaway_received_ = false;
  bool peer_settings_received_ = false;
  bool failed_ = false;       // terminate()d or a fatal error: no more events
  bool send_broken_ = false;
  bool error_goaway_written_ = false;  // nghttp2_session_mem_send failed: nothing more to write
  bool error_end_taken_ = false;       // take_error_end() said true
  int32_t last_submitted_ = 0;
  int32_t drain_last_stream_id_ = 0;
  PerMessageFields per_message_{};  // this connection's
};

}  // namespace onelayer
