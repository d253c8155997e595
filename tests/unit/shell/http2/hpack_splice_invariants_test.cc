// The nghttp2 behaviours HpackSplice relies on (the numbered invariants at
// the top of shell/http2/hpack_splice.h), one test each, against the
// nghttp2 the project links. Each drives nghttp2 itself, configured as
// H2Session configures it for the splice (HpackSplice::configure()), and
// looks at what it does: the frames it writes, the callbacks it makes and
// when. A test that fails here means the linked nghttp2 no longer does
// what the splice needs, whatever H2Session's own tests say.
#include <doctest/doctest.h>
#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/h2wire/h2_frame_header.h"
#include "shell/http2/h2_session.h"
#include "shell/http2/hpack_splice.h"
#include "nghttp2_inflate.h"

using namespace onelayer;

namespace {

constexpr std::string_view kClientMagic = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
enum : uint8_t { DATA = 0, HEADERS = 1, RST_STREAM = 3, SETTINGS = 4, CONTINUATION = 9 };
enum : uint8_t { END_STREAM = 0x1, ACK = 0x1, END_HEADERS = 0x4, PADDED = 0x8 };

std::string frame(uint8_t type, uint8_t flags, int32_t stream, std::string_view payload = {}) {
  uint8_t hd[H2FrameHeader::kBytes];
  H2FrameHeader{static_cast<uint32_t>(payload.size()), type, flags, stream}.write(hd);
  return std::string(reinterpret_cast<const char*>(hd), sizeof hd) + std::string(payload);
}

std::string settings_frame(std::initializer_list<std::pair<uint16_t, uint32_t>> entries) {
  std::string p;
  for (auto [id, value] : entries) {
    p += {char(id >> 8), char(id)};
    p += {char(value >> 24), char(value >> 16), char(value >> 8), char(value)};
  }
  return frame(SETTINGS, 0, 0, p);
}

// One callback nghttp2 made, in the order made.
struct Event {
  enum Kind { begin_frame, begin_headers, header, frame_recv, before_send, frame_send, not_send, stream_close } kind;
  uint8_t type = 0;
  uint8_t flags = 0;
  int32_t stream = 0;
  size_t length = 0;  // begin_frame: the frame's payload length
  int cat = -1;       // begin_headers: nghttp2_headers_category
  int call = 0;       // which mem_recv()/mem_send() call of the test made it
  std::vector<nghttp2_settings_entry> settings;  // frame_recv of SETTINGS
};

// A raw nghttp2 session with the options the splice needs (and the
// CONTINUATION limit H2Session sets), recording every callback.
class Nghttp2Peer {
 public:
  explicit Nghttp2Peer(bool server, uint32_t max_continuations = 8) {
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_begin_frame_callback(cb, [](nghttp2_session*, const nghttp2_frame_hd* hd, void* ud) {
      self(ud).record({Event::begin_frame, hd->type, hd->flags, hd->stream_id, hd->length});
      return 0;
    });
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, [](nghttp2_session*, const nghttp2_frame* f, void* ud) {
      Event e{Event::begin_headers, f->hd.type, f->hd.flags, f->hd.stream_id};
      e.cat = f->headers.cat;
      self(ud).record(e);
      return 0;
    });
    nghttp2_session_callbacks_set_on_header_callback(
        cb, [](nghttp2_session*, const nghttp2_frame* f, const uint8_t*, size_t, const uint8_t*, size_t, uint8_t, void* ud) {
          self(ud).record({Event::header, f->hd.type, f->hd.flags, f->hd.stream_id});
          return 0;
        });
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, [](nghttp2_session*, const nghttp2_frame* f, void* ud) {
      Event e{Event::frame_recv, f->hd.type, f->hd.flags, f->hd.stream_id};
      if (f->hd.type == NGHTTP2_SETTINGS) e.settings.assign(f->settings.iv, f->settings.iv + f->settings.niv);
      self(ud).record(e);
      return 0;
    });
    nghttp2_session_callbacks_set_before_frame_send_callback(cb, [](nghttp2_session*, const nghttp2_frame* f, void* ud) {
      self(ud).record({Event::before_send, f->hd.type, f->hd.flags, f->hd.stream_id});
      return 0;
    });
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, [](nghttp2_session*, const nghttp2_frame* f, void* ud) {
      self(ud).record({Event::frame_send, f->hd.type, f->hd.flags, f->hd.stream_id});
      return 0;
    });
    nghttp2_session_callbacks_set_on_frame_not_send_callback(
        cb, [](nghttp2_session*, const nghttp2_frame* f, int, void* ud) {
          self(ud).record({Event::not_send, f->hd.type, f->hd.flags, f->hd.stream_id});
          return 0;
        });
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, [](nghttp2_session*, int32_t stream, uint32_t, void* ud) {
      self(ud).record({Event::stream_close, 0, 0, stream});
      return 0;
    });
    nghttp2_option* opt = nullptr;
    nghttp2_option_new(&opt);
    HpackSplice::configure(opt);
    nghttp2_option_set_max_continuations(opt, max_continuations);
    if (server) nghttp2_session_server_new2(&session, cb, this, opt);
    else nghttp2_session_client_new2(&session, cb, this, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
  }
  ~Nghttp2Peer() { nghttp2_session_del(session); }
  Nghttp2Peer(const Nghttp2Peer&) = delete;
  Nghttp2Peer& operator=(const Nghttp2Peer&) = delete;

  // One nghttp2_session_mem_send() call: what it returned.
  std::string send_once() {
    ++call_;
    const uint8_t* p = nullptr;
    ssize_t n = nghttp2_session_mem_send(session, &p);
    REQUIRE(n >= 0);
    return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
  }
  // Every mem_send() output until there is none, one string per call.
  std::vector<std::string> send_all() {
    std::vector<std::string> out;
    for (std::string s = send_once(); !s.empty(); s = send_once()) out.push_back(std::move(s));
    return out;
  }
  // One nghttp2_session_mem_recv() call; its result.
  ssize_t recv(std::string_view bytes) {
    ++call_;
    return nghttp2_session_mem_recv(session, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  int call() const { return call_; }

  std::vector<Event> of(Event::Kind kind, int type = -1) const {
    std::vector<Event> out;
    for (const Event& e : events)
      if (e.kind == kind && (type < 0 || e.type == type)) out.push_back(e);
    return out;
  }

  nghttp2_session* session = nullptr;
  std::vector<Event> events;

 private:
  static Nghttp2Peer& self(void* ud) { return *static_cast<Nghttp2Peer*>(ud); }
  void record(Event e) {
    e.call = call_;
    events.push_back(std::move(e));
  }
  int call_ = 0;
};

// The frames in `bytes` (whole frames, one after another).
struct Frame {
  H2FrameHeader hd;
  std::string payload;
};
std::vector<Frame> frames_of(std::string_view bytes) {
  std::vector<Frame> out;
  while (!bytes.empty()) {
    REQUIRE(bytes.size() >= H2FrameHeader::kBytes);
    H2FrameHeader hd = H2FrameHeader::read(reinterpret_cast<const uint8_t*>(bytes.data()));
    REQUIRE(bytes.size() >= H2FrameHeader::kBytes + hd.length);
    out.push_back({hd, std::string(bytes.substr(H2FrameHeader::kBytes, hd.length))});
    bytes.remove_prefix(H2FrameHeader::kBytes + hd.length);
  }
  return out;
}

// What a decoder makes of a header block: its fields (none expected).
std::vector<test::DecodedField> fields_of(std::string_view block) {
  nghttp2_hd_inflater* inflater = nullptr;
  REQUIRE(nghttp2_hd_inflate_new(&inflater) == 0);
  std::vector<test::DecodedField> out;
  const bool ok = test::nghttp2_inflate_block(inflater, block, out);
  nghttp2_hd_inflate_del(inflater);
  REQUIRE(ok);
  return out;
}

// A client that has sent its preface and SETTINGS, and a server that has
// read them and answered with its own SETTINGS (`server_settings` extra
// entries), read by the client in turn.
struct ConnectedPair {
  Nghttp2Peer client{false};
  Nghttp2Peer server{true};
  explicit ConnectedPair(std::initializer_list<std::pair<uint16_t, uint32_t>> server_settings = {}) {
    REQUIRE(nghttp2_submit_settings(client.session, NGHTTP2_FLAG_NONE, nullptr, 0) == 0);
    std::vector<nghttp2_settings_entry> iv;
    for (auto [id, value] : server_settings) iv.push_back({id, value});
    REQUIRE(nghttp2_submit_settings(server.session, NGHTTP2_FLAG_NONE, iv.data(), iv.size()) == 0);
    pump();
  }
  // Everything each side writes, to the other, until neither writes more.
  void pump() {
    for (bool moved = true; moved;) {
      moved = false;
      for (const std::string& s : client.send_all()) moved = pass(server, s);
      for (const std::string& s : server.send_all()) moved = pass(client, s);
    }
  }
  static bool pass(Nghttp2Peer& to, const std::string& bytes) {
    REQUIRE(to.recv(bytes) == static_cast<ssize_t>(bytes.size()));
    return true;
  }
};

// The request on `stream`, a HEADERS frame with an empty block, as a
// server receives it after the extractor took the block out.
int32_t open_empty_request(Nghttp2Peer& client, bool end_stream, nghttp2_data_provider* body = nullptr) {
  int32_t id = nghttp2_submit_request(client.session, nullptr, nullptr, 0, end_stream ? nullptr : body, nullptr);
  REQUIRE(id > 0);
  return id;
}

// A data provider with nothing to send that ends the body with trailers:
// nghttp2_submit_trailer() from within the read callback, as H2Session
// sends trailers.
ssize_t read_then_trailers(nghttp2_session* session, int32_t stream, uint8_t*, size_t, uint32_t* data_flags,
                           nghttp2_data_source*, void*) {
  *data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
  REQUIRE(nghttp2_submit_trailer(session, stream, nullptr, 0) == 0);
  return 0;
}

// A HEADERS frame nghttp2 wrote: one frame, END_HEADERS, not PADDED, and
// a block without a field.
void check_empty_headers_frame(const std::string& bytes, int32_t stream) {
  std::vector<Frame> frames = frames_of(bytes);
  REQUIRE(frames.size() == 1);
  const Frame& f = frames[0];
  CHECK(f.hd.type == HEADERS);
  CHECK(f.hd.stream == stream);
  CHECK((f.hd.flags & END_HEADERS) != 0);
  CHECK((f.hd.flags & PADDED) == 0);
  const size_t priority = (f.hd.flags & NGHTTP2_FLAG_PRIORITY) ? 5 : 0;
  REQUIRE(f.payload.size() >= priority);
  CHECK(fields_of(std::string_view(f.payload).substr(priority)).empty());
}

}  // namespace

TEST_CASE("hpack splice invariant 1: a head with an empty field list is one HEADERS frame, END_HEADERS, unpadded, carrying no field") {
  // Whatever the table size the peer allows: 0, the default, more.
  for (uint32_t peer_table : {0u, 4096u, 65536u}) {
    CAPTURE(peer_table);
    ConnectedPair pair({{NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, peer_table}});
    for (int i = 0; i < 3; ++i) {  // the first head after the SETTINGS, and later ones
      int32_t id = open_empty_request(pair.client, true);
      std::vector<std::string> out = pair.client.send_all();
      REQUIRE(out.size() == 1);
      check_empty_headers_frame(out[0], id);
      REQUIRE(pair.server.recv(out[0]) == static_cast<ssize_t>(out[0].size()));
      // The server's answer: a response head, then trailers.
      nghttp2_data_provider body{};
      body.read_callback = read_then_trailers;
      REQUIRE(nghttp2_submit_response(pair.server.session, id, nullptr, 0, &body) == 0);
      for (const std::string& s : pair.server.send_all()) {
        if (frames_of(s)[0].hd.type == HEADERS) check_empty_headers_frame(s, id);
        REQUIRE(pair.client.recv(s) == static_cast<ssize_t>(s.size()));
      }
      CHECK(pair.server.of(Event::frame_send, HEADERS).size() == size_t(2 * (i + 1)));
    }
  }
}

TEST_CASE("hpack splice invariant 2: before_frame_send of a HEADERS frame is followed by that frame alone, in the same mem_send") {
  ConnectedPair pair;
  nghttp2_data_provider body{};
  body.read_callback = read_then_trailers;
  std::vector<int32_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(open_empty_request(pair.client, i != 1, &body));
  // Request heads, and the trailers of the one with a body.
  std::vector<std::string> client_out;
  std::vector<int> client_calls;
  for (std::string s = pair.client.send_once(); !s.empty(); s = pair.client.send_once()) {
    client_out.push_back(s);
    client_calls.push_back(pair.client.call());
  }
  // Response heads: an interim one, then the final with trailers.
  for (const std::string& s : client_out) REQUIRE(pair.server.recv(s) == static_cast<ssize_t>(s.size()));
  for (int32_t id : ids) {
    REQUIRE(nghttp2_submit_headers(pair.server.session, NGHTTP2_FLAG_NONE, id, nullptr, nullptr, 0, nullptr) == 0);
    REQUIRE(nghttp2_submit_response(pair.server.session, id, nullptr, 0, &body) == 0);
  }
  std::vector<std::string> server_out;
  std::vector<int> server_calls;
  for (std::string s = pair.server.send_once(); !s.empty(); s = pair.server.send_once()) {
    server_out.push_back(s);
    server_calls.push_back(pair.server.call());
  }

  auto check = [](const Nghttp2Peer& peer, const std::vector<std::string>& out, const std::vector<int>& calls,
                  size_t heads) {
    std::vector<Event> before = peer.of(Event::before_send, HEADERS);
    REQUIRE(before.size() == heads);
    for (const Event& e : before) {
      // The output of the call the callback ran in: that HEADERS frame, whole, nothing else.
      size_t at = 0;
      while (at < calls.size() && calls[at] != e.call) ++at;
      REQUIRE(at < calls.size());
      std::vector<Frame> frames = frames_of(out[at]);
      REQUIRE(frames.size() == 1);
      CHECK(frames[0].hd.type == HEADERS);
      CHECK(frames[0].hd.stream == e.stream);
      CHECK(frames[0].hd.length + H2FrameHeader::kBytes == out[at].size());
    }
    // And every HEADERS frame written had its before_frame_send in its call.
    for (size_t i = 0; i < out.size(); ++i) {
      if (frames_of(out[i])[0].hd.type != HEADERS) continue;
      bool announced = false;
      for (const Event& e : before) announced = announced || e.call == calls[i];
      CHECK(announced);
    }
  };
  check(pair.client, client_out, client_calls, 4);  // 3 requests, 1 trailers
  check(pair.server, server_out, server_calls, 9);  // 3 x (interim, final, trailers)
}

TEST_CASE("hpack splice invariant 3: a stream's HEADERS frames go out in the order they were submitted") {
  ConnectedPair pair;
  // A client's request head and then its trailers.
  nghttp2_data_provider body{};
  body.read_callback = read_then_trailers;
  int32_t id = open_empty_request(pair.client, false, &body);
  std::vector<std::string> out = pair.client.send_all();
  std::vector<Event> sent = pair.client.of(Event::before_send, HEADERS);
  REQUIRE(sent.size() == 2);
  CHECK((sent[0].flags & END_STREAM) == 0);  // the request head
  CHECK((sent[1].flags & END_STREAM) != 0);  // its trailers
  for (const std::string& s : out) REQUIRE(pair.server.recv(s) == static_cast<ssize_t>(s.size()));
  // A server's interim heads, then its final head ending the stream,
  // submitted together before one flush.
  REQUIRE(nghttp2_submit_headers(pair.server.session, NGHTTP2_FLAG_NONE, id, nullptr, nullptr, 0, nullptr) == 0);
  REQUIRE(nghttp2_submit_headers(pair.server.session, NGHTTP2_FLAG_NONE, id, nullptr, nullptr, 0, nullptr) == 0);
  REQUIRE(nghttp2_submit_response(pair.server.session, id, nullptr, 0, nullptr) == 0);
  pair.server.send_all();
  std::vector<Event> answered = pair.server.of(Event::before_send, HEADERS);
  REQUIRE(answered.size() == 3);
  CHECK((answered[0].flags & END_STREAM) == 0);
  CHECK((answered[1].flags & END_STREAM) == 0);
  CHECK((answered[2].flags & END_STREAM) != 0);
}

TEST_CASE("hpack splice invariant 4: a HEADERS frame nghttp2 drops gets on_frame_not_send and no before_frame_send") {
  SUBCASE("a request reset before it went out") {
    ConnectedPair pair;
    int32_t id = open_empty_request(pair.client, true);
    REQUIRE(nghttp2_submit_rst_stream(pair.client.session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL) == 0);
    pair.client.send_all();
    CHECK(pair.client.of(Event::before_send, HEADERS).empty());
    REQUIRE(pair.client.of(Event::not_send, HEADERS).size() == 1);
    CHECK(pair.client.of(Event::not_send, HEADERS)[0].stream == id);
  }
  SUBCASE("requests queued when the session ends") {
    ConnectedPair pair;
    int32_t a = open_empty_request(pair.client, true);
    int32_t b = open_empty_request(pair.client, true);
    REQUIRE(nghttp2_session_terminate_session(pair.client.session, NGHTTP2_INTERNAL_ERROR) == 0);
    pair.client.send_all();
    CHECK(pair.client.of(Event::before_send, HEADERS).empty());
    std::vector<Event> dropped = pair.client.of(Event::not_send, HEADERS);
    REQUIRE(dropped.size() == 2);
    CHECK(dropped[0].stream == a);
    CHECK(dropped[1].stream == b);
  }
  SUBCASE("a response head whose stream is reset before it went out") {
    ConnectedPair pair;
    int32_t id = open_empty_request(pair.client, true);
    for (const std::string& s : pair.client.send_all()) REQUIRE(pair.server.recv(s) == static_cast<ssize_t>(s.size()));
    REQUIRE(nghttp2_submit_response(pair.server.session, id, nullptr, 0, nullptr) == 0);
    REQUIRE(nghttp2_submit_rst_stream(pair.server.session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL) == 0);
    pair.server.send_all();
    CHECK(pair.server.of(Event::before_send, HEADERS).empty());
    CHECK(pair.server.of(Event::frame_send, HEADERS).empty());
    REQUIRE(pair.server.of(Event::not_send, HEADERS).size() == 1);
    CHECK(pair.server.of(Event::not_send, HEADERS)[0].stream == id);
  }
}

TEST_CASE("hpack splice invariant 5: HEADERS and CONTINUATION frames with empty blocks open, sequence and end streams, and no field is decoded") {
  Nghttp2Peer server(true);
  std::string in(kClientMagic);
  in += settings_frame({});
  in += frame(HEADERS, END_HEADERS | END_STREAM, 1);
  in += frame(HEADERS, END_HEADERS, 3);
  in += frame(DATA, END_STREAM, 3, "body");
  in += frame(HEADERS, 0, 5);
  in += frame(CONTINUATION, END_HEADERS, 5);
  REQUIRE(server.recv(in) == static_cast<ssize_t>(in.size()));
  std::vector<Event> begun = server.of(Event::begin_headers);
  REQUIRE(begun.size() == 3);
  for (const Event& e : begun) CHECK(e.cat == NGHTTP2_HCAT_REQUEST);
  std::vector<Event> heads = server.of(Event::frame_recv, HEADERS);
  REQUIRE(heads.size() == 3);
  CHECK(heads[0].stream == 1);
  CHECK((heads[0].flags & END_STREAM) != 0);
  CHECK(heads[1].stream == 3);
  CHECK((heads[1].flags & END_STREAM) == 0);
  CHECK(heads[2].stream == 5);
  CHECK(server.of(Event::header).empty());
  CHECK(nghttp2_session_get_stream_remote_close(server.session, 1) == 1);
  CHECK(nghttp2_session_get_stream_remote_close(server.session, 3) == 1);
  CHECK(nghttp2_session_get_stream_remote_close(server.session, 5) == 0);
  CHECK(nghttp2_session_get_last_proc_stream_id(server.session) == 5);

  // A client: a response head and trailers, both empty.
  ConnectedPair pair;
  int32_t id = open_empty_request(pair.client, true);
  pair.client.send_all();
  std::string answer = frame(HEADERS, END_HEADERS, id) + frame(DATA, 0, id, "x") + frame(HEADERS, END_HEADERS | END_STREAM, id);
  REQUIRE(pair.client.recv(answer) == static_cast<ssize_t>(answer.size()));
  std::vector<Event> client_begun = pair.client.of(Event::begin_headers);
  REQUIRE(client_begun.size() == 2);
  CHECK(client_begun[0].cat == NGHTTP2_HCAT_RESPONSE);
  CHECK(client_begun[1].cat == NGHTTP2_HCAT_HEADERS);
  CHECK(pair.client.of(Event::header).empty());
  CHECK(pair.client.of(Event::frame_recv, DATA).size() == 1);
  // Both sides ended (the request had END_STREAM): the stream is closed.
  std::vector<Event> closed = pair.client.of(Event::stream_close);
  REQUIRE(closed.size() == 1);
  CHECK(closed[0].stream == id);
}

TEST_CASE("hpack splice invariant 6: on_frame_recv of HEADERS comes for the frame ending the block, within the mem_recv given its last byte, which takes all its input") {
  Nghttp2Peer server(true);
  std::string start = std::string(kClientMagic) + settings_frame({}) + frame(HEADERS, 0, 1) + frame(CONTINUATION, 0, 1);
  REQUIRE(server.recv(start) == static_cast<ssize_t>(start.size()));
  CHECK(server.of(Event::frame_recv, HEADERS).empty());
  std::string last = frame(CONTINUATION, END_HEADERS, 1);
  // The ending frame in two pieces: nothing before its last byte.
  REQUIRE(server.recv(std::string_view(last).substr(0, 4)) == 4);
  CHECK(server.of(Event::frame_recv, HEADERS).empty());
  REQUIRE(server.recv(std::string_view(last).substr(4)) == static_cast<ssize_t>(last.size() - 4));
  std::vector<Event> heads = server.of(Event::frame_recv, HEADERS);
  REQUIRE(heads.size() == 1);
  CHECK(heads[0].stream == 1);
  CHECK(heads[0].call == server.call());
  // Blocks of several streams in one input: each delivered in order, in that call.
  std::string more = frame(HEADERS, END_HEADERS, 3) + frame(HEADERS, 0, 5) + frame(CONTINUATION, END_HEADERS, 5) +
                     frame(HEADERS, END_HEADERS | END_STREAM, 7);
  REQUIRE(server.recv(more) == static_cast<ssize_t>(more.size()));
  heads = server.of(Event::frame_recv, HEADERS);
  REQUIRE(heads.size() == 4);
  for (size_t i = 1; i < 4; ++i) {
    CHECK(heads[i].stream == int32_t(2 * i + 1));
    CHECK(heads[i].call == server.call());
  }
}

TEST_CASE("hpack splice invariant 7: on_begin_frame runs for every empty HEADERS and CONTINUATION, and max_continuations counts them") {
  constexpr uint32_t kMaxContinuations = 4;
  {
    Nghttp2Peer server(true, kMaxContinuations);
    std::string in = std::string(kClientMagic) + settings_frame({}) + frame(HEADERS, 0, 1);
    for (uint32_t i = 0; i + 1 < kMaxContinuations; ++i) in += frame(CONTINUATION, 0, 1);
    in += frame(CONTINUATION, END_HEADERS, 1);
    REQUIRE(server.recv(in) == static_cast<ssize_t>(in.size()));
    size_t header_frames = 0;
    for (const Event& e : server.of(Event::begin_frame)) {
      if (e.type != HEADERS && e.type != CONTINUATION) continue;
      ++header_frames;
      CHECK(e.length == 0);
    }
    CHECK(header_frames == 1 + kMaxContinuations);
    CHECK(server.of(Event::frame_recv, HEADERS).size() == 1);
  }
  {
    Nghttp2Peer server(true, kMaxContinuations);
    std::string in = std::string(kClientMagic) + settings_frame({}) + frame(HEADERS, 0, 1);
    for (uint32_t i = 0; i < kMaxContinuations; ++i) in += frame(CONTINUATION, 0, 1);
    in += frame(CONTINUATION, END_HEADERS, 1);
    CHECK(server.recv(in) == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS);
  }
}

TEST_CASE("hpack splice invariant 8: nghttp2's inflater takes empty blocks before and after our SETTINGS_HEADER_TABLE_SIZE is acknowledged") {
  // What H2Session advertises (its Limits' default), and what the splice
  // advertises when asked for less or more.
  for (uint32_t asked : {H2Session::Limits{}.header_table_bytes, 0u, 1024u, 65536u}) {
    CAPTURE(asked);
    Nghttp2Peer server(true);
    HpackSplice splice(true, asked);
    nghttp2_settings_entry entry = splice.table_setting();
    REQUIRE(entry.settings_id == NGHTTP2_SETTINGS_HEADER_TABLE_SIZE);
    CHECK(entry.value >= HpackSplice::kLeastDecodeTableBytes);
    REQUIRE(nghttp2_submit_settings(server.session, NGHTTP2_FLAG_NONE, &entry, 1) == 0);
    server.send_all();
    std::string in = std::string(kClientMagic) + settings_frame({}) + frame(HEADERS, END_HEADERS | END_STREAM, 1);
    REQUIRE(server.recv(in) == static_cast<ssize_t>(in.size()));
    std::string acked = frame(SETTINGS, ACK, 0) + frame(HEADERS, END_HEADERS | END_STREAM, 3) + frame(HEADERS, 0, 5) +
                        frame(CONTINUATION, END_HEADERS, 5);
    REQUIRE(server.recv(acked) == static_cast<ssize_t>(acked.size()));
    CHECK(nghttp2_session_get_local_settings(server.session, NGHTTP2_SETTINGS_HEADER_TABLE_SIZE) == entry.value);
    CHECK(server.of(Event::frame_recv, HEADERS).size() == 3);
    // No GOAWAY (COMPRESSION_ERROR) on its way: the connection goes on.
    for (const std::string& out : server.send_all())
      for (const Frame& f : frames_of(out)) CHECK(f.hd.type != NGHTTP2_GOAWAY);
    CHECK(nghttp2_session_want_read(server.session) == 1);
  }
}

TEST_CASE("hpack splice invariant 9: on_frame_recv reports the peer's SETTINGS_HEADER_TABLE_SIZE as received and the ACK of ours") {
  Nghttp2Peer client(false);
  REQUIRE(nghttp2_submit_settings(client.session, NGHTTP2_FLAG_NONE, nullptr, 0) == 0);
  client.send_all();
  std::string in = settings_frame({{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 10}, {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 1234}});
  in += settings_frame({{NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 0}});
  in += frame(SETTINGS, ACK, 0);
  REQUIRE(client.recv(in) == static_cast<ssize_t>(in.size()));
  std::vector<Event> settings = client.of(Event::frame_recv, SETTINGS);
  REQUIRE(settings.size() == 3);
  REQUIRE(settings[0].settings.size() == 2);
  CHECK(settings[0].settings[1].settings_id == NGHTTP2_SETTINGS_HEADER_TABLE_SIZE);
  CHECK(settings[0].settings[1].value == 1234);
  REQUIRE(settings[1].settings.size() == 1);
  CHECK(settings[1].settings[0].value == 0);
  CHECK((settings[2].flags & ACK) != 0);
  CHECK(settings[2].settings.empty());
}
