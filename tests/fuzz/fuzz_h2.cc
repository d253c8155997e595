// libFuzzer target for the HTTP/2 codec (proxy/shell/http2/h2_session.cc): bytes
// from a client -> a server H2Session, whose owner answers, streams bodies
// back, consumes or holds request bodies and resets some streams.
//
// Input: one flags byte, then the client's bytes.
//   bit 0: the client preface (magic + empty SETTINGS) goes first;
//   bit 1: the owner answers every request head (head, 3 KB body, trailers);
//   bit 2: the owner never consumes request bodies;
//   bit 3: the client never reads (the session is not flushed until the end);
//   bits 4-7: the size of the pieces the bytes arrive in.
//
// Invariants (abort on failure):
// - what the session writes parses as whole frames: a 9-byte header, a
//   known type, at most 16,384 bytes of payload, the reserved bit clear,
//   and it starts with the server's SETTINGS;
// - the session either goes on or asks to close; when it closes on an
//   error, a GOAWAY carrying that code was written;
// - Handler events are well formed: a head before anything else on a
//   stream, at most one head, exactly one terminal event (on_reset or
//   on_closed) per stream, nothing after it;
// - flow control bounds memory: a stream whose body is never consumed has
//   received at most the initial 65,535-byte window;
// - the owner announces a drain (announce_drain) on the head of a stream
//   whose id is 5 mod 8: the notice GOAWAY (NO_ERROR, the largest stream
//   id) is written only then, before any other GOAWAY, and the drain's
//   PING once, after it (unless an error GOAWAY ends the session);
// - the response bytes counted as framed (count_framed, asked for every
//   answered stream) are only those streams', never an empty count, and
//   never more than was queued (3,000 bytes each);
// - a stream the owner cuts right after its head (reset_stream_after_head,
//   every stream whose id is 3 mod 8 when the owner answers) gets no DATA,
//   and no HEADERS after its RST_STREAM INTERNAL_ERROR (a head that could
//   not go, the stream already closing, leaves the reset alone);
// - every request head translates (shell/http2/h2_request_head.cc) into a
//   MessageHead or a reason: HTTP/2.0, `:authority` as the one Host field
//   and first, cookies in one field, chunked exactly when a body of unknown
//   length follows; request validation takes the result; the head's fields
//   as a response head come out in lower case without framing fields;
// - no crash, leak or undefined behaviour (ASan + UBSan).
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "core/http/http_headers.h"
#include "core/request/request_validation.h"
#include "fuzz_h2_util.h"
#include "fuzz_util.h"
#include "shell/http2/h2_request_head.h"
#include "shell/http2/h2_session.h"

namespace {

using onelayer::H2Session;
using onelayer::Header;
using onelayer::Headers;
using onelayer::MessageHead;

// The HTTP/2 downstream's head translations on what the session decoded.
void check_translations(const H2Session::Head& decoded, bool end_stream) {
  H2Session::Head in = decoded;
  MessageHead m;
  const char* bad = onelayer::translate_h2_request(in, end_stream, m);
  if (bad) {
    FUZZ_REQUIRE(*bad != '\0');
    return;
  }
  FUZZ_REQUIRE(m.http_major == 2 && m.http_minor == 0);
  FUZZ_REQUIRE(m.method == decoded.method && m.target == decoded.path);
  // What the rewrites take on trust (checked_by_codec): the session let
  // through no name that is not a token and no value with a control byte.
  FUZZ_REQUIRE(m.checked_by_codec);
  for (const Header& h : decoded.fields)
    FUZZ_REQUIRE(onelayer::is_token(h.name) && onelayer::is_valid_field_value(h.value));
  size_t hosts = 0, cookies = 0;
  for (const Header& h : m.headers) {
    hosts += onelayer::iequals(h.name, "host");
    cookies += onelayer::iequals(h.name, "cookie");
  }
  FUZZ_REQUIRE(cookies <= 1);
  if (!decoded.authority.empty()) {
    FUZZ_REQUIRE(hosts == 1 && m.headers[0].name == "Host" && m.headers[0].value == decoded.authority);
  }
  FUZZ_REQUIRE(m.chunked == (!end_stream && !m.has_content_length));
  if (end_stream) FUZZ_REQUIRE(!m.chunked && (m.has_content_length || m.content_length == 0));
  onelayer::RequestHeadFacts facts{m.method, m.target, m.http_major, m.http_minor, m.obs_fold,
                                   m.chunked, m.has_content_length, m.content_length, m.checked_by_codec};
  Headers fields = m.headers;
  onelayer::check_request_head(facts, fields, onelayer::UnderscoreHeaders::drop);

  // The same fields as an upstream's response, on their way to the client.
  MessageHead resp;
  resp.status = 200;
  resp.headers = decoded.fields;
  resp.has_content_length = m.has_content_length;
  resp.content_length = m.content_length;
  resp.checked_by_codec = true;  // as an HTTP/2 upstream's head
  onelayer::DownstreamStream::ResponseMeta meta;
  meta.via = "1.1 onelayer";
  onelayer::H2Response out;
  if (!onelayer::translate_response_for_h2(resp, meta, out)) return;
  FUZZ_REQUIRE(out.status == 200);
  size_t lengths = 0;
  for (const Header& h : out.fields.headers()) {
    for (char c : h.name) FUZZ_REQUIRE(!(c >= 'A' && c <= 'Z'));
    FUZZ_REQUIRE(h.name != "transfer-encoding" && h.name != "connection");
    lengths += h.name == "content-length";
  }
  FUZZ_REQUIRE(lengths == (m.has_content_length ? 1u : 0u));
}

constexpr std::string_view kClientMagic = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr size_t kPieces[16] = {1, 2, 3, 5, 9, 17, 64, 100, 512, 1000, 4096, 9000, 16384, 65536, 1 << 20, 1 << 20};

struct StreamState {
  bool head = false;
  bool ended = false;
  bool terminal = false;
  uint64_t received = 0;
  uint64_t unconsumed = 0;
};

constexpr size_t kAnswerBody = 3000;

struct Owner : H2Session::Handler {
  H2Session* session = nullptr;
  bool answer = false;
  bool hold = false;
  bool announced = false;  // announce_drain() said yes
  std::map<int32_t, StreamState> streams;
  std::map<int32_t, uint64_t> framed;  // take_framed() totals per stream
  std::set<uint32_t> cut;              // reset_stream_after_head() right after the head

  void take_framed() {
    for (auto [id, n] : session->take_framed()) {
      FUZZ_REQUIRE(n > 0);
      FUZZ_REQUIRE(answer && streams.count(id) && streams[id].head);
      framed[id] += n;
      FUZZ_REQUIRE(framed[id] <= kAnswerBody);
    }
    FUZZ_REQUIRE(!session->has_framed());
  }

  StreamState& live(int32_t id) {
    StreamState& s = streams[id];
    FUZZ_REQUIRE(s.head);
    FUZZ_REQUIRE(!s.terminal);
    return s;
  }
  void on_head(int32_t id, H2Session::Head& head, bool end_stream) override {
    StreamState& s = streams[id];
    FUZZ_REQUIRE(!s.head && !s.terminal);
    s.head = true;
    FUZZ_REQUIRE(!head.method.empty());
    check_translations(head, end_stream);
    if (id % 8 == 5 && session->announce_drain()) announced = true;
    if (!answer) return;
    H2Session::Head r;
    r.status = 200;
    r.fields = {{"content-type", "text/plain"}, {"x-path", head.path}};
    FUZZ_REQUIRE(session->submit_response(id, r, false));
    if (id % 8 == 3) {
      // The upstream failed right after its head: the head, then the reset.
      FUZZ_REQUIRE(session->reset_stream_after_head(id, H2Session::kInternalError));
      FUZZ_REQUIRE(!session->send_data(id, "late"));
      cut.insert(static_cast<uint32_t>(id));
      return;
    }
    session->count_framed(id);
    session->send_data(id, std::string(kAnswerBody, 'r'));
    session->send_trailers(id, {{"grpc-status", "0"}});
  }
  void on_data(int32_t id, const uint8_t* data, size_t len) override {
    StreamState& s = live(id);
    FUZZ_REQUIRE(!s.ended);
    s.received += len;
    fuzz::take_body(*session, id, data, len, hold, s.unconsumed);
  }
  void on_trailers(int32_t id, Headers&) override { FUZZ_REQUIRE(!live(id).ended); }
  void on_end(int32_t id) override {
    StreamState& s = live(id);
    FUZZ_REQUIRE(!s.ended);
    s.ended = true;
  }
  void terminal(int32_t id) {
    StreamState& s = live(id);
    s.terminal = true;
  }
  void on_reset(int32_t id, uint32_t) override { terminal(id); }
  void on_closed(int32_t id) override { terminal(id); }
  void on_goaway(int32_t, uint32_t) override {}
};

// Checks the frame sequence (the server's SETTINGS first) and the drain's
// notice (`announced`: the owner asked for one); returns the code of the
// first GOAWAY with an error code, 0 when every GOAWAY said NO_ERROR, -1
// when there was none.
int64_t check_frames(std::string_view out, bool announced, const std::set<uint32_t>& cut) {
  int64_t goaway = -1;
  bool notice = false, drain_ping = false;
  std::set<uint32_t> reset_written;
  fuzz::for_each_frame(out, [&](uint8_t type, uint8_t flags, const uint8_t* payload, size_t len) {
    // The stream id: the last four bytes of the frame header, just before the payload.
    const uint32_t stream = fuzz::be32(payload - 4) & 0x7fffffff;
    if (cut.count(stream)) {
      FUZZ_REQUIRE(type != 0);  // no DATA after the cut
      if (type == 1) FUZZ_REQUIRE(!reset_written.count(stream));
      if (type == 3 && len == 4 && fuzz::be32(payload) == H2Session::kInternalError) reset_written.insert(stream);
    }
    if (type == 6 && !(flags & 1) && len == 8 &&
        std::string_view(reinterpret_cast<const char*>(payload), 8) == "ol-drain") {
      FUZZ_REQUIRE(notice && !drain_ping);  // behind the notice, once
      drain_ping = true;
    }
    if (type != 7) return;
    FUZZ_REQUIRE(len >= 8);
    uint32_t code = fuzz::be32(payload + 4);
    if ((fuzz::be32(payload) & 0x7fffffff) == 0x7fffffff && code == 0) {
      FUZZ_REQUIRE(announced && !notice && goaway == -1);
      notice = true;
    }
    if (goaway <= 0) goaway = code;
  });
  // The notice's PING follows it unless an error GOAWAY ended the session.
  if (notice && goaway <= 0) FUZZ_REQUIRE(drain_ping);
  return goaway;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  uint8_t flags = data[0];
  std::string in;
  if (flags & 1) {
    in.assign(kClientMagic);
    in.append("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);
  }
  in.append(reinterpret_cast<const char*>(data + 1), size - 1);

  H2Session::Limits limits;
  limits.stream_window_bytes = 16 * 1024;
  Owner owner;
  owner.answer = flags & 2;
  owner.hold = flags & 4;
  bool reads = !(flags & 8);
  size_t piece = kPieces[flags >> 4];
  std::string out;
  {
    H2Session session(H2Session::Role::server, &owner, limits);
    owner.session = &session;
    uint64_t now = fuzz::feed_in_pieces(session, in, piece, reads, out, [&](size_t) { owner.take_framed(); });
    session.flush(out);
    owner.take_framed();
    int64_t goaway = check_frames(out, owner.announced, owner.cut);
    if (goaway > 0) FUZZ_REQUIRE(session.want_close());  // an error GOAWAY ends the session
    if (session.want_close() && session.goaway_code() != H2Session::kNoError) {
      FUZZ_REQUIRE(goaway == session.goaway_code());
      // Once failed, more input is refused and reaches no Handler.
      size_t streams = owner.streams.size();
      FUZZ_REQUIRE(!session.recv(reinterpret_cast<const uint8_t*>(in.data()), in.size(), now));
      FUZZ_REQUIRE(owner.streams.size() == streams);
    }
    session.close_streams();
    for (const auto& [id, s] : owner.streams) FUZZ_REQUIRE(!s.head || s.terminal);
    owner.session = nullptr;
  }
  return 0;
}
