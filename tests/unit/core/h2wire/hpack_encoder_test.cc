// HpackEncoder byte for byte: RFC 7541's own examples of requests without
// Huffman coding (Appendix C.3), the forms each kind of field takes, table
// size updates and eviction. tests/unit/shell/http2/hpack_encoder_roundtrip_test.cc
// decodes its output with nghttp2's decoder.
#include "core/h2wire/hpack_encoder.h"

#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

using onelayer::HpackEncoder;

namespace {

struct Field {
  std::string name, value;
  bool never = false;
};

std::string block(HpackEncoder& e, const std::vector<Field>& fields) {
  std::string out;
  e.begin_block(out);
  for (const Field& f : fields) e.field(f.name, f.value, f.never, out);
  return out;
}

std::string hex(std::string_view bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

// A raw string literal (RFC 7541 5.2, H = 0) of fewer than 127 bytes.
std::string literal(std::string_view s) { return std::string(1, char(s.size())) + std::string(s); }

}  // namespace

TEST_CASE("hpack encoder: RFC 7541 C.3, three requests on one connection, byte for byte") {
  HpackEncoder e;
  // C.3.1
  CHECK(hex(block(e, {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "www.example.com"}})) ==
        "828684410f7777772e6578616d706c652e636f6d");
  CHECK(e.entries() == 1);
  CHECK(e.table_bytes() == 57);
  // C.3.2
  CHECK(hex(block(e, {{":method", "GET"},
                      {":scheme", "http"},
                      {":path", "/"},
                      {":authority", "www.example.com"},
                      {"cache-control", "no-cache"}})) == "828684be58086e6f2d6361636865");
  CHECK(e.entries() == 2);
  CHECK(e.table_bytes() == 110);
  // C.3.3: three fields differ from the field at their place before.
  CHECK(hex(block(e, {{":method", "GET"},
                      {":scheme", "https"},
                      {":path", "/index.html"},
                      {":authority", "www.example.com"},
                      {"custom-key", "custom-value"}})) ==
        "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565");
  CHECK(e.entries() == 3);
  CHECK(e.table_bytes() == 164);
}

TEST_CASE("hpack encoder: the same block again goes by index, field for field") {
  HpackEncoder e;
  std::vector<Field> fields = {{":method", "POST"}, {"x-retry-owner", "edge"}, {"via", "2 onelayer"}};
  CHECK(block(e, fields) == "\x83" "\x40" + literal("x-retry-owner") + literal("edge") + "\x7c" + literal("2 onelayer"));
  // via entered last (62), x-retry-owner before it (63).
  CHECK(hex(block(e, fields)) == "83bfbe");
  CHECK(hex(block(e, fields)) == "83bfbe");
  // The same fields at other places: found through the tables instead.
  CHECK(hex(block(e, {fields[2], fields[0], fields[1]})) == "be83bf");
}

TEST_CASE("hpack encoder: values that never repeat go without indexing, the name by index") {
  HpackEncoder e;
  // content-length (static 28) and :path (static 4): 0000 1111 then 28 - 15.
  CHECK(block(e, {{"content-length", "64"}}) == "\x0f\x0d" + literal("64"));
  CHECK(block(e, {{"content-length", "65"}}) == "\x0f\x0d" + literal("65"));
  CHECK(e.entries() == 0);
  CHECK(block(e, {{":path", "/items/7"}}) == "\x04" + literal("/items/7"));
  CHECK(hex(block(e, {{":path", "/"}})) == "84");  // whole in the static table
  for (const char* name : {"age", "etag", "location", "set-cookie", "if-none-match", "if-modified-since"}) {
    HpackEncoder fresh;
    std::string b = block(fresh, {{name, "x"}});
    CHECK((uint8_t(b[0]) & 0xf0) == 0x00);
    CHECK(fresh.entries() == 0);
  }
}

TEST_CASE("hpack encoder: secrets and fields asked for go never indexed, a known name by index") {
  HpackEncoder e;
  // authorization (static 23): 0001 1111 then 23 - 15.
  CHECK(block(e, {{"authorization", "Bearer t"}}) == "\x1f\x08" + literal("Bearer t"));
  CHECK(block(e, {{"authorization", "Bearer t"}}) == "\x1f\x08" + literal("Bearer t"));
  // A cookie under 20 bytes (static 32) is never indexed; a longer one is.
  CHECK(block(e, {{"cookie", "a=1"}}) == "\x1f\x11" + literal("a=1"));
  // Even empty, which the static table holds whole (23 and 32).
  CHECK(block(e, {{"cookie", ""}}) == "\x1f\x11" + literal(""));
  CHECK(block(e, {{"authorization", ""}}) == "\x1f\x08" + literal(""));
  CHECK(e.entries() == 0);
  std::string long_cookie(24, 'c');
  CHECK(block(e, {{"cookie", long_cookie}}) == "\x60" + literal(long_cookie));
  CHECK(e.entries() == 1);

  HpackEncoder b;
  // A name in no table goes as a literal; once a message has entered the
  // name (an indexed field of it), never-indexed ones refer to it.
  CHECK(block(b, {{"baggage", "id=1", true}}) == "\x10" + literal("baggage") + literal("id=1"));
  CHECK(b.entries() == 0);
  CHECK(block(b, {{"baggage", "id=2"}}) == "\x40" + literal("baggage") + literal("id=2"));
  CHECK(block(b, {{"baggage", "id=3", true}}) == "\x1f\x2f" + literal("id=3"));  // 62 = 15 + 47
  CHECK(block(b, {{"baggage", "id=4", true}}) == "\x1f\x2f" + literal("id=4"));
  // Never indexed even when the whole field is in the table.
  CHECK(block(b, {{"baggage", "id=2", true}}) == "\x1f\x2f" + literal("id=2"));
  CHECK(b.entries() == 1);
}

TEST_CASE("hpack encoder: a field over three quarters of the table is not entered") {
  HpackEncoder e;
  std::string big(3100, 'v');  // 3100 + 5 + 32 > 3072
  std::string b = block(e, {{"x-big", big}});
  CHECK(uint8_t(b[0]) == 0x00);
  CHECK(e.entries() == 0);
  std::string fits(3035, 'w');  // 3035 + 5 + 32: exactly three quarters of 4096
  b = block(e, {{"x-big", fits}});
  CHECK(uint8_t(b[0]) == 0x40);
  CHECK(e.entries() == 1);
}

TEST_CASE("hpack encoder: entries are evicted oldest first, and a field seen before is sent again whole") {
  HpackEncoder e;
  std::string out;
  e.peer_table_limit(128);
  const std::string v(30, 'x');  // each entry 1 + 30 + 32 = 63 bytes: two fit in 128
  std::string first = block(e, {{"a", v}, {"b", v}});
  CHECK(first.substr(0, 2) == "\x3f\x61");  // size update: 31 + 97 = 128
  CHECK(e.entries() == 2);
  CHECK(e.table_bytes() == 126);
  CHECK(hex(block(e, {{"a", v}, {"b", v}})) == "bfbe");
  CHECK(block(e, {{"c", v}}) == "\x40" + literal("c") + literal(v));  // a goes
  CHECK(e.entries() == 2);
  // a was evicted: a literal again (entering it evicts b, which then comes
  // as a literal too).
  CHECK(block(e, {{"a", v}, {"b", v}}) == "\x40" + literal("a") + literal(v) + "\x40" + literal("b") + literal(v));
  CHECK(hex(block(e, {{"b", v}, {"a", v}})) == "bebf");
}

TEST_CASE("hpack encoder: table size updates start the next block, the smallest limit first") {
  HpackEncoder e;
  block(e, {{"x-a", "1"}, {"x-b", "2"}});
  CHECK(e.entries() == 2);
  std::string none = block(e, {});
  CHECK(none.empty());  // nothing owed

  e.peer_table_limit(0);
  std::string b = block(e, {{"x-a", "1"}});
  CHECK(hex(b.substr(0, 1)) == "20");  // size 0: the table empties
  CHECK(uint8_t(b[1]) == 0x00);        // and nothing can be entered
  CHECK(e.entries() == 0);
  CHECK(e.table_limit() == 0);

  e.peer_table_limit(100);
  e.peer_table_limit(4096);
  b = block(e, {});
  CHECK(hex(b) == "3f45" "3fe11f");  // 100, then 4096
  CHECK(e.table_limit() == 4096);

  // A lower limit then back up, with entries in the table: they go.
  block(e, {{"x-a", "1"}});
  CHECK(e.entries() == 1);
  e.peer_table_limit(16);
  e.peer_table_limit(4096);
  CHECK(hex(block(e, {})) == "30" "3fe11f");
  CHECK(e.entries() == 0);

  // The same limit again: nothing to say.
  e.peer_table_limit(4096);
  CHECK(block(e, {}).empty());
}

TEST_CASE("hpack encoder: a smaller table of our own is announced in the first block, a larger peer limit not used") {
  HpackEncoder e(1024);
  CHECK(hex(block(e, {})) == "3fe107");  // 31 + 993
  CHECK(e.table_limit() == 1024);
  e.peer_table_limit(65536);
  CHECK(block(e, {}).empty());  // still 1024
  CHECK(e.table_limit() == 1024);
  e.peer_table_limit(512);
  CHECK(hex(block(e, {})) == "3fe103");  // 31 + 481
}

TEST_CASE("hpack encoder: indexes stay right across many entries and evictions") {
  HpackEncoder e;
  e.peer_table_limit(256);
  block(e, {});
  // Enough insertions to rebuild the lookup tables many times over.
  for (int i = 0; i < 5000; ++i) {
    std::string name = "x-n" + std::to_string(i % 7);
    std::string value = std::to_string(i);
    std::string b = block(e, {{name, value}});
    CHECK((uint8_t(b[0]) >> 6) == 1);  // entered
    // The newest entry is 62.
    REQUIRE(hex(block(e, {{name, value}})) == "be");
  }
  CHECK(e.table_bytes() <= 256);
}

TEST_CASE("hpack encoder: a large table finds every one of a thousand entries by its index") {
  HpackEncoder e(65536);
  e.peer_table_limit(65536);
  block(e, {});
  for (int i = 0; i < 1000; ++i) block(e, {{"x-k" + std::to_string(i), "v"}});
  CHECK(e.entries() == 1000);
  // Looked up through the tables (a place remembers only the last field
  // there): entry i is 62 + (999 - i), RFC 7541 5.1 integers past 127.
  for (int i : {999, 998, 935, 934, 500, 0}) {
    std::string b = block(e, {{":method", "GET"}, {"x-k" + std::to_string(i), "v"}});
    size_t index = 62 + (999 - i);
    std::string expected = "\x82";
    if (index < 127) {
      expected.push_back(char(0x80 | index));
    } else {
      expected.push_back(char(0xff));
      size_t rest = index - 127;
      while (rest >= 128) {
        expected.push_back(char(0x80 | (rest & 0x7f)));
        rest >>= 7;
      }
      expected.push_back(char(rest));
    }
    CHECK(hex(b) == hex(expected));
  }
}
