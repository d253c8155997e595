// H2Session: a client and a server session wired to each other in memory
// (what one flushes, the other receives), and a server session fed attack
// bytes built frame by frame below, its output parsed back into frames (the
// header blocks decoded with nghttp2's own HPACK decoder).
#include <doctest/doctest.h>
#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "shell/http2/h2_field_block.h"
#include "shell/http2/h2_session.h"
#include "shell/memory/spare_string_rooms.h"
#include "h2_handler_stub.h"
#include "hpack_block_decoder.h"

using namespace onelayer;

namespace {

using Role = H2Session::Role;

// ---------------------------------------------------------------- frames

constexpr std::string_view kClientMagic = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
enum : uint8_t { DATA = 0, HEADERS = 1, RST_STREAM = 3, SETTINGS = 4, PING = 6, GOAWAY = 7,
                 WINDOW_UPDATE = 8, CONTINUATION = 9 };
enum : uint8_t { END_STREAM = 0x1, ACK = 0x1, END_HEADERS = 0x4 };

std::string be32(uint32_t v) {
  return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}

std::string frame(uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload) {
  size_t n = payload.size();
  std::string f{char(n >> 16), char(n >> 8), char(n), char(type), char(flags)};
  return f + be32(stream) + std::string(payload);
}

// HPACK integer (RFC 7541 5.1) with `prefix` bits, `high` the bits above.
std::string hpack_int(uint64_t v, int prefix, uint8_t high) {
  uint64_t max = (1u << prefix) - 1;
  if (v < max) return std::string(1, char(high | v));
  std::string out(1, char(high | max));
  v -= max;
  for (; v >= 128; v >>= 7) out += char(0x80 | (v & 0x7f));
  return out + char(v);
}

// Literal field with a literal name, no Huffman; `index`: with incremental
// indexing (enters the dynamic table), else without indexing.
std::string literal(std::string_view name, std::string_view value, bool index = false) {
  return std::string(1, char(index ? 0x40 : 0x00)) + hpack_int(name.size(), 7, 0) + std::string(name) +
         hpack_int(value.size(), 7, 0) + std::string(value);
}

std::string request_block(std::string_view path = "/") {
  return literal(":method", "GET") + literal(":scheme", "http") + literal(":path", path) +
         literal(":authority", "example.test");
}

std::string headers(uint32_t stream, std::string_view block, uint8_t flags = END_HEADERS) {
  return frame(HEADERS, flags, stream, block);
}
std::string rst(uint32_t stream, uint32_t code) { return frame(RST_STREAM, 0, stream, be32(code)); }
std::string settings() { return frame(SETTINGS, 0, 0, ""); }
std::string ping(uint64_t opaque) { return frame(PING, 0, 0, be32(uint32_t(opaque >> 32)) + be32(uint32_t(opaque))); }
std::string data(uint32_t stream, std::string_view payload, uint8_t flags = 0) {
  return frame(DATA, flags, stream, payload);
}
std::string window_update(uint32_t stream, uint32_t inc) { return frame(WINDOW_UPDATE, 0, stream, be32(inc)); }
std::string client_start() { return std::string(kClientMagic) + settings(); }

struct Frame {
  uint8_t type = 0, flags = 0;
  uint32_t stream = 0;
  std::string payload;
  Headers fields;  // HEADERS: the decoded block
  uint32_t u32(size_t at) const {
    auto b = [&](size_t i) { return uint32_t(uint8_t(payload[at + i])); };
    return b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
  }
};

// The server's output as frames (it must end on a frame boundary).
class FrameReader {
 public:
  std::vector<Frame> read(std::string_view in) {
    std::vector<Frame> out;
    while (!in.empty()) {
      REQUIRE(in.size() >= 9);
      Frame f;
      size_t len = size_t(uint8_t(in[0])) << 16 | size_t(uint8_t(in[1])) << 8 | uint8_t(in[2]);
      f.type = uint8_t(in[3]);
      f.flags = uint8_t(in[4]);
      f.stream = (uint32_t(uint8_t(in[5])) << 24 | uint32_t(uint8_t(in[6])) << 16 |
                  uint32_t(uint8_t(in[7])) << 8 | uint8_t(in[8])) & 0x7fffffff;
      REQUIRE(in.size() >= 9 + len);
      f.payload = std::string(in.substr(9, len));
      in.remove_prefix(9 + len);
      if (f.type == HEADERS) {
        REQUIRE((f.flags & END_HEADERS));  // the session never needs CONTINUATION here
        decode(f);
      }
      out.push_back(std::move(f));
    }
    return out;
  }

 private:
  void decode(Frame& f) {
    for (test::DecodedField& d : decoder_.decode(f.payload)) f.fields.push_back(Header{d.name, d.value});
  }
  test::HpackBlockDecoder decoder_;
};

std::string field(const Headers& h, std::string_view name) {
  const Header* f = find_header(h, name);
  return f ? f->value : std::string("<none>");
}

// ---------------------------------------------------------------- handler

struct StreamLog {
  H2Session::Head head;
  const Header* fields_data = nullptr;  // where the session's field list of the head was
  const char* first_value_data = nullptr;  // and its first field's value
  bool head_seen = false, head_end = false, ended = false, closed = false;
  std::string body;
  Headers trailers;
  int resets = 0;
  uint32_t reset_code = 0;
};

struct Recorder : H2Session::Handler {
  H2Session* session = nullptr;
  bool consume = true;             // consume() body bytes as they arrive
  std::set<int32_t> hold;          // ... except on these streams
  std::map<int32_t, StreamLog> streams;
  std::vector<int32_t> head_order;
  int goaways = 0;
  int32_t goaway_last = -1;
  uint32_t goaway_code = 0;
  int terminal_events = 0;
  // Server: heads the session answered 431 itself (stream, partial :path).
  std::vector<std::pair<int32_t, std::string>> refused_heads;
  // Server side: answer every request head at once (body "ok", not ended).
  bool answer_heads = false;
  // Run last in on_reset and on_closed, while the session reports the end.
  std::function<void(int32_t)> at_end;

  void on_head(int32_t id, H2Session::Head& head, bool end_stream) override {
    StreamLog& s = streams[id];
    CHECK_FALSE(s.head_seen);
    s.head = head;
    s.fields_data = head.fields.data();
    if (!head.fields.empty()) s.first_value_data = head.fields[0].value.data();
    s.head_seen = true;
    s.head_end = end_stream;
    head_order.push_back(id);
    if (answer_heads) {
      H2Session::Head r;
      r.status = 200;
      CHECK(session->submit_response(id, r, false));
      CHECK(session->send_data(id, "ok"));
    }
  }
  void on_data(int32_t id, const uint8_t* p, size_t len) override {
    streams[id].body.append(reinterpret_cast<const char*>(p), len);
    if (consume && !hold.count(id)) session->consume(id, len);
  }
  void on_trailers(int32_t id, Headers& t) override { streams[id].trailers = t; }
  void on_end(int32_t id) override {
    CHECK_FALSE(streams[id].ended);
    streams[id].ended = true;
  }
  void on_reset(int32_t id, uint32_t code) override {
    StreamLog& s = streams[id];
    CHECK_FALSE(s.closed);
    CHECK(s.resets == 0);
    ++s.resets;
    s.reset_code = code;
    ++terminal_events;
    if (at_end) at_end(id);
  }
  void on_closed(int32_t id) override {
    StreamLog& s = streams[id];
    CHECK_FALSE(s.closed);
    CHECK(s.resets == 0);
    s.closed = true;
    ++terminal_events;
    if (at_end) at_end(id);
  }
  void on_head_refused(int32_t id, const H2Session::Head& partial) override {
    CHECK_FALSE(streams.count(id));
    refused_heads.emplace_back(id, partial.path);
  }
  void on_goaway(int32_t last, uint32_t code) override {
    ++goaways;
    goaway_last = last;
    goaway_code = code;
  }
};

// Moves bytes both ways between two sessions until neither has anything to
// send.
void pump_sessions(H2Session& client, H2Session& server, uint64_t now = 0) {
  for (int round = 0; round < 10000; ++round) {
    std::string c, s;
    client.flush(c);
    server.flush(s);
    if (c.empty() && s.empty()) return;
    if (!c.empty()) server.recv(reinterpret_cast<const uint8_t*>(c.data()), c.size(), now);
    if (!s.empty()) client.recv(reinterpret_cast<const uint8_t*>(s.data()), s.size(), now);
  }
  FAIL("the sessions never went quiet");
}

// A client and a server session talking in memory.
struct Pair {
  Recorder crec, srec;
  H2Session client, server;
  uint64_t now = 0;

  explicit Pair(const H2Session::Limits& limits = H2Session::Limits())
      : client(Role::client, &crec, limits), server(Role::server, &srec, limits) {
    crec.session = &client;
    srec.session = &server;
  }

  void pump() { pump_sessions(client, server, now); }
};

H2Session::Head get(std::string path) {
  H2Session::Head h;
  h.method = "GET";
  h.scheme = "http";
  h.authority = "example.test";
  h.path = std::move(path);
  return h;
}

H2Session::Head post(std::string path) {
  H2Session::Head h = get(std::move(path));
  h.method = "POST";
  return h;
}

H2Session::Head status(int code) {
  H2Session::Head h;
  h.status = code;
  return h;
}

// A server session fed attack bytes; its output kept and parsed.
struct Attack {
  Recorder rec;
  H2Session server;
  std::string out;
  FrameReader reader;
  std::vector<Frame> frames;

  explicit Attack(const H2Session::Limits& limits = H2Session::Limits()) : server(Role::server, &rec, limits) {
    rec.session = &server;
  }
  // Feeds bytes; with `read`, the attacker also reads (the session flushes).
  // Returns whether the session goes on.
  bool feed(const std::string& bytes, uint64_t now = 0, bool read = true) {
    bool ok = server.recv(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), now);
    if (!read) return ok;
    take();
    return ok && !server.want_close();
  }
  void take() {
    std::string more;
    server.flush(more);
    out += more;
    for (Frame& f : reader.read(more)) frames.push_back(std::move(f));
  }
  std::optional<uint32_t> goaway() const {
    for (const Frame& f : frames)
      if (f.type == GOAWAY) return f.u32(4);
    return std::nullopt;
  }
  // The last HEADERS frame sent on `stream`, or nullptr.
  const Frame* last_headers(uint32_t stream) const {
    const Frame* found = nullptr;
    for (const Frame& f : frames)
      if (f.type == HEADERS && f.stream == stream) found = &f;
    return found;
  }
  int count(uint8_t type, std::optional<uint32_t> code = std::nullopt) const {
    int n = 0;
    for (const Frame& f : frames)
      if (f.type == type && (!code || f.u32(0) == *code)) ++n;
    return n;
  }
};

}  // namespace

TEST_CASE("h2 request and response with body and trailers, both ways") {
  Pair p;
  H2Session::Head req = post("/svc/Method?x=1");
  req.fields = {{"Content-Type", "application/grpc"}, {"te", "trailers"}, {"Connection", "keep-alive"},
                {"x-multi", "a"}, {"x-multi", "b"}};
  int32_t id = p.client.submit_request(req, false);
  REQUIRE(id == 1);
  CHECK(p.client.send_data(id, "hello "));
  CHECK(p.client.send_data(id, "world"));
  CHECK(p.client.send_trailers(id, {{"X-Checksum", "abc"}}));
  CHECK_FALSE(p.client.send_data(id, "late"));  // our side ended
  p.pump();

  REQUIRE(p.srec.streams.count(1));
  StreamLog& s = p.srec.streams[1];
  CHECK(s.head.method == "POST");
  CHECK(s.head.scheme == "http");
  CHECK(s.head.authority == "example.test");
  CHECK(s.head.path == "/svc/Method?x=1");
  // Names in lower case, order kept, the connection-specific field dropped.
  CHECK(s.head.fields == Headers{{"content-type", "application/grpc"}, {"te", "trailers"},
                                 {"x-multi", "a"}, {"x-multi", "b"}});
  CHECK_FALSE(s.head_end);
  CHECK(s.body == "hello world");
  CHECK(s.trailers == Headers{{"x-checksum", "abc"}});
  CHECK(s.ended);
  CHECK_FALSE(s.closed);  // our response is still to come

  CHECK(p.server.submit_response(id, [] { auto h = status(200); h.fields = {{"content-type", "application/grpc"}}; return h; }(), false));
  CHECK(p.server.send_data(id, std::string(40000, 'r')));  // more than one frame
  CHECK(p.server.send_trailers(id, {{"grpc-status", "0"}, {"grpc-message", "fine"}}));
  p.pump();

  StreamLog& c = p.crec.streams[1];
  CHECK(c.head.status == 200);
  CHECK(c.head.fields == Headers{{"content-type", "application/grpc"}});
  CHECK(c.body == std::string(40000, 'r'));
  CHECK(c.trailers == Headers{{"grpc-status", "0"}, {"grpc-message", "fine"}});
  CHECK(c.ended);
  CHECK(c.closed);
  CHECK(p.srec.streams[1].closed);
  CHECK(p.client.open_streams() == 0);
  CHECK(p.server.open_streams() == 0);
  CHECK_FALSE(p.client.want_close());
  CHECK_FALSE(p.server.want_close());
}

TEST_CASE("h2 a head over the peer's largest frame goes out as HEADERS and CONTINUATION frames, and arrives whole") {
  H2Session::Limits limits;
  limits.max_header_list_bytes = 128 * 1024;
  Pair p(limits);
  p.pump();  // SETTINGS both ways: the largest frame stays 16384
  H2Session::Head req = get("/big");
  req.fields = {{"x-big", std::string(40000, 'b')}, {"x-after", "1"}};
  int32_t id = p.client.submit_request(req, true);
  REQUIRE(id > 0);
  std::string out;
  p.client.flush(out);
  // HEADERS without END_HEADERS, then CONTINUATION frames, none over
  // 16384 bytes, the last with END_HEADERS; END_STREAM on the HEADERS.
  std::vector<std::pair<uint8_t, uint8_t>> frames;  // type, flags
  for (std::string_view in = out; !in.empty();) {
    REQUIRE(in.size() >= 9);
    size_t len = size_t(uint8_t(in[0])) << 16 | size_t(uint8_t(in[1])) << 8 | uint8_t(in[2]);
    CHECK(len <= 16384);
    frames.emplace_back(uint8_t(in[3]), uint8_t(in[4]));
    REQUIRE(in.size() >= 9 + len);
    in.remove_prefix(9 + len);
  }
  REQUIRE(frames.size() == 3);  // 40,000 bytes and more: three frames
  CHECK(frames[0] == std::make_pair(uint8_t(HEADERS), uint8_t(END_STREAM)));
  CHECK(frames[1] == std::make_pair(uint8_t(CONTINUATION), uint8_t(0)));
  CHECK(frames[2] == std::make_pair(uint8_t(CONTINUATION), uint8_t(END_HEADERS)));
  REQUIRE(p.server.recv(reinterpret_cast<const uint8_t*>(out.data()), out.size(), 0));
  p.pump();
  REQUIRE(p.srec.streams.count(id));
  StreamLog& s = p.srec.streams[id];
  CHECK(s.head.path == "/big");
  CHECK(s.head.fields == Headers{{"x-big", std::string(40000, 'b')}, {"x-after", "1"}});
  CHECK(s.head_end);
}

TEST_CASE("h2 server: leave_front_field puts a field ahead of each request head's received ones, and nowhere else") {
  Pair p;
  p.server.leave_front_field();
  H2Session::Head req = post("/a");
  req.fields = {{"x-a", "1"}, {"x-b", "2"}};
  int32_t first = p.client.submit_request(req, false);
  CHECK(p.client.send_trailers(first, {{"x-sum", "9"}}));
  p.pump();
  StreamLog& s = p.srec.streams[first];
  CHECK(s.head.front_field);
  REQUIRE(s.head.fields.size() == 3);
  CHECK(Headers(s.head.fields.begin() + 1, s.head.fields.end()) == Headers{{"x-a", "1"}, {"x-b", "2"}});
  CHECK(s.trailers == Headers{{"x-sum", "9"}});
  CHECK(p.server.submit_response(first, [] { auto h = status(200); h.fields = {{"x-r", "1"}}; return h; }(), true));
  p.pump();
  CHECK_FALSE(p.crec.streams[first].head.front_field);  // the client side's heads have none
  CHECK(p.crec.streams[first].head.fields == Headers{{"x-r", "1"}});

  // The next head may get the first one's list back: its front field is
  // still not a received field.
  req.fields = {{"x-c", "3"}};
  int32_t second = p.client.submit_request(req, true);
  p.pump();
  StreamLog& t = p.srec.streams[second];
  CHECK(t.head.front_field);
  REQUIRE(t.head.fields.size() == 2);
  CHECK(t.head.fields[1] == Header{"x-c", "3"});
  CHECK(t.head.path == "/a");
}

TEST_CASE("h2 field names are lower-cased wherever their capitals are, and dropped fields by every spelling") {
  Pair p;
  H2Session::Head req = get("/names");
  // Capitals at the start, the end, across the 8-byte steps of the check,
  // in a name longer than the small-string buffer; names without any.
  req.fields = {{"X-Forwarded-For", "1"},  {"abcdefgH", "2"},         {"abcdefghI", "3"},
                {"abcdefg-abcdefgZ", "4"}, {"lower-case-only-here", "5"}, {"Z", "6"},
                {"via", "7"},              {"Transfer-Encoding", "chunked"}, {"TE", "gzip"},
                {"Keep-Alive", "1"},       {"PROXY-CONNECTION", "x"},   {"Upgrade", "h2c"}, {"Te", "Trailers"}};
  int32_t id = p.client.submit_request(req, true);
  REQUIRE(id == 1);
  p.pump();
  REQUIRE(p.srec.streams.count(1));
  CHECK(p.srec.streams[1].head.fields == Headers{{"x-forwarded-for", "1"},
                                                 {"abcdefgh", "2"},
                                                 {"abcdefghi", "3"},
                                                 {"abcdefg-abcdefgz", "4"},
                                                 {"lower-case-only-here", "5"},
                                                 {"z", "6"},
                                                 {"via", "7"},
                                                 {"te", "Trailers"}});
}

TEST_CASE("h2 server: an interim 100 before the final head, the client skips it") {
  Pair p;
  int32_t id = p.client.submit_request(post("/upload"), false);
  p.pump();
  REQUIRE(p.srec.streams[id].head_seen);
  CHECK_FALSE(p.server.submit_interim(id, 101));  // never a 101 on HTTP/2
  CHECK_FALSE(p.server.submit_interim(id, 200));  // not interim
  CHECK(p.server.submit_interim(id, 100));
  p.pump();
  CHECK_FALSE(p.crec.streams[id].head_seen);  // 1xx heads do not reach the owner
  CHECK(p.client.send_data(id, "body"));
  CHECK(p.client.end_stream(id));
  p.pump();
  CHECK(p.srec.streams[id].body == "body");
  CHECK(p.server.submit_response(id, status(200), true));
  CHECK_FALSE(p.server.submit_interim(id, 100));  // after the final head
  p.pump();
  CHECK(p.crec.streams[id].head.status == 200);
  CHECK(p.crec.streams[id].closed);

  // On the wire: a HEADERS :status 100 that does not end the stream.
  Attack at;
  REQUIRE(at.feed(client_start()));
  REQUIRE(at.feed(headers(1, request_block())));
  CHECK(at.server.submit_interim(1, 100));
  at.take();
  const Frame* interim = at.last_headers(1);
  REQUIRE(interim);
  CHECK(interim->fields == Headers{{":status", "100"}});
  CHECK_FALSE((interim->flags & END_STREAM));
}

TEST_CASE("h2 head-only request and a response without trailers") {
  Pair p;
  int32_t id = p.client.submit_request(get("/a"), true);
  p.pump();
  CHECK(p.srec.streams[id].head_end);
  CHECK(p.srec.streams[id].ended);
  CHECK(p.server.submit_response(id, status(404), false));
  CHECK(p.server.send_data(id, "nope"));
  CHECK(p.server.end_stream(id));
  p.pump();
  CHECK(p.crec.streams[id].head.status == 404);
  CHECK(p.crec.streams[id].body == "nope");
  CHECK(p.crec.streams[id].trailers.empty());
  CHECK(p.crec.streams[id].closed);
}

TEST_CASE("h2 100 concurrent streams, the 101st is refused until one finishes") {
  Pair p;
  std::vector<int32_t> ids;
  for (int i = 0; i < 100; ++i) {
    int32_t id = p.client.submit_request(get("/" + std::to_string(i)), true);
    REQUIRE(id > 0);
    ids.push_back(id);
  }
  CHECK_FALSE(p.client.can_submit_request());
  CHECK(p.client.submit_request(get("/101"), true) == 0);
  p.pump();
  CHECK(p.srec.head_order.size() == 100);
  CHECK(p.server.open_streams() == 100);
  CHECK(p.client.submit_request(get("/101"), true) == 0);  // still 100 open

  CHECK(p.server.submit_response(ids[42], status(204), true));
  p.pump();
  CHECK(p.crec.streams[ids[42]].closed);
  int32_t id = p.client.submit_request(get("/101"), true);
  CHECK(id == 201);
  CHECK(p.client.submit_request(get("/102"), true) == 0);
  p.pump();
  CHECK(p.srec.streams[id].head.path == "/101");
  CHECK(p.server.stats().streams_opened == 101);
  CHECK(p.srec.terminal_events == 1);
}

TEST_CASE("h2 flow control: a stream nobody consumes stops at its window, another keeps flowing") {
  H2Session::Limits lim;
  lim.stream_window_bytes = 16 * 1024;
  lim.connection_window_bytes = 256 * 1024;
  Pair p(lim);
  const std::string big(100 * 1024, 'x');
  int32_t slow = p.client.submit_request(post("/slow"), false);
  int32_t fast = p.client.submit_request(post("/fast"), false);
  p.srec.hold.insert(slow);
  // SETTINGS first: until the client has them it may send the protocol's
  // initial 65,535 bytes on a stream.
  p.pump();
  for (int32_t id : {slow, fast}) {
    CHECK(p.client.send_data(id, big));
    CHECK(p.client.end_stream(id));
  }
  p.pump();
  CHECK(p.srec.streams[fast].body.size() == big.size());
  CHECK(p.srec.streams[fast].ended);
  CHECK(p.srec.streams[slow].body.size() == lim.stream_window_bytes);  // exactly its window
  CHECK_FALSE(p.srec.streams[slow].ended);
  CHECK(p.client.queued_bytes(slow) == big.size() - lim.stream_window_bytes);
  CHECK(p.client.queued_bytes(fast) == 0);

  // A second fast stream still flows: the stalled one holds no connection window.
  int32_t again = p.client.submit_request(post("/again"), false);
  CHECK(p.client.send_data(again, big));
  CHECK(p.client.end_stream(again));
  p.pump();
  CHECK(p.srec.streams[again].body.size() == big.size());

  // The reader catches up: consume() for what it held reopens the window,
  // and from then on it consumes as bytes arrive.
  p.srec.hold.erase(slow);
  p.server.consume(slow, p.srec.streams[slow].body.size());
  p.pump();
  CHECK(p.srec.streams[slow].body == big);
  CHECK(p.srec.streams[slow].ended);
}

TEST_CASE("h2 framed body bytes are counted for the streams that ask, as the peer's window lets them out") {
  H2Session::Limits lim;
  lim.stream_window_bytes = 16 * 1024;
  Pair p(lim);
  int32_t counted = p.client.submit_request(get("/counted"), true);
  int32_t other = p.client.submit_request(get("/other"), true);
  p.crec.hold.insert(counted);  // the client reads none of it yet
  p.pump();
  const std::string big(40 * 1024, 'b');
  for (int32_t id : {counted, other}) {
    CHECK(p.server.submit_response(id, status(200), false));
    CHECK(p.server.send_data(id, big));
    CHECK(p.server.end_stream(id));
  }
  p.server.count_framed(counted);
  CHECK_FALSE(p.server.has_framed());
  p.pump();
  // The counted stream: exactly the client's window went out; the other
  // stream, all of it, uncounted.
  CHECK(p.crec.streams[other].body == big);
  H2Session::FramedBytes framed = p.server.take_framed();
  size_t total = 0;
  for (auto [id, n] : framed) {
    CHECK(id == counted);
    total += n;
  }
  CHECK(total == lim.stream_window_bytes);
  CHECK(total == big.size() - p.server.queued_bytes(counted));
  CHECK_FALSE(p.server.has_framed());  // taken whole
  // The client takes what it has: the rest goes out and is counted.
  p.crec.hold.erase(counted);
  p.client.consume(counted, p.crec.streams[counted].body.size());
  p.pump();
  CHECK(p.crec.streams[counted].body == big);
  total = 0;
  for (auto [id, n] : p.server.take_framed()) total += id == counted ? n : 0;
  CHECK(total == big.size() - lim.stream_window_bytes);
}

TEST_CASE("h2 client streams are found before nghttp2 opens them, and after, whichever leaves first") {
  Pair p;
  p.pump();  // SETTINGS both ways
  // Submitted in one go, nothing written yet: nghttp2 has opened none of
  // them, and each is still found by its id (owner, queued body).
  std::vector<int32_t> ids;
  int owners[6] = {};
  for (int i = 0; i < 6; ++i) {
    ids.push_back(p.client.submit_request(post("/" + std::to_string(i)), false));
    REQUIRE(ids.back() > 0);
    p.client.set_stream_owner(ids.back(), &owners[i]);
  }
  CHECK(p.client.open_streams() == 6);
  for (int i = 0; i < 6; ++i) {
    CHECK(p.client.stream_owner(ids[i]) == &owners[i]);
    CHECK(p.client.send_data(ids[i], "body " + std::to_string(i)));
    CHECK(p.client.queued_bytes(ids[i]) == 6);
  }
  // Ids never submitted are not found.
  CHECK(p.client.stream_owner(ids.back() + 2) == nullptr);
  CHECK(p.client.stream_owner(2) == nullptr);
  // Written: nghttp2 has them now; the owners still answer, and the
  // streams end one by one in an order of their own.
  p.pump();
  for (int i = 0; i < 6; ++i) CHECK(p.client.stream_owner(ids[i]) == &owners[i]);
  for (int i : {3, 0, 5}) CHECK(p.client.end_stream(ids[i]));
  p.pump();
  for (int i : {3, 0, 5}) {
    CHECK(p.srec.streams[ids[i]].body == "body " + std::to_string(i));
    CHECK(p.srec.streams[ids[i]].ended);
  }
  // Two more while three are open, then the rest end.
  int32_t late = p.client.submit_request(get("/late"), true);
  REQUIRE(late > ids.back());
  for (int i : {1, 2, 4}) CHECK(p.client.end_stream(ids[i]));
  p.pump();
  for (int i : {1, 2, 4}) CHECK(p.srec.streams[ids[i]].body == "body " + std::to_string(i));
  CHECK(p.srec.streams[late].head.path == "/late");
  CHECK(p.client.open_streams() == 7);  // no answers yet: every stream still waits for one
  p.client.close_streams();
  CHECK(p.client.open_streams() == 0);
  for (int32_t id : ids) CHECK(p.crec.streams[id].resets == 1);
  CHECK(p.crec.streams[late].resets == 1);
}

// The server answers each of `ids` (200, body "done"): the client gets them
// all, and with no stream left both sides of a drained connection close.
static void answer_done(Pair& p, std::initializer_list<int32_t> ids) {
  for (int32_t id : ids) {
    CHECK(p.server.submit_response(id, status(200), false));
    CHECK(p.server.send_data(id, "done"));
    CHECK(p.server.end_stream(id));
  }
  p.pump();
  for (int32_t id : ids) {
    CHECK(p.crec.streams[id].body == "done");
    CHECK(p.crec.streams[id].closed);
  }
  CHECK(p.server.want_close());
  CHECK(p.client.want_close());
}

TEST_CASE("h2 GOAWAY drain: open streams finish, new ones are refused") {
  Pair p;
  int32_t a = p.client.submit_request(post("/a"), false);
  int32_t b = p.client.submit_request(post("/b"), false);
  p.pump();
  // One more request is on its way when the server drains.
  int32_t late = p.client.submit_request(get("/late"), true);
  REQUIRE(late == 5);
  std::string in_flight;
  p.client.flush(in_flight);
  p.server.drain();
  p.server.recv(reinterpret_cast<const uint8_t*>(in_flight.data()), in_flight.size(), 0);
  p.pump();

  CHECK(p.crec.goaways == 1);
  CHECK(p.crec.goaway_last == b);  // the last stream the server took
  CHECK(p.crec.goaway_code == H2Session::kNoError);
  CHECK(p.crec.streams[late].reset_code == H2Session::kRefusedStream);  // safe to send elsewhere
  CHECK_FALSE(p.srec.streams.count(late));                             // never reached the server's owner
  CHECK_FALSE(p.client.can_submit_request());
  CHECK(p.client.submit_request(get("/after"), true) == 0);
  CHECK_FALSE(p.server.want_close());  // a and b are still open
  CHECK_FALSE(p.client.want_close());

  for (int32_t id : {a, b}) {
    CHECK(p.client.send_data(id, "body"));
    CHECK(p.client.end_stream(id));
  }
  p.pump();
  for (int32_t id : {a, b}) CHECK(p.srec.streams[id].body == "body");
  answer_done(p, {a, b});
  CHECK(p.server.goaway_code() == H2Session::kNoError);
}

TEST_CASE("h2 drain in two steps: a stream on its way when the first GOAWAY goes is taken") {
  Pair p;
  int32_t a = p.client.submit_request(post("/a"), false);
  p.pump();
  // The client sends one more request before it reads anything the drain writes.
  int32_t late = p.client.submit_request(get("/late"), true);
  std::string in_flight;
  p.client.flush(in_flight);
  CHECK(p.server.announce_drain());
  CHECK_FALSE(p.server.announce_drain());  // once
  CHECK_FALSE(p.client.announce_drain());  // a server's step only
  std::string notice;
  p.server.flush(notice);
  p.server.recv(reinterpret_cast<const uint8_t*>(in_flight.data()), in_flight.size(), 0);
  CHECK(p.srec.streams[late].head_seen);  // taken: the final GOAWAY has not gone
  p.client.recv(reinterpret_cast<const uint8_t*>(notice.data()), notice.size(), 0);
  CHECK(p.crec.goaways == 1);
  CHECK(p.crec.goaway_last == 0x7fffffff);  // the notice: no new streams, none refused
  CHECK(p.crec.goaway_code == H2Session::kNoError);
  CHECK_FALSE(p.client.can_submit_request());
  // The client's answer to the PING brings the final GOAWAY, naming `late`.
  p.pump();
  CHECK(p.crec.goaways == 2);
  CHECK(p.crec.goaway_last == late);
  CHECK(p.crec.goaway_code == H2Session::kNoError);
  CHECK(p.crec.streams[late].resets == 0);
  CHECK_FALSE(p.server.want_close());  // both still open

  CHECK(p.client.send_data(a, "body"));
  CHECK(p.client.end_stream(a));
  p.pump();
  answer_done(p, {a, late});
}

TEST_CASE("h2 drain in two steps: only the answer to its own PING ends the first step") {
  Attack at;
  REQUIRE(at.feed(client_start() + frame(SETTINGS, ACK, 0, "") +
                  headers(1, request_block(), END_HEADERS | END_STREAM)));
  REQUIRE(at.server.announce_drain());
  // An answer made up before the drain's PING is even written changes nothing.
  REQUIRE(at.feed(frame(PING, ACK, 0, "ol-drain"), 0, false));
  at.take();
  std::string drain_ping;
  bool notice_first = false;
  for (const Frame& f : at.frames) {
    if (f.type == GOAWAY) {
      CHECK(f.u32(0) == 0x7fffffff);
      CHECK(f.u32(4) == H2Session::kNoError);
      notice_first = drain_ping.empty();
    }
    if (f.type == PING && !(f.flags & ACK)) drain_ping = f.payload;
  }
  REQUIRE(drain_ping.size() == 8);
  CHECK(notice_first);  // the PING behind the notice: its answer comes after what crossed it
  CHECK(at.count(GOAWAY) == 1);
  // Another PING's answer (a client's own, say) changes nothing.
  REQUIRE(at.feed(frame(PING, ACK, 0, "12345678") + headers(3, request_block("/3"), END_HEADERS | END_STREAM)));
  CHECK(at.count(GOAWAY) == 1);
  CHECK(at.rec.streams[3].head_seen);
  // The drain's own: the final GOAWAY, with the last stream taken.
  REQUIRE(at.feed(frame(PING, ACK, 0, drain_ping)));
  REQUIRE(at.count(GOAWAY) == 2);
  CHECK(at.frames.back().type == GOAWAY);
  CHECK(at.frames.back().u32(0) == 3);
  CHECK(at.frames.back().u32(4) == H2Session::kNoError);
  // A stream above it is not taken (nghttp2 drops it once that GOAWAY is
  // written; the GOAWAY's last stream tells the client it was not
  // processed, safe to retry elsewhere).
  REQUIRE(at.feed(headers(5, request_block("/5"), END_HEADERS | END_STREAM)));
  CHECK_FALSE(at.rec.streams.count(5));
  CHECK_FALSE(at.server.announce_drain());  // a GOAWAY has gone
}

TEST_CASE("h2 RST_STREAM from either side reaches the other's handler") {
  Pair p;
  int32_t a = p.client.submit_request(post("/a"), false);
  int32_t b = p.client.submit_request(post("/b"), false);
  p.pump();
  CHECK(p.client.reset_stream(a, H2Session::kCancel));
  CHECK(p.server.reset_stream(b, H2Session::kInternalError));
  p.pump();
  CHECK(p.srec.streams[a].resets == 1);
  CHECK(p.srec.streams[a].reset_code == H2Session::kCancel);
  CHECK(p.crec.streams[a].closed);  // the one who reset hears on_closed
  CHECK(p.crec.streams[b].resets == 1);
  CHECK(p.crec.streams[b].reset_code == H2Session::kInternalError);
  CHECK(p.srec.streams[b].closed);
  CHECK_FALSE(p.server.send_data(b, "x"));
  CHECK(p.client.open_streams() == 0);
  CHECK(p.server.open_streams() == 0);
  CHECK(p.server.stats().early_resets == 1);  // a: reset by the client before any response
}

TEST_CASE("h2 server: a response head from a field block, checked and filtered as a Head is") {
  Pair p;
  int32_t id = p.client.submit_request(get("/block"), true);
  p.pump();
  REQUIRE(p.srec.streams[id].head_seen);
  H2FieldBlock block;
  block.put("Content-Type", "text/plain");
  block.put("Connection", "close");
  block.put("Transfer-Encoding", "chunked");
  block.put(":path", "/smuggled");
  block.put("X-Request-Id", "r-1");
  block.put("via", "1.1 onelayer");
  CHECK_FALSE(p.server.submit_response(id, 199, block, false));     // not a final status
  CHECK_FALSE(p.server.submit_response(id + 2, 200, block, false));  // no such stream
  CHECK_FALSE(p.client.submit_response(id, 200, block, false));      // a client answers nothing
  CHECK(p.server.submit_response(id, 201, block, false));
  CHECK_FALSE(p.server.submit_response(id, 200, block, true));  // one final head per stream
  CHECK(p.server.send_data(id, "made"));
  CHECK(p.server.end_stream(id));
  p.pump();
  StreamLog& c = p.crec.streams[id];
  CHECK(c.head.status == 201);
  // Lower case, order kept; connection-specific and pseudo-header fields gone.
  CHECK(c.head.fields == Headers{{"content-type", "text/plain"}, {"x-request-id", "r-1"}, {"via", "1.1 onelayer"}});
  CHECK(c.body == "made");
  CHECK(c.closed);

  // Ending the stream with the head: one HEADERS frame with END_STREAM.
  Attack at;
  REQUIRE(at.feed(client_start() + headers(1, request_block())));
  H2FieldBlock none;
  CHECK(at.server.submit_response(1, 204, none, true));
  at.take();
  const Frame* head = at.last_headers(1);
  REQUIRE(head);
  CHECK(head->fields == Headers{{":status", "204"}});
  CHECK((head->flags & END_STREAM));
  CHECK_FALSE(at.server.send_data(1, "late"));
}

TEST_CASE("h2 server: reset_stream_after_head writes a head not yet written, then the RST_STREAM, and no body") {
  Attack at;
  REQUIRE(at.feed(client_start() + headers(1, request_block()) + headers(3, request_block())));
  H2FieldBlock block;
  block.put("x-answered", "yes");
  // Stream 1: head submitted, not written yet. A plain reset_stream() makes
  // nghttp2 drop that head; reset_stream_after_head() waits for it.
  CHECK(at.server.submit_response(1, 200, block, false));
  CHECK(at.server.reset_stream_after_head(1, H2Session::kInternalError));
  CHECK_FALSE(at.server.send_data(1, "late"));
  CHECK_FALSE(at.server.reset_stream_after_head(1, H2Session::kInternalError));  // once
  // Stream 3: the same with a plain reset: no head, the RST alone.
  CHECK(at.server.submit_response(3, 200, block, false));
  CHECK(at.server.reset_stream(3, H2Session::kInternalError));
  at.take();
  std::vector<std::pair<uint8_t, uint32_t>> order;
  for (const Frame& f : at.frames)
    if (f.stream == 1 || f.stream == 3) order.emplace_back(f.type, f.stream);
  CHECK(order == std::vector<std::pair<uint8_t, uint32_t>>{{HEADERS, 1}, {RST_STREAM, 3}, {RST_STREAM, 1}});
  const Frame* head = at.last_headers(1);
  REQUIRE(head);
  CHECK(head->fields == Headers{{":status", "200"}, {"x-answered", "yes"}});
  CHECK_FALSE((head->flags & END_STREAM));
  CHECK(at.count(RST_STREAM, H2Session::kInternalError) == 2);
  CHECK(at.count(DATA) == 0);

  // A head already written: the reset goes at once.
  Attack written;
  REQUIRE(written.feed(client_start() + headers(1, request_block())));
  CHECK(written.server.submit_response(1, 200, block, false));
  written.take();
  REQUIRE(written.last_headers(1));
  CHECK(written.server.reset_stream_after_head(1, H2Session::kInternalError));
  written.take();
  CHECK(written.count(RST_STREAM, H2Session::kInternalError) == 1);
  CHECK(written.count(HEADERS) == 1);
}

TEST_CASE("h2 a complete response before the request ended is followed by RST_STREAM NO_ERROR") {
  Attack at;
  at.rec.answer_heads = false;
  REQUIRE(at.feed(client_start() + headers(1, request_block())));
  REQUIRE(at.rec.head_order.size() == 1);
  CHECK(at.server.submit_response(1, status(413), true));
  at.take();
  CHECK(at.count(RST_STREAM, H2Session::kNoError) == 1);
  CHECK(at.rec.streams[1].closed);
  CHECK(at.server.open_streams() == 0);
}

TEST_CASE("h2 rapid reset: streams opened and cancelled before a response end in GOAWAY") {
  H2Session::Limits lim;  // burst 100, 33 a second
  SUBCASE("a burst") {
    Attack at(lim);
    REQUIRE(at.feed(client_start()));
    bool alive = true;
    int n = 0;
    for (; n < 300 && alive; ++n) alive = at.feed(headers(2 * n + 1, request_block()) + rst(2 * n + 1, 8), 0);
    CHECK_FALSE(alive);
    CHECK(n == 101);
    CHECK(at.goaway() == H2Session::kEnhanceYourCalm);
    CHECK(at.server.want_close());
    CHECK(at.server.close_reason() == "rapid reset");
  }
  SUBCASE("the same cancels at 10 a second are fine") {
    Attack at(lim);
    REQUIRE(at.feed(client_start()));
    for (int n = 0; n < 500; ++n)
      REQUIRE(at.feed(headers(2 * n + 1, request_block()) + rst(2 * n + 1, 8), uint64_t(n) * 100));
    CHECK_FALSE(at.goaway());
    CHECK(at.server.stats().early_resets == 500);
  }
  SUBCASE("cancels after the response head do not count") {
    Attack at(lim);
    at.rec.answer_heads = true;
    REQUIRE(at.feed(client_start()));
    for (int n = 0; n < 500; ++n) REQUIRE(at.feed(headers(2 * n + 1, request_block()) + rst(2 * n + 1, 8), 0));
    CHECK_FALSE(at.goaway());
    CHECK(at.server.stats().early_resets == 0);
  }
}

TEST_CASE("h2 CONTINUATION flood ends in GOAWAY, eight are allowed") {
  auto attack = [](int continuations, std::string_view each) {
    auto at = std::make_unique<Attack>();
    std::string bytes = client_start() + headers(1, request_block(), 0);
    for (int i = 0; i < continuations; ++i)
      bytes += frame(CONTINUATION, i + 1 == continuations ? END_HEADERS : 0, 1, each);
    at->feed(bytes);
    return at;
  };
  auto ok = attack(8, literal("x-c", "v"));
  CHECK_FALSE(ok->goaway());
  CHECK(ok->rec.head_order.size() == 1);
  CHECK(ok->rec.streams[1].head.fields.size() == 8);

  auto flood = attack(1000, literal("x-c", "v"));
  CHECK(flood->goaway() == H2Session::kEnhanceYourCalm);
  CHECK(flood->rec.head_order.empty());
  CHECK(flood->server.want_close());

  auto empty = attack(1000, "");  // empty CONTINUATION frames
  CHECK(empty->goaway() == H2Session::kEnhanceYourCalm);
  CHECK(empty->server.want_close());
}

// Received header blocks are taken out of the frames and decoded by
// onelayer's own HPACK decoder (H2HeaderBlockExtractor, HpackDecoder);
// nghttp2 sees the frames with empty blocks.
TEST_CASE("h2 padded, prioritized heads split over CONTINUATIONs arrive whole, fed a byte at a time") {
  constexpr uint8_t kPadded = 0x8, kPriority = 0x20;
  // Stream 1: x-a: one enters the table (incremental indexing) in the
  // second CONTINUATION; stream 3 names it by index only (62).
  std::string first = literal(":method", "GET") + literal(":scheme", "http");
  std::string second = literal(":path", "/one") + literal(":authority", "example.test");
  std::string third = literal("x-a", "one", true);
  std::string padded = std::string(1, '\3') + be32(0) + std::string(1, '\x0f') + first + std::string(3, '\0');
  std::string bytes = client_start() + frame(HEADERS, END_STREAM | kPadded | kPriority, 1, padded) +
                      frame(CONTINUATION, 0, 1, second) + frame(CONTINUATION, END_HEADERS, 1, third) +
                      headers(3, request_block("/three") + "\xbe", END_HEADERS | END_STREAM);
  Attack at;
  for (char c : bytes) REQUIRE(at.feed(std::string(1, c)));
  CHECK_FALSE(at.goaway());
  REQUIRE(at.rec.head_order == std::vector<int32_t>{1, 3});
  CHECK(at.rec.streams[1].head.path == "/one");
  CHECK(at.rec.streams[1].head_end);
  CHECK(field(at.rec.streams[1].head.fields, "x-a") == "one");
  CHECK(at.rec.streams[3].head.path == "/three");
  CHECK(field(at.rec.streams[3].head.fields, "x-a") == "one");
}

TEST_CASE("h2 the block of a HEADERS frame nghttp2 refuses is still decoded: the table stays in step") {
  H2Session::Limits limits;
  limits.max_concurrent_streams = 1;
  Attack at(limits);
  REQUIRE(at.feed(client_start()));
  REQUIRE(at.feed(headers(1, request_block(), END_HEADERS)));  // open: the one stream allowed
  // Refused (over the limit, before our SETTINGS are acknowledged), and its
  // block enters x-seen: three into the table.
  REQUIRE(at.feed(headers(3, request_block("/3") + literal("x-seen", "three", true), END_HEADERS | END_STREAM)));
  CHECK(at.count(RST_STREAM, H2Session::kRefusedStream) == 1);
  REQUIRE(at.feed(rst(1, H2Session::kCancel)));
  REQUIRE(at.feed(headers(5, request_block("/5") + "\xbe", END_HEADERS | END_STREAM)));  // 62: x-seen: three
  CHECK_FALSE(at.goaway());
  REQUIRE(at.rec.streams.count(5) == 1);
  CHECK(at.rec.streams[5].head.path == "/5");
  CHECK(field(at.rec.streams[5].head.fields, "x-seen") == "three");
  CHECK(at.rec.streams.count(3) == 0);
}

TEST_CASE("h2 a malformed header block ends the connection with COMPRESSION_ERROR, a bad frame with its code") {
  auto ends_with = [](const std::string& bytes) {
    Attack at;
    REQUIRE(at.feed(client_start()));
    CHECK_FALSE(at.feed(bytes));
    CHECK(at.rec.head_order.empty());
    return at.goaway().value_or(0);
  };
  CHECK(ends_with(headers(1, request_block() + "\xff\xff\xff\xff\xff\xff\x0f")) == H2Session::kCompressionError);
  CHECK(ends_with(headers(1, request_block() + "\xc0")) == H2Session::kCompressionError);  // index 64: no such entry
  CHECK(ends_with(headers(1, std::string(1, '\x80') + request_block())) == H2Session::kCompressionError);  // index 0
  CHECK(ends_with(headers(1, request_block(), 0) + data(1, "x")) == H2Session::kProtocolError);  // inside a block
  CHECK(ends_with(headers(1, std::string(16385, 'x'))) == 0x6);  // FRAME_SIZE_ERROR
  CHECK(ends_with(frame(5, END_HEADERS, 1, be32(2) + request_block())) == H2Session::kProtocolError);  // PUSH_PROMISE
}

TEST_CASE("h2 SETTINGS and PING floods: ACKs that pile up unread end in GOAWAY") {
  for (bool use_ping : {false, true}) {
    CAPTURE(use_ping);
    auto control = [&](int i) { return use_ping ? ping(uint64_t(i)) : settings(); };
    Attack reader;  // flushes after every 100 frames: the ACKs go out, nothing piles up
    REQUIRE(reader.feed(client_start()));
    for (int batch = 0; batch < 30; ++batch) {
      std::string bytes;
      for (int i = 0; i < 100; ++i) bytes += control(i);
      REQUIRE(reader.feed(bytes));
    }
    CHECK_FALSE(reader.goaway());
    CHECK(reader.count(use_ping ? PING : SETTINGS) >= 3000);

    Attack flood;  // never flushes while it sends
    bool alive = flood.feed(client_start(), 0, false);
    for (int batch = 0; batch < 30 && alive; ++batch) {
      std::string bytes;
      for (int i = 0; i < 100; ++i) bytes += control(i);
      alive = flood.feed(bytes, 0, false);
    }
    CHECK_FALSE(alive);
    flood.take();
    CHECK(flood.goaway() == H2Session::kEnhanceYourCalm);
    CHECK(flood.server.want_close());
    CHECK(flood.out.size() < 64 * 1024);  // what is written on the way out is bounded too
  }
}

TEST_CASE("h2 a SETTINGS frame with too many entries ends in GOAWAY") {
  Attack at;
  std::string entries;
  for (int i = 0; i < 40; ++i) entries += std::string{0, 3} + be32(100);  // MAX_CONCURRENT_STREAMS
  at.feed(std::string(kClientMagic) + frame(SETTINGS, 0, 0, entries));
  CHECK(at.goaway() == H2Session::kEnhanceYourCalm);
  CHECK(at.server.want_close());
}

TEST_CASE("h2 oversized header list: the stream is refused with 431, a repeat offender gets GOAWAY") {
  Attack at;  // max_header_list_bytes 16 KiB
  REQUIRE(at.feed(client_start()));
  // Just under the limit: delivered.
  std::string fits = request_block() + literal("x-big", std::string(15000, 'a'));
  REQUIRE(at.feed(headers(1, fits, END_HEADERS | END_STREAM)));
  CHECK(at.rec.streams[1].head_seen);

  std::string over = request_block() + literal("x-big", std::string(17000, 'a'));
  REQUIRE(at.feed(headers(3, over.substr(0, 16000), 0) + frame(CONTINUATION, END_HEADERS, 3, over.substr(16000))));
  CHECK_FALSE(at.rec.streams.count(3));  // the owner never sees it
  const Frame* answer = nullptr;
  for (const Frame& f : at.frames)
    if (f.type == HEADERS && f.stream == 3) answer = &f;
  REQUIRE(answer);
  CHECK(field(answer->fields, ":status") == "431");
  CHECK(field(answer->fields, "x-onelayer-error") == "headers_too_large");
  CHECK((answer->flags & END_STREAM));
  // The owner is told once, with what was decoded before the limit.
  CHECK(at.rec.refused_heads == std::vector<std::pair<int32_t, std::string>>{{3, "/"}});
  CHECK(at.count(RST_STREAM, H2Session::kNoError) == 1);  // the request had not ended
  // The refused request's body is taken and dropped (its window given back).
  REQUIRE(at.feed(data(3, std::string(1000, 'b'), END_STREAM)));
  CHECK(at.server.stats().oversized_heads == 1);

  REQUIRE(at.feed(headers(5, over.substr(0, 16000), END_STREAM) + frame(CONTINUATION, END_HEADERS, 5, over.substr(16000))));
  CHECK_FALSE(at.goaway());
  CHECK_FALSE(at.feed(headers(7, over.substr(0, 16000), END_STREAM) + frame(CONTINUATION, END_HEADERS, 7, over.substr(16000))));
  CHECK(at.goaway() == H2Session::kEnhanceYourCalm);
  CHECK(at.server.stats().oversized_heads == 3);
}

TEST_CASE("h2 HPACK bomb: a small block that decodes past the hard cap ends in GOAWAY") {
  Attack at;
  REQUIRE(at.feed(client_start()));
  // One 4000-byte field enters the dynamic table (index 62); 100 one-byte
  // references to it decode to 400 KB.
  std::string block = request_block() + literal("x-bomb", std::string(4000, 'z'), true);
  for (int i = 0; i < 100; ++i) block += char(0x80 | 62);
  CHECK(block.size() < 4300);
  CHECK_FALSE(at.feed(headers(1, block, END_HEADERS | END_STREAM)));
  CHECK(at.goaway() == H2Session::kEnhanceYourCalm);
  CHECK(at.rec.head_order.empty());
  CHECK(at.server.close_reason() == "header list over the hard cap (HPACK bomb)");
}

TEST_CASE("h2 empty DATA frames without END_STREAM: a flood ends in GOAWAY") {
  SUBCASE("eleven in a row") {
    Attack at;
    REQUIRE(at.feed(client_start() + headers(1, request_block())));
    std::string bytes;
    for (int i = 0; i < 11; ++i) bytes += data(1, "");
    CHECK_FALSE(at.feed(bytes));
    CHECK(at.goaway() == H2Session::kEnhanceYourCalm);
    CHECK(at.rec.streams[1].resets == 1);  // the owner hears the stream is gone
    CHECK(at.rec.streams[1].reset_code == H2Session::kEnhanceYourCalm);
  }
  SUBCASE("ten, a byte, ten: fine") {
    Attack at;
    REQUIRE(at.feed(client_start() + headers(1, request_block())));
    std::string bytes;
    for (int i = 0; i < 10; ++i) bytes += data(1, "");
    bytes += data(1, "x");
    for (int i = 0; i < 10; ++i) bytes += data(1, "");
    CHECK(at.feed(bytes + data(1, "", END_STREAM)));
    CHECK_FALSE(at.goaway());
    CHECK(at.rec.streams[1].body == "x");
    CHECK(at.rec.streams[1].ended);
  }
}

TEST_CASE("h2 zero-increment WINDOW_UPDATE: GOAWAY PROTOCOL_ERROR") {
  for (uint32_t stream : {0u, 1u}) {  // nghttp2 makes both a connection error
    CAPTURE(stream);
    Attack at;
    CHECK_FALSE(at.feed(client_start() + headers(1, request_block()) + window_update(stream, 0)));
    CHECK(at.goaway() == H2Session::kProtocolError);
    CHECK(at.server.want_close());
    CHECK(at.rec.streams[1].reset_code == H2Session::kProtocolError);  // the open stream ends with it
  }
}

TEST_CASE("h2 stream errors are counted: the 21st ends the connection with PROTOCOL_ERROR") {
  Attack at;
  REQUIRE(at.feed(client_start()));
  // Malformed requests (no :path): each is a stream error, RST_STREAM PROTOCOL_ERROR.
  std::string bad = literal(":method", "GET") + literal(":scheme", "http") + literal(":authority", "x");
  for (int n = 0; n < 20; ++n) REQUIRE(at.feed(headers(2 * n + 1, bad, END_HEADERS | END_STREAM)));
  CHECK(at.count(RST_STREAM, H2Session::kProtocolError) == 20);
  CHECK(at.rec.head_order.empty());
  CHECK_FALSE(at.goaway());
  CHECK_FALSE(at.feed(headers(41, bad, END_HEADERS | END_STREAM)));
  CHECK(at.goaway() == H2Session::kProtocolError);
  CHECK(at.server.stats().stream_errors == 21);
}

TEST_CASE("h2 max concurrent streams enforced on a raw client") {
  Attack at;
  std::string bytes = client_start();  // our SETTINGS not acknowledged yet
  for (int n = 0; n < 101; ++n) bytes += headers(2 * n + 1, request_block());
  REQUIRE(at.feed(bytes));
  CHECK(at.rec.head_order.size() == 100);
  CHECK(at.count(RST_STREAM, H2Session::kRefusedStream) == 1);
  CHECK_FALSE(at.goaway());
  // With our SETTINGS acknowledged, going over is a connection error.
  CHECK_FALSE(at.feed(frame(SETTINGS, ACK, 0, "") + headers(203, request_block())));
  CHECK(at.goaway() == H2Session::kProtocolError);
}

TEST_CASE("h2 not HTTP/2 at all: GOAWAY PROTOCOL_ERROR") {
  Attack at;
  CHECK_FALSE(at.feed("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  CHECK(at.goaway() == H2Session::kProtocolError);
  CHECK(at.server.want_close());
}

TEST_CASE("h2 close_streams: a lost connection resets every open stream once") {
  Pair p;
  int32_t a = p.client.submit_request(post("/a"), false);
  int32_t b = p.client.submit_request(post("/b"), false);
  p.pump();
  p.client.close_streams(H2Session::kCancel);
  CHECK(p.crec.streams[a].resets == 1);
  CHECK(p.crec.streams[b].resets == 1);
  CHECK(p.crec.streams[a].reset_code == H2Session::kCancel);
  CHECK(p.client.open_streams() == 0);
  p.pump();  // nothing more reaches the handler
  CHECK(p.crec.terminal_events == 2);
}

TEST_CASE("h2 client: an oversized response head resets the stream") {
  Pair p;
  int32_t big = p.client.submit_request(get("/big"), true);
  int32_t ok = p.client.submit_request(get("/ok"), true);
  p.pump();
  H2Session::Head huge = status(200);
  huge.fields = {{"x-big", std::string(20000, 'h')}};
  CHECK(p.server.submit_response(big, huge, true));
  CHECK(p.server.submit_response(ok, status(200), true));
  p.pump();
  CHECK_FALSE(p.crec.streams[big].head_seen);
  CHECK(p.crec.streams[big].resets == 1);
  CHECK(p.crec.streams[big].reset_code == H2Session::kEnhanceYourCalm);
  CHECK(p.client.stats().oversized_heads == 1);
  CHECK(p.crec.streams[ok].head.status == 200);
  CHECK(p.crec.streams[ok].closed);
}

// A client session alone with one GET submitted and written; a test feeds
// it the server's bytes built by hand.
struct LoneClient {
  Recorder rec;
  H2Session client{Role::client, &rec};
  int32_t id = 0;
  explicit LoneClient(std::string path) {
    rec.session = &client;
    id = client.submit_request(get(std::move(path)), true);
    std::string sent;
    client.flush(sent);
  }
  bool feed(const std::string& in) { return client.recv(reinterpret_cast<const uint8_t*>(in.data()), in.size(), 0); }
};

// `:status` with a literal value (its name is static index 8).
std::string status_literal(std::string_view code) {
  return std::string(1, char(0x08)) + hpack_int(code.size(), 7, 0) + std::string(code);
}

TEST_CASE("h2 client: 1xx heads are skipped, the final head is delivered") {
  LoneClient lone("/early-hints");
  Recorder& rec = lone.rec;
  int32_t id = lone.id;
  // SETTINGS, 103, then 200 with END_STREAM (static index 8 with its value).
  std::string hints = status_literal("103") + literal("link", "</a.css>");
  std::string in = settings() + frame(SETTINGS, ACK, 0, "") + headers(id, hints) +
                   headers(id, std::string(1, char(0x88)), END_HEADERS | END_STREAM);
  REQUIRE(lone.feed(in));
  CHECK(rec.head_order.size() == 1);
  CHECK(rec.streams[id].head.status == 200);
  CHECK(rec.streams[id].head.fields.empty());  // nothing of the 103 leaks into it
  CHECK(rec.streams[id].ended);
  CHECK(rec.streams[id].closed);
}

TEST_CASE("h2 client: a request that never went out still ends once") {
  SUBCASE("reset by the owner before it was written") {
    Pair p;
    int32_t id = p.client.submit_request(post("/x"), false);
    CHECK(p.client.reset_stream(id, H2Session::kCancel));
    p.pump();
    CHECK(p.crec.streams[id].closed);
    CHECK(p.client.open_streams() == 0);
    CHECK(p.srec.head_order.empty());
  }
  SUBCASE("a GOAWAY arrived between submit and write") {
    Pair p;
    p.pump();
    p.server.drain();
    std::string goaway;
    p.server.flush(goaway);
    int32_t id = p.client.submit_request(get("/x"), true);
    REQUIRE(id > 0);
    REQUIRE(p.client.recv(reinterpret_cast<const uint8_t*>(goaway.data()), goaway.size(), 0));
    p.pump();
    CHECK(p.crec.streams[id].resets == 1);
    CHECK(p.crec.streams[id].reset_code == H2Session::kRefusedStream);
    CHECK(p.client.open_streams() == 0);
    CHECK(p.srec.head_order.empty());
    CHECK(p.client.want_close());
  }
}

TEST_CASE("h2 stream owner: set on a stream, found by id, still there while its end is reported, gone after") {
  struct OwnerCheck : Recorder {
    H2Session* s = nullptr;
    void* seen_at_end = nullptr;
    void on_reset(int32_t stream, uint32_t code) override {
      seen_at_end = s->stream_owner(stream);
      Recorder::on_reset(stream, code);
    }
    void on_closed(int32_t stream) override {
      seen_at_end = s->stream_owner(stream);
      Recorder::on_closed(stream);
    }
  };
  OwnerCheck crec;
  Recorder srec;
  H2Session client(Role::client, &crec), server(Role::server, &srec);
  crec.s = &client;
  crec.session = &client;
  srec.session = &server;
  auto pump = [&] { pump_sessions(client, server); };
  int owner_a = 0, owner_b = 0;
  int32_t a = client.submit_request(get("/a"), true);
  int32_t b = client.submit_request(get("/b"), true);
  REQUIRE((a > 0 && b > 0));
  CHECK(client.stream_owner(a) == nullptr);
  client.set_stream_owner(a, &owner_a);
  client.set_stream_owner(b, &owner_b);
  CHECK(client.stream_owner(a) == &owner_a);  // before nghttp2 opened it
  pump();
  CHECK(client.stream_owner(b) == &owner_b);  // after
  // The server resets a: its owner is still known while on_reset runs.
  CHECK(server.reset_stream(a, H2Session::kInternalError));
  pump();
  CHECK(crec.seen_at_end == &owner_a);
  CHECK(client.stream_owner(a) == nullptr);
  // b ends cleanly; an owner cleared before the end is not reported.
  client.set_stream_owner(b, nullptr);
  CHECK(server.submit_response(b, status(200), true));
  pump();
  CHECK(crec.seen_at_end == nullptr);
  CHECK(client.stream_owner(b) == nullptr);
  CHECK(client.stream_owner(999) == nullptr);
}

TEST_CASE("h2 a stream looked up by its handler while its end is reported is not found after it, nor by a late frame") {
  // The handler clears the owner (as a connection burying its stream
  // does) while nghttp2 still has the stream: a lookup then must not
  // leave the freed stream remembered for the next frame of that id.
  Pair p;
  p.srec.at_end = [&](int32_t stream) { p.server.set_stream_owner(stream, nullptr); };
  int owner = 0;
  int32_t a = p.client.submit_request(get("/a"), true);
  REQUIRE(a > 0);
  p.pump();
  p.server.set_stream_owner(a, &owner);
  CHECK(p.server.stream_owner(a) == &owner);
  CHECK(p.server.submit_response(a, status(200), true));
  p.pump();
  CHECK(p.crec.streams[a].ended);
  CHECK(p.srec.streams[a].closed);
  // Gone: setting an owner finds nothing to set it on.
  p.server.set_stream_owner(a, &owner);
  CHECK(p.server.stream_owner(a) == nullptr);
  CHECK(p.server.queued_bytes(a) == 0);
  // A RST_STREAM for the closed stream reaches the session after it.
  uint8_t rst[] = {0, 0, 4, NGHTTP2_RST_STREAM, 0, 0, 0, 0, static_cast<uint8_t>(a), 0, 0, 0, NGHTTP2_CANCEL};
  CHECK(p.server.recv(rst, sizeof rst, 0));
  CHECK(p.server.stream_owner(a) == nullptr);
}

TEST_CASE("h2 client: a :status below 100 is no head at all: the stream is reset, nothing of it is delivered") {
  // nghttp2 takes 000-099 for a final head (they are not 1xx) and lets DATA
  // follow; the session must not skip it as an interim head and then hand
  // on the body of a response that never had a head.
  for (std::string_view code : {"051", "000", "099"}) {
    CAPTURE(code);
    LoneClient lone("/odd");
    Recorder& rec = lone.rec;
    int32_t id = lone.id;
    std::string in = settings() + frame(SETTINGS, ACK, 0, "") + headers(id, status_literal(code)) +
                     data(id, "body") + headers(id, literal("grpc-status", "0"), END_HEADERS | END_STREAM);
    lone.feed(in);
    std::string out;
    lone.client.flush(out);
    CHECK_FALSE(rec.streams[id].head_seen);
    CHECK(rec.streams[id].body.empty());
    CHECK(rec.streams[id].trailers.empty());
    CHECK_FALSE(rec.streams[id].ended);
    CHECK(rec.streams[id].resets == 1);
    CHECK(rec.streams[id].reset_code == H2Session::kProtocolError);
    FrameReader reader;
    bool rst_sent = false;
    for (const Frame& f : reader.read(out))
      if (f.type == RST_STREAM && f.stream == uint32_t(id)) rst_sent = f.u32(0) == H2Session::kProtocolError;
    CHECK(rst_sent);
    CHECK(lone.client.open_streams() == 0);
  }
}

namespace {

// Keeps where each head's field list lives, a copy of its fields and where
// the first one's value lives, and leaves the list (moved back, as the
// upstream side does) for the session to keep.
struct ListKeeper : onelayer::test::H2HandlerStub {
  std::vector<const Header*> lists;
  std::vector<Headers> heads;
  std::vector<const char*> first_values;
  bool all_terminated = true;  // every name and value as received ends in a NUL right after it
  void on_head(int32_t, H2Session::Head& head, bool) override {
    Headers taken = std::move(head.fields);
    for (const Header& f : taken) {
      if (std::strlen(f.name.c_str()) != f.name.size() || std::strlen(f.value.c_str()) != f.value.size()) {
        all_terminated = false;
      }
    }
    lists.push_back(taken.data());
    heads.push_back(taken);
    first_values.push_back(taken.empty() ? nullptr : taken[0].value.data());
    head.fields = std::move(taken);
  }
};

// A client whose heads go to a ListKeeper, and a server answering it.
struct KeeperPair {
  ListKeeper keeper;
  Recorder server_side;
  H2Session client{Role::client, &keeper};
  H2Session server{Role::server, &server_side};
  KeeperPair() { server_side.session = &server; }
  // A request to `path` answered 200 with `fields`.
  void exchange(const std::string& path, const Headers& fields) {
    int32_t id = client.submit_request(get(path), true);
    REQUIRE(id > 0);
    pump_sessions(client, server);
    H2Session::Head r = status(200);
    r.fields = fields;
    REQUIRE(server.submit_response(id, r, true));
    pump_sessions(client, server);
  }
};

}  // namespace

TEST_CASE("h2 a field list left in the head after on_head serves a later head, without a new allocation") {
  KeeperPair p;
  ListKeeper& keeper = p.keeper;
  std::vector<Headers> hogs;  // take any freed list of that size, so a reuse cannot be the heap's
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 8; ++k) hogs.emplace_back().reserve(12);
    p.exchange("/" + std::to_string(i), {{"x-answer", std::to_string(i)}});
  }
  REQUIRE(keeper.lists.size() == 2);
  CHECK(keeper.lists[0] != nullptr);
  CHECK(keeper.lists[1] == keeper.lists[0]);  // the same list, kept between the heads
}

TEST_CASE("h2 heads from a field block: what the caller had may change before the frame goes out") {
  Pair p;
  std::string method = "POST", scheme = "http", authority = "api.test", path = "/orders";
  H2FieldBlock block;
  block.put("x-one", "1");
  block.put("x-two", "2");
  int32_t id = p.client.submit_request({method, scheme, authority, path}, block, true);
  REQUIRE(id > 0);
  // Before any flush: the caller reuses its strings and its block.
  method.assign("GARBAGE");
  path.assign("/garbage/garbage/garbage/garbage");
  authority.assign(64, 'z');
  block.clear();
  block.put("x-three", std::string(300, 'g'));
  p.pump();
  REQUIRE(p.srec.streams.count(id) == 1);
  const H2Session::Head& got = p.srec.streams[id].head;
  CHECK(got.method == "POST");
  CHECK(got.path == "/orders");
  CHECK(got.authority == "api.test");
  CHECK(got.fields == Headers{{"x-one", "1"}, {"x-two", "2"}});

  H2FieldBlock answer;
  answer.put("x-answer", "yes");
  REQUIRE(p.server.submit_response(id, 201, answer, true));
  answer.clear();
  answer.put("x-answer", std::string(500, 'n'));
  p.pump();
  CHECK(p.crec.streams[id].head.status == 201);
  CHECK(p.crec.streams[id].head.fields == Headers{{"x-answer", "yes"}});
  CHECK(p.crec.streams[id].closed);
}

TEST_CASE("h2 heads from a field block the session takes: the block comes back empty to build the next in, a refused one as it was") {
  // The taking submits trade buffers with a held head instead of copying:
  // what the caller builds next in its block must not reach a head not
  // written yet, nor a head held before show in the block.
  Pair p;
  H2FieldBlock block;
  std::vector<int32_t> ids;
  for (int i = 0; i < 3; ++i) {
    block.put("x-n", std::string(40, char('a' + i)));
    int32_t id = p.client.submit_request({"POST", "http", "api.test", "/orders"}, std::move(block), true);
    REQUIRE(id > 0);
    CHECK(block.empty());  // NOLINT(bugprone-use-after-move): taken, the block is empty
    CHECK(block.bytes() == 0);
    ids.push_back(id);
  }
  p.pump();
  for (int i = 0; i < 3; ++i) {
    REQUIRE(p.srec.streams.count(ids[i]) == 1);
    CHECK(p.srec.streams[ids[i]].head.fields == Headers{{"x-n", std::string(40, char('a' + i))}});
  }
  // The requests' held heads are spare now: the block gets their buffers.
  for (int i = 0; i < 3; ++i) {
    block.put("x-answer", std::to_string(i));
    REQUIRE(p.server.submit_response(ids[i], 200, std::move(block), true));
    CHECK(block.empty());  // NOLINT(bugprone-use-after-move)
    CHECK(block.bytes() == 0);
  }
  p.pump();
  for (int i = 0; i < 3; ++i) {
    CHECK(p.crec.streams[ids[i]].head.fields == Headers{{"x-answer", std::to_string(i)}});
    CHECK(p.crec.streams[ids[i]].closed);
  }

  block.put("x-kept", "1");
  CHECK_FALSE(p.server.submit_response(ids[0], 200, std::move(block), true));  // answered already
  CHECK(block.headers() == Headers{{"x-kept", "1"}});  // NOLINT(bugprone-use-after-move)
  p.client.terminate(H2Session::kNoError, "test");
  CHECK(p.client.submit_request({"POST", "http", "api.test", "/orders"}, std::move(block), true) == 0);
  CHECK(block.headers() == Headers{{"x-kept", "1"}});  // NOLINT(bugprone-use-after-move)
}

TEST_CASE("h2 request lines of every length in a row go out exactly (the held heads' strings are reused)") {
  Pair p;
  struct Line {
    std::string method, authority, path;
  };
  const std::vector<Line> lines = {
      {"POST", "api.test", "/orders/and/a/path/over/the/inline/room"},
      {"GET", "a.test", "/"},
      {"DELETE", "a-much-longer-authority.example.test:8443", "/x"},
      {"GET", "b.test", "/another/path/over/the/inline/room/and/longer"},
      {"PUT", "api.test", "/o"},
  };
  for (const Line& l : lines) {
    CAPTURE(l.path);
    H2FieldBlock block;
    block.put("x-n", l.path);
    int32_t id = p.client.submit_request({l.method, "http", l.authority, l.path}, block, true);
    REQUIRE(id > 0);
    p.pump();
    REQUIRE(p.srec.streams.count(id) == 1);
    const H2Session::Head& got = p.srec.streams[id].head;
    CHECK(got.method == l.method);
    CHECK(got.scheme == "http");
    CHECK(got.authority == l.authority);
    CHECK(got.path == l.path);
    CHECK(got.fields == Headers{{"x-n", l.path}});
    // The answer's held head goes back to the same spares the next request takes.
    H2FieldBlock answer;
    answer.put("x-answer", "yes");
    REQUIRE(p.server.submit_response(id, 200, answer, true));
    p.pump();
  }
}

TEST_CASE("h2 a kept field list keeps its fields' strings, and a later head shows only its own fields") {
  KeeperPair p;
  ListKeeper& keeper = p.keeper;
  const std::string date = "Tue, 01 Dec 2026 19:40:00 GMT";  // over std::string's inline room
  const std::vector<Headers> answers = {
      {{"date", date}, {"x-one", "1"}, {"x-two", "2"}},
      {{"date", date}},
      {{"date", date}, {"x-three", "3"}},
  };
  std::vector<std::string> hogs;  // take any freed string of that size, so a reuse cannot be the heap's
  for (size_t i = 0; i < answers.size(); ++i) {
    for (int k = 0; k < 8; ++k) hogs.emplace_back(date.size(), 'h');
    p.exchange("/" + std::to_string(i), answers[i]);
  }
  REQUIRE(keeper.heads.size() == answers.size());
  for (size_t i = 0; i < answers.size(); ++i) CHECK(keeper.heads[i] == answers[i]);
  CHECK(keeper.first_values[1] == keeper.first_values[0]);
  CHECK(keeper.first_values[2] == keeper.first_values[0]);
}

TEST_CASE("h2 a kept field's strings take shorter, empty and longer names and values exactly") {
  KeeperPair p;
  ListKeeper& keeper = p.keeper;
  const std::vector<Headers> answers = {
      {{"x-first-of-a-long-name", "a value over std::string's inline room"}, {"x-b", "22"}},
      {{"x-a", "1"}, {"x-b", ""}},
      {{"x-first-of-a-long-name", "shorter"}, {"x-b", "a value longer than any this field had before"}},
      {{"x-a", "a value over std::string's inline room, and longer still"}, {"x-bb", "2"}},
  };
  for (size_t i = 0; i < answers.size(); ++i) p.exchange("/" + std::to_string(i), answers[i]);
  REQUIRE(keeper.heads.size() == answers.size());
  for (size_t i = 0; i < answers.size(); ++i) CHECK(keeper.heads[i] == answers[i]);
  CHECK(keeper.all_terminated);
}

TEST_CASE("h2 a field list given back by its owner serves the next request head, one holding too much is left") {
  Pair p;
  Headers small = {{"user-agent", "a client of twenty-odd bytes"}};
  const Header* kept = small.data();
  const size_t spares = H2Session::spare_field_lists();
  H2Session::keep_field_list(small);
  CHECK(small.empty());  // moved into the spares
  CHECK(H2Session::spare_field_lists() == spares + 1);

  Headers big = {{"x-big", std::string(4096, 'b')}};
  H2Session::keep_field_list(big);
  CHECK(big.size() == 1);  // left to its owner
  CHECK(H2Session::spare_field_lists() == spares + 1);

  H2Session::Head req = get("/");
  req.fields = {{"x-request", "1"}};
  int32_t id = p.client.submit_request(req, true);
  REQUIRE(id > 0);
  p.pump();
  REQUIRE(p.srec.streams.count(id));
  CHECK(p.srec.streams[id].head.fields == Headers{{"x-request", "1"}});
  CHECK(p.srec.streams[id].fields_data == kept);
}

TEST_CASE("h2 a received value that does not fit the leftover in its place takes a later leftover with the room") {
  Pair p;
  const std::string agent = "a client of twenty-odd bytes";  // over std::string's inline room
  Headers kept = {{"host", "api.test"}, {"user-agent", agent}};  // Host first, as the downstream hands it back
  const char* agent_room = kept[1].value.data();
  H2Session::keep_field_list(kept);
  REQUIRE(kept.empty());

  H2Session::Head req = get("/");
  req.fields = {{"user-agent", agent}, {"x-short", "1"}};
  int32_t id = p.client.submit_request(req, true);
  REQUIRE(id > 0);
  p.pump();
  REQUIRE(p.srec.streams.count(id));
  CHECK(p.srec.streams[id].head.fields == req.fields);
  CHECK(p.srec.streams[id].first_value_data == agent_room);
}

TEST_CASE("h2 a finished stream's send buffer serves the body of a later stream") {
  Pair p;
  const std::string body(64, 'b');  // over std::string's inline room
  int32_t first = p.client.submit_request(post("/1"), false);
  REQUIRE(first > 0);
  REQUIRE(p.client.send_data(first, body));
  const size_t spares = SpareStringRooms::kept();
  REQUIRE(p.client.end_stream(first));
  p.pump();
  CHECK(p.srec.streams[first].body == body);
  REQUIRE(p.server.submit_response(first, status(200), true));
  p.pump();
  CHECK(p.crec.streams[first].closed);
  CHECK(SpareStringRooms::kept() == spares + 1);  // the first stream's, kept

  int32_t id = p.client.submit_request(post("/2"), false);
  REQUIRE(id > 0);
  REQUIRE(p.client.send_data(id, body));
  CHECK(SpareStringRooms::kept() == spares);  // taken again
  REQUIRE(p.client.end_stream(id));
  p.pump();
  CHECK(p.srec.streams[id].body == body);
}

TEST_CASE("h2 the spares kept for a thread's sessions are freed when its last session goes") {
  std::optional<H2Session> last;
  last.emplace(Role::server, nullptr);
  {
    Pair p;
    int32_t id = p.client.submit_request(post("/"), false);
    REQUIRE(id > 0);
    REQUIRE(p.client.send_data(id, std::string(64, 'b')));
    REQUIRE(p.client.end_stream(id));
    p.pump();
    REQUIRE(p.server.submit_response(id, status(200), true));
    p.pump();
    Headers fields = {{"user-agent", "a client of twenty-odd bytes"}};
    H2Session::keep_field_list(fields);
  }
  const size_t lists = H2Session::spare_field_lists();
  const size_t buffers = SpareStringRooms::kept();
  CHECK(lists > 0);
  CHECK(buffers > 0);
  last.reset();
  CHECK(H2Session::spare_field_lists() == 0);
  CHECK(SpareStringRooms::kept() == 0);
}

TEST_CASE("h2 client: RST_STREAM NO_ERROR before the response's end is a reset, after it a clean close") {
  SUBCASE("before any head") {
    LoneClient lone("/cut");
    REQUIRE(lone.feed(settings() + frame(SETTINGS, ACK, 0, "") + rst(lone.id, H2Session::kNoError)));
    CHECK(lone.rec.streams[lone.id].resets == 1);
    CHECK(lone.rec.streams[lone.id].reset_code == H2Session::kNoError);
    CHECK_FALSE(lone.rec.streams[lone.id].closed);
  }
  SUBCASE("after the head and part of the body") {
    LoneClient lone("/cut");
    REQUIRE(lone.feed(settings() + frame(SETTINGS, ACK, 0, "") + headers(lone.id, std::string(1, char(0x88))) +
                      data(lone.id, "part") + rst(lone.id, H2Session::kNoError)));
    CHECK(lone.rec.streams[lone.id].head_seen);
    CHECK_FALSE(lone.rec.streams[lone.id].ended);
    CHECK(lone.rec.streams[lone.id].resets == 1);
    CHECK_FALSE(lone.rec.streams[lone.id].closed);
  }
  SUBCASE("after a complete response, while the request is still being sent (RFC 9113 8.1)") {
    Recorder rec;
    H2Session client{Role::client, &rec};
    rec.session = &client;
    const int32_t id = client.submit_request(post("/upload"), false);
    std::string sent;
    client.flush(sent);
    auto feed = [&](const std::string& in) {
      return client.recv(reinterpret_cast<const uint8_t*>(in.data()), in.size(), 0);
    };
    REQUIRE(feed(settings() + frame(SETTINGS, ACK, 0, "") +
                 headers(id, std::string(1, char(0x88)), END_HEADERS | END_STREAM) +
                 rst(id, H2Session::kNoError)));
    CHECK(rec.streams[id].ended);
    CHECK(rec.streams[id].closed);
    CHECK(rec.streams[id].resets == 0);
  }
}
