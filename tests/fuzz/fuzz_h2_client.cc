// libFuzzer target for the client role of the HTTP/2 codec
// (proxy/shell/http2/h2_session.cc), the one HTTP/2 upstream connections use:
// a client H2Session opens a few requests (heads from an H2FieldBlock and
// from a Head, bodies, trailers) and the fuzzer's bytes are the server's
// answer.
//
// Input: one flags byte, then the server's bytes.
//   bit 0: an empty SETTINGS and a SETTINGS ACK go first (a server that
//          starts well);
//   bit 1: every time a stream ends the owner opens another request, from
//          inside the callback (up to kMaxRequests in all);
//   bit 2: the owner never consumes response bodies;
//   bit 3: halfway through, the connection is declared lost
//          (close_streams()), and the rest of the bytes still arrive;
//   bit 4: the client's output is not flushed until the end;
//   bits 5-7: the size of the pieces the bytes arrive in.
//
// Invariants (abort on failure):
// - what the client writes is the connection preface, then whole frames
//   (a 9-byte header, a known type, at most 16,384 bytes of payload, the
//   reserved bit clear), SETTINGS first;
// - Handler events are well formed and only for streams the owner opened:
//   a final head (status 200..999) before body, trailers or end, at most one
//   head, exactly one terminal event (on_reset or on_closed) per stream,
//   nothing after it; every opened stream has ended once close_streams()
//   has run;
// - a stream whose body is never consumed receives at most the initial
//   65,535-byte window;
// - no crash, leak or undefined behaviour (ASan + UBSan).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/http/http_headers.h"
#include "fuzz_h2_util.h"
#include "fuzz_util.h"
#include "shell/http2/h2_field_block.h"
#include "shell/http2/h2_session.h"

namespace {

using onelayer::H2FieldBlock;
using onelayer::H2Session;
using onelayer::Headers;

constexpr std::string_view kClientMagic = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr size_t kPieces[8] = {1, 3, 9, 17, 100, 1000, 16384, 1 << 20};
constexpr int kMaxRequests = 12;

struct StreamState {
  bool head = false;
  bool ended = false;
  bool terminal = false;
  uint64_t unconsumed = 0;
};

struct Owner : H2Session::Handler {
  H2Session* session = nullptr;
  bool reopen = false;
  bool hold = false;
  int opened = 0;
  std::map<int32_t, StreamState> streams;

  // Requests of three shapes, in turn: a GET from a Head; a POST from a
  // field block (capitals and connection-specific fields on the way in)
  // with a body and trailers; a POST with a body and no trailers.
  void open() {
    if (opened >= kMaxRequests || !session->can_submit_request()) return;
    int shape = opened % 3;
    int32_t id = 0;
    if (shape == 0) {
      H2Session::Head h;
      h.method = "GET";
      h.scheme = "http";
      h.authority = "example.test";
      h.path = "/get";
      h.fields = {{"User-Agent", "fuzz"}, {"Connection", "close"}, {"x-request-id", "1"}};
      id = session->submit_request(h, true);
    } else {
      H2FieldBlock block;
      block.reserve(4, 64);
      block.put("Content-Type", "application/grpc");
      block.put("TE", "trailers");
      block.put("Transfer-Encoding", "chunked");
      block.put("X-B3-TraceId", "abc");
      id = session->submit_request(H2Session::RequestLine{"POST", "https", "example.test", "/post"}, block, false);
    }
    if (id == 0) return;
    FUZZ_REQUIRE(id > 0 && id % 2 == 1);
    FUZZ_REQUIRE(streams.count(id) == 0);
    streams[id];
    ++opened;
    if (shape == 0) return;
    FUZZ_REQUIRE(session->send_data(id, std::string(shape == 1 ? 5000 : 70000, 'q')));
    if (shape == 1) FUZZ_REQUIRE(session->send_trailers(id, {{"Grpc-Status", "0"}, {"upgrade", "h2c"}}));
    else FUZZ_REQUIRE(session->end_stream(id));
  }

  StreamState& live(int32_t id) {
    auto it = streams.find(id);
    FUZZ_REQUIRE(it != streams.end());
    FUZZ_REQUIRE(!it->second.terminal);
    return it->second;
  }
  StreamState& with_head(int32_t id) {
    StreamState& s = live(id);
    FUZZ_REQUIRE(s.head && !s.ended);
    return s;
  }
  void on_head(int32_t id, H2Session::Head& head, bool) override {
    StreamState& s = live(id);
    FUZZ_REQUIRE(!s.head);
    FUZZ_REQUIRE(head.status >= 200 && head.status <= 999);
    FUZZ_REQUIRE(head.method.empty() && head.path.empty());
    s.head = true;
  }
  void on_data(int32_t id, const uint8_t* data, size_t len) override {
    fuzz::take_body(*session, id, data, len, hold, with_head(id).unconsumed);
  }
  void on_trailers(int32_t id, Headers&) override { with_head(id); }
  void on_end(int32_t id) override { with_head(id).ended = true; }
  void terminal(int32_t id) {
    live(id).terminal = true;
    if (reopen) open();
  }
  void on_reset(int32_t id, uint32_t) override { terminal(id); }
  void on_closed(int32_t id) override { terminal(id); }
  void on_goaway(int32_t, uint32_t) override {}
};

// The client's output: the preface magic, then whole frames with our
// SETTINGS first.
void check_output(std::string_view out) {
  FUZZ_REQUIRE(out.substr(0, kClientMagic.size()) == kClientMagic);
  out.remove_prefix(kClientMagic.size());
  fuzz::for_each_frame(out, [](uint8_t, uint8_t, const uint8_t*, size_t) {});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  uint8_t flags = data[0];
  std::string in;
  if (flags & 1) in.append("\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x04\x01\x00\x00\x00\x00", 18);
  in.append(reinterpret_cast<const char*>(data + 1), size - 1);

  H2Session::Limits limits;
  limits.stream_window_bytes = 16 * 1024;
  limits.max_header_list_bytes = 4096;
  Owner owner;
  owner.reopen = flags & 2;
  owner.hold = flags & 4;
  bool lose_halfway = flags & 8;
  bool reads = !(flags & 16);
  size_t piece = kPieces[flags >> 5];
  std::string out;
  {
    H2Session session(H2Session::Role::client, &owner, limits);
    owner.session = &session;
    for (int i = 0; i < 3; ++i) owner.open();
    FUZZ_REQUIRE(owner.opened == 3);
    bool lost = false;
    fuzz::feed_in_pieces(session, in, piece, reads, out, [&](size_t at) {
      if (!lose_halfway || lost || at < in.size() / 2) return;
      lost = true;
      bool reopen = owner.reopen;
      owner.reopen = false;  // a request opened from close_streams()'s callbacks would outlive it
      session.close_streams(H2Session::kCancel);
      owner.reopen = reopen;
      FUZZ_REQUIRE(session.open_streams() == 0);
    });
    session.flush(out);
    check_output(out);
    owner.reopen = false;
    session.close_streams();
    FUZZ_REQUIRE(session.open_streams() == 0);
    for (const auto& [id, s] : owner.streams) FUZZ_REQUIRE(s.terminal);
    owner.session = nullptr;
  }
  return 0;
}
