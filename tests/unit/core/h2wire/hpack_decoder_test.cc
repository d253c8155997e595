// HpackDecoder byte for byte: RFC 7541's own examples (Appendix C.2 to
// C.6, with and without Huffman coding, with eviction), every way a block
// can be malformed, the size-update rules, the per-place memory of
// Huffman-coded strings, and thousands of HpackEncoder blocks read back.
// tests/unit/shell/http2/hpack_decoder_roundtrip_test.cc reads nghttp2's
// encoder's blocks.
#include "core/h2wire/hpack_decoder.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/h2wire/hpack_encoder.h"
#include "hpack_random_blocks.h"

using onelayer::HpackDecoder;
using Result = HpackDecoder::Result;

namespace {

struct Field {
  std::string name, value;
  bool never_indexed = false;
  bool operator==(const Field& o) const {
    return name == o.name && value == o.value && never_indexed == o.never_indexed;
  }
};

std::ostream& operator<<(std::ostream& os, const Field& f) {
  return os << f.name << ": " << f.value << (f.never_indexed ? " (never indexed)" : "");
}

struct Collect : HpackDecoder::Sink {
  std::vector<Field> fields;
  std::vector<const char*> value_data;  // where each value's view pointed
  size_t stop_after = SIZE_MAX;
  bool field(std::string_view name, std::string_view value, bool never_indexed) override {
    fields.push_back(Field{std::string(name), std::string(value), never_indexed});
    value_data.push_back(value.data());
    return fields.size() < stop_after;
  }
};

std::string unhex(std::string_view hex) {
  auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(digit(hex[i]) << 4 | digit(hex[i + 1])));
  return out;
}

std::vector<Field> decode(HpackDecoder& d, std::string_view block) {
  Collect sink;
  Result r = d.decode(block, sink);
  INFO("error: " << d.error());
  REQUIRE(r == Result::ok);
  return sink.fields;
}

// The dynamic table, newest first, read through the decoder itself: a
// block of indexed fields 62, 63, ... (which changes nothing).
std::vector<Field> table(HpackDecoder& d) {
  std::string block;
  for (size_t i = 0; i < d.entries(); ++i) {
    REQUIRE(62 + i < 127);
    block.push_back(static_cast<char>(0x80 | (62 + i)));
  }
  return decode(d, block);
}

std::string malformed(HpackDecoder& d, std::string_view block) {
  Collect sink;
  REQUIRE(d.decode(block, sink) == Result::malformed);
  return std::string(d.error());
}
std::string malformed(std::string_view block) {
  HpackDecoder d;
  return malformed(d, block);
}

// A literal without indexing whose name is a literal too: 0000 0000 (a
// C string cannot begin with it).
const std::string kNewName(1, '\0');

// A raw string literal (RFC 7541 5.2, H = 0) of fewer than 127 bytes, and a
// Huffman-coded one given its coded bytes in hex.
std::string literal(std::string_view s) { return std::string(1, char(s.size())) + std::string(s); }
std::string huffman(std::string_view hex) {
  std::string coded = unhex(hex);
  return std::string(1, char(0x80 | coded.size())) + coded;
}

// RFC 7541 5.1 with a 5-bit prefix after 001: a size update.
std::string size_update(uint32_t bytes) {
  std::string out;
  if (bytes < 31) return std::string(1, char(0x20 | bytes));
  out.push_back(char(0x3f));
  bytes -= 31;
  while (bytes >= 128) {
    out.push_back(char(0x80 | (bytes & 0x7f)));
    bytes >>= 7;
  }
  out.push_back(char(bytes));
  return out;
}

const std::vector<Field> kC3First = {{":method", "GET"}, {":scheme", "http"}, {":path", "/"},
                                     {":authority", "www.example.com"}};
const std::vector<Field> kC3Second = {{":method", "GET"}, {":scheme", "http"}, {":path", "/"},
                                      {":authority", "www.example.com"}, {"cache-control", "no-cache"}};
const std::vector<Field> kC3Third = {{":method", "GET"}, {":scheme", "https"}, {":path", "/index.html"},
                                     {":authority", "www.example.com"}, {"custom-key", "custom-value"}};

const std::vector<Field> kC5First = {{":status", "302"}, {"cache-control", "private"},
                                     {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                     {"location", "https://www.example.com"}};
const std::vector<Field> kC5Second = {{":status", "307"}, {"cache-control", "private"},
                                      {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                      {"location", "https://www.example.com"}};
const std::vector<Field> kC5Third = {{":status", "200"},
                                     {"cache-control", "private"},
                                     {"date", "Mon, 21 Oct 2013 20:13:22 GMT"},
                                     {"location", "https://www.example.com"},
                                     {"content-encoding", "gzip"},
                                     {"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"}};

// One block of an example: its bytes, its fields, then the table (newest
// first) and its size.
struct Step {
  std::string block;
  std::vector<Field> fields, table;
  size_t bytes;
};

void check_steps(HpackDecoder& d, const std::vector<Step>& steps) {
  for (const Step& s : steps) {
    CHECK(decode(d, s.block) == s.fields);
    CHECK(table(d) == s.table);
    CHECK(d.table_bytes() == s.bytes);
  }
}

// The three requests of C.3 (raw) or C.4 (Huffman).
void check_requests(const char* first, const char* second, const char* third) {
  HpackDecoder d;
  check_steps(d, {{unhex(first), kC3First, {{":authority", "www.example.com"}}, 57},
                  {unhex(second), kC3Second, {{"cache-control", "no-cache"}, {":authority", "www.example.com"}}, 110},
                  {unhex(third),
                   kC3Third,
                   {{"custom-key", "custom-value"}, {"cache-control", "no-cache"}, {":authority", "www.example.com"}},
                   164}});
}

// The three responses of C.5 (raw) or C.6 (Huffman) with a 256-byte table.
// The RFC's decoder starts at 256; this one starts at the protocol's 4096,
// so the first block begins with the size update an encoder owes once the
// 256 took effect.
void check_responses(const char* first, const char* second, const char* third) {
  HpackDecoder d;
  d.settings_limit(256);
  const Field location{"location", "https://www.example.com"}, date21{"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
      cache{"cache-control", "private"};
  check_steps(d, {{size_update(256) + unhex(first), kC5First, {location, date21, cache, {":status", "302"}}, 222},
                  // :status 307 enters, :status 302 goes.
                  {unhex(second), kC5Second, {{":status", "307"}, location, date21, cache}, 222},
                  {unhex(third),
                   kC5Third,
                   {{"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"},
                    {"content-encoding", "gzip"},
                    {"date", "Mon, 21 Oct 2013 20:13:22 GMT"}},
                   215}});
  CHECK(d.table_limit() == 256);
}

}  // namespace

TEST_CASE("hpack decoder: RFC 7541 C.2, one field of each representation") {
  HpackDecoder d;
  // C.2.1 literal with incremental indexing, a literal name.
  CHECK(decode(d, unhex("400a637573746f6d2d6b65790d637573746f6d2d686561646572")) ==
        std::vector<Field>{{"custom-key", "custom-header"}});
  CHECK(table(d) == std::vector<Field>{{"custom-key", "custom-header"}});
  CHECK(d.table_bytes() == 55);

  HpackDecoder without;  // C.2.2 literal without indexing, an indexed name.
  CHECK(decode(without, unhex("040c2f73616d706c652f70617468")) == std::vector<Field>{{":path", "/sample/path"}});
  CHECK(without.entries() == 0);
  CHECK(without.table_bytes() == 0);

  HpackDecoder never;  // C.2.3 never indexed, a literal name.
  CHECK(decode(never, unhex("100870617373776f726406736563726574")) ==
        std::vector<Field>{{"password", "secret", true}});
  CHECK(never.entries() == 0);

  HpackDecoder indexed;  // C.2.4
  CHECK(decode(indexed, unhex("82")) == std::vector<Field>{{":method", "GET"}});
  CHECK(indexed.entries() == 0);
}

TEST_CASE("hpack decoder: RFC 7541 C.3, three requests without Huffman coding") {
  check_requests("828684410f7777772e6578616d706c652e636f6d", "828684be58086e6f2d6361636865",
                 "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565");
}

TEST_CASE("hpack decoder: RFC 7541 C.4, three requests with Huffman coding") {
  check_requests("828684418cf1e3c2e5f23a6ba0ab90f4ff", "828684be5886a8eb10649cbf",
                 "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf");
}

TEST_CASE("hpack decoder: RFC 7541 C.5, three responses with eviction, without Huffman coding") {
  check_responses("4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d546e17"
                  "68747470733a2f2f7777772e6578616d706c652e636f6d",
                  "4803333037c1c0bf",
                  "88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f6f3d41"
                  "53444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b207665727369"
                  "6f6e3d31");
}

TEST_CASE("hpack decoder: RFC 7541 C.6, three responses with eviction, with Huffman coding") {
  check_responses("488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97"
                  "c8e9ae82ae43d3",
                  "4883640effc1c0bf",
                  "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd"
                  "5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007");
}

TEST_CASE("hpack decoder: an empty block has no fields") {
  HpackDecoder d;
  CHECK(decode(d, "").empty());
}

TEST_CASE("hpack decoder: views of raw literals point into the block, of indexed fields into the table") {
  HpackDecoder d;
  const std::string block = "\x40" + literal("x-a") + literal("one") + kNewName + literal("x-b") + literal("two");
  Collect sink;
  REQUIRE(d.decode(block, sink) == Result::ok);
  CHECK(sink.value_data[1] == block.data() + block.size() - 3);
  Collect again;
  REQUIRE(d.decode("\xbe\xbe", again) == Result::ok);
  CHECK(again.fields == std::vector<Field>{{"x-a", "one"}, {"x-a", "one"}});
  CHECK(again.value_data[0] == again.value_data[1]);  // the entry's own string, twice
}

TEST_CASE("hpack decoder: an index of 0 or past the table is malformed") {
  CHECK(malformed("\x80") == "index 0");
  CHECK(malformed("\xbe") == "index past the table");          // 62, the table empty
  CHECK(malformed("\x7e" + literal("v")) == "index past the table");  // a literal's name, 62
  CHECK(malformed("\x0f\x2f" + literal("v")) == "index past the table");
  HpackDecoder d;
  decode(d, "\x40" + literal("x-a") + literal("1"));
  CHECK(decode(d, "\xbe") == std::vector<Field>{{"x-a", "1"}});
  CHECK(malformed(d, "\xbf") == "index past the table");
  // 127 + 2^32 - 128: the largest integer, read whole, then refused as an index.
  CHECK(malformed("\xff\x80\xff\xff\xff\x0f") == "index past the table");
}

TEST_CASE("hpack decoder: integers over 32 bits or of too many bytes are malformed") {
  CHECK(malformed("\xff\x81\xff\xff\xff\x0f") == "integer too large");  // 2^32
  CHECK(malformed("\xff\xff\xff\xff\xff\x7f") == "integer too large");
  CHECK(malformed("\xff\x80\x80\x80\x80\x80\x00") == "integer too large");  // small, in six bytes
  CHECK(malformed(std::string("\x00\x7f\xff\xff\xff\xff\x7f", 7)) == "integer too large");  // a string's length
}

TEST_CASE("hpack decoder: a block that ends inside a field is malformed") {
  CHECK(malformed("\xff") == "truncated block");               // an index's continuation
  CHECK(malformed("\xff\x80") == "truncated block");
  CHECK(malformed("\x40") == "truncated block");               // the name
  CHECK(malformed("\x40" + literal("x-a")) == "truncated block");  // the value
  CHECK(malformed("\x04") == "truncated block");
  CHECK(malformed(std::string("\x00\x7f", 2)) == "truncated block");  // a length's continuation
}

TEST_CASE("hpack decoder: a string longer than what is left of the block is malformed") {
  CHECK(malformed(std::string("\x00\x05", 2) + "x-a") == "string past the block");
  CHECK(malformed("\x04\x03" + std::string("/a")) == "string past the block");
  CHECK(malformed("\x04\x83\x63") == "string past the block");  // Huffman-coded
  // 127 + 2^32 - 128 bytes long.
  CHECK(malformed(std::string("\x04\xff\x80\xff\xff\xff\x0f", 7)) == "string past the block");
}

TEST_CASE("hpack decoder: an invalid Huffman string is malformed, as a name or a value") {
  CHECK(malformed("\x04" + huffman("ff")) == "bad huffman string");           // 8 bits of padding
  CHECK(malformed("\x04" + huffman("18")) == "bad huffman string");           // padding of zeros
  CHECK(malformed("\x04" + huffman("3fffffff")) == "bad huffman string");     // EOS
  CHECK(malformed("\x40" + huffman("ff") + literal("v")) == "bad huffman string");
  // Past the places the memory covers too.
  std::string block;
  for (int i = 0; i < 70; ++i) block += "\x82";
  CHECK(malformed(block + "\x04" + huffman("ff")) == "bad huffman string");
  // A failed string is not remembered as the empty one.
  HpackDecoder d;
  CHECK(malformed(d, "\x04" + huffman("aa6355ff")) == "bad huffman string");
  HpackDecoder fresh;
  CHECK(decode(fresh, "\x04" + huffman("")) == std::vector<Field>{{":path", ""}});
}

TEST_CASE("hpack decoder: the sink stops the block") {
  HpackDecoder d;
  Collect sink;
  sink.stop_after = 2;
  CHECK(d.decode(unhex("828684410f7777772e6578616d706c652e636f6d"), sink) == Result::stopped);
  CHECK(sink.fields == std::vector<Field>{{":method", "GET"}, {":scheme", "http"}});
  CHECK(d.entries() == 0);  // the literal after them was not read
}

TEST_CASE("hpack decoder: size updates only before the first field, each within the settings limit") {
  HpackDecoder d;
  decode(d, "\x40" + literal("x-a") + literal("1") + "\x40" + literal("x-b") + literal("2"));
  CHECK(d.entries() == 2);
  // Several at the start: 0 empties the table, then 100 and 4096.
  CHECK(decode(d, size_update(0) + size_update(100) + size_update(4096) + "\x82") ==
        std::vector<Field>{{":method", "GET"}});
  CHECK(d.entries() == 0);
  CHECK(d.table_limit() == 4096);
  CHECK(malformed(d, "\x82" + size_update(100)) == "size update after a field");
  HpackDecoder over;
  CHECK(malformed(over, size_update(4097)) == "size update over the limit");
  // The limit given at construction bounds the updates; the table still
  // starts at 4096.
  HpackDecoder small(1024);
  CHECK(small.table_limit() == 4096);
  CHECK(decode(small, "\x82").size() == 1);  // no update owed
  CHECK(malformed(small, size_update(2000)) == "size update over the limit");
  HpackDecoder small2(1024);
  decode(small2, size_update(1024));
  CHECK(small2.table_limit() == 1024);
}

TEST_CASE("hpack decoder: a size update evicts down to the new size, oldest first") {
  HpackDecoder d;
  const std::string v(30, 'v');  // each entry 3 + 30 + 32 = 65 bytes
  decode(d, "\x40" + literal("x-a") + literal(v) + "\x40" + literal("x-b") + literal(v) + "\x40" + literal("x-c") +
                literal(v));
  CHECK(d.table_bytes() == 195);
  decode(d, size_update(130));
  CHECK(table(d) == std::vector<Field>{{"x-c", v}, {"x-b", v}});
  decode(d, size_update(129));
  CHECK(table(d) == std::vector<Field>{{"x-c", v}});
  CHECK(d.table_bytes() == 65);
}

TEST_CASE("hpack decoder: a lower settings limit requires an update to at most it, then the limit grows back") {
  HpackDecoder d;
  decode(d, "\x40" + literal("x-a") + literal("1"));
  d.settings_limit(100);
  CHECK(malformed(d, "\xbe") == "size update missing");

  HpackDecoder empty;
  empty.settings_limit(100);
  CHECK(malformed(empty, "") == "size update missing");

  HpackDecoder too_big;
  too_big.settings_limit(100);
  CHECK(malformed(too_big, size_update(101)) == "size update over the limit");

  HpackDecoder ok;
  decode(ok, "\x40" + literal("x-a") + literal(std::string(80, 'v')));  // 3 + 80 + 32 = 115 bytes
  ok.settings_limit(100);
  CHECK(decode(ok, size_update(100) + "\x82").size() == 1);
  CHECK(ok.table_limit() == 100);
  CHECK(ok.entries() == 0);  // over 100: evicted
  CHECK(decode(ok, "\x82").size() == 1);  // owed once only
  // Back up: no update owed; the table grows only when the peer says so.
  ok.settings_limit(4096);
  CHECK(decode(ok, "\x82").size() == 1);
  CHECK(ok.table_limit() == 100);
  CHECK(decode(ok, size_update(4096)).empty());
  CHECK(ok.table_limit() == 4096);
  decode(ok, "\x40" + literal("x-a") + literal(std::string(80, 'v')));
  CHECK(ok.entries() == 1);

  // Down twice and up again before a block: the update must reach the
  // smallest, after which it may rise to the settings limit.
  HpackDecoder twice;
  twice.settings_limit(200);
  twice.settings_limit(50);
  twice.settings_limit(1000);
  CHECK(malformed(twice, size_update(200) + size_update(1000)) == "size update missing");
  HpackDecoder twice_ok;
  twice_ok.settings_limit(200);
  twice_ok.settings_limit(50);
  twice_ok.settings_limit(1000);
  CHECK(decode(twice_ok, size_update(50) + size_update(1000) + "\x82").size() == 1);
  CHECK(twice_ok.table_limit() == 1000);

  // Lowered, but not below the table's limit: nothing owed.
  HpackDecoder lowered;
  decode(lowered, size_update(1000));
  lowered.settings_limit(2000);
  CHECK(decode(lowered, "\x82").size() == 1);
}

TEST_CASE("hpack decoder: an entry larger than the table empties it and is not entered") {
  HpackDecoder d;
  d.settings_limit(100);
  decode(d, size_update(100) + "\x40" + literal("x-a") + literal("1"));
  CHECK(d.table_bytes() == 36);
  const std::string big(66, 'v');  // 3 + 66 + 32 = 101
  CHECK(decode(d, "\x40" + literal("x-a") + literal(big)) == std::vector<Field>{{"x-a", big}});
  CHECK(d.entries() == 0);
  CHECK(d.table_bytes() == 0);
  const std::string fits(65, 'v');  // exactly 100
  decode(d, "\x40" + literal("x-a") + literal(fits));
  CHECK(table(d) == std::vector<Field>{{"x-a", fits}});
  // Too large with its name taken from the entry it evicts: the name is
  // still right.
  CHECK(decode(d, "\x7e" + literal(big)) == std::vector<Field>{{"x-a", big}});
  CHECK(d.entries() == 0);
}

TEST_CASE("hpack decoder: a new entry's name may be the entry its insertion evicts") {
  HpackDecoder d;
  d.settings_limit(80);
  decode(d, size_update(80) + "\x40" + literal("x-long-name") + literal("1"));  // 11 + 1 + 32 = 44
  // Name 62 (x-long-name), which must go to make room for the new entry.
  CHECK(decode(d, "\x7e" + literal("22")) == std::vector<Field>{{"x-long-name", "22"}});
  CHECK(table(d) == std::vector<Field>{{"x-long-name", "22"}});
}

TEST_CASE("hpack decoder: names taken from entries while the table's ring grows stay right") {
  HpackDecoder d;
  d.settings_limit(65536);
  decode(d, size_update(65536) + "\x40" + literal("x-a") + literal("0"));
  // Each literal names the newest entry (62): the ring grows at 16, 32, ...
  for (int i = 1; i < 300; ++i) {
    std::string v = std::to_string(i);
    REQUIRE(decode(d, "\x7e" + literal(v)) == std::vector<Field>{{"x-a", v}});
  }
  CHECK(d.entries() == 300);
  // And an old one, by a long index: entry 0 is 62 + 299.
  std::string block = "\x7f";
  for (uint32_t rest = 62 + 299 - 63; ; rest >>= 7) {
    if (rest < 128) {
      block.push_back(char(rest));
      break;
    }
    block.push_back(char(0x80 | (rest & 0x7f)));
  }
  CHECK(decode(d, block + literal("z")) == std::vector<Field>{{"x-a", "z"}});
}

TEST_CASE("hpack decoder: the same Huffman bytes at the same place are not decoded again") {
  HpackDecoder d;
  const std::string server = "\x0f\x27" + huffman("aa6355e7");       // server (54): nginx
  const std::string type = "\x0f\x10" + huffman("497ca589d34d1f");   // content-type (31): text/html
  const std::string named = kNewName + huffman("25a849e95ba97d7f") + huffman("25a849e95bb8e8b4bf");
  const std::vector<Field> fields = {{"server", "nginx"}, {"content-type", "text/html"}, {"custom-key", "custom-value"}};
  CHECK(decode(d, server + type + named) == fields);
  CHECK(d.huffman_decoded() == 4);
  CHECK(decode(d, server + type + named) == fields);
  CHECK(d.huffman_decoded() == 4);  // all four remembered
  CHECK(decode(d, server + type + named) == fields);
  CHECK(d.huffman_decoded() == 4);

  // Other bytes at a place (of the same length): decoded afresh.
  const std::string org = "\x01" + huffman("f1e3c2e5f23a6ba0ab9ec9bf");  // :authority www.example.org
  const std::string com = "\x01" + huffman("f1e3c2e5f23a6ba0ab90f4ff");  // www.example.com
  CHECK(decode(d, com + type) == std::vector<Field>{{":authority", "www.example.com"}, {"content-type", "text/html"}});
  CHECK(d.huffman_decoded() == 5);
  CHECK(decode(d, org + type) == std::vector<Field>{{":authority", "www.example.org"}, {"content-type", "text/html"}});
  CHECK(d.huffman_decoded() == 6);
  CHECK(decode(d, com) == std::vector<Field>{{":authority", "www.example.com"}});
  CHECK(d.huffman_decoded() == 7);
}

TEST_CASE("hpack decoder: the per-place memory is not used where it does not apply") {
  HpackDecoder d;
  const std::string coded = unhex("aa6355e7");  // nginx
  decode(d, "\x0f\x27" + huffman("aa6355e7"));
  // The same bytes sent raw at that place are those bytes, not "nginx".
  CHECK(decode(d, "\x0f\x27" + literal(coded)) == std::vector<Field>{{"server", coded}});
  // As a name at that place: remembered apart from values.
  CHECK(decode(d, kNewName + huffman("aa6355e7") + literal("1")) == std::vector<Field>{{"nginx", "1"}});
  // At another place: decoded there.
  const uint64_t before = d.huffman_decoded();
  CHECK(decode(d, "\x82\x0f\x27" + huffman("aa6355e7")) ==
        std::vector<Field>{{":method", "GET"}, {"server", "nginx"}});
  CHECK(d.huffman_decoded() == before + 1);
  // Beyond the 64 remembered places every string is decoded.
  std::string block;
  for (int i = 0; i < 64; ++i) block += "\x82";
  block += "\x0f\x27" + huffman("aa6355e7") + "\x0f\x27" + huffman("497ca589d34d1f");
  std::vector<Field> got = decode(d, block);
  REQUIRE(got.size() == 66);
  CHECK(got[64] == Field{"server", "nginx"});
  CHECK(got[65] == Field{"server", "text/html"});
  const uint64_t after = d.huffman_decoded();
  decode(d, block);
  CHECK(d.huffman_decoded() == after + 2);
}

TEST_CASE("hpack decoder: thousands of HpackEncoder blocks read back field for field") {
  const std::vector<std::string> names = {":method", ":scheme", ":authority", ":path", ":status", "content-length",
                                          "content-type", "cookie", "authorization", "user-agent", "baggage",
                                          "x-retry-owner", "date", "via", "x-a-rather-longer-field-name"};
  std::vector<std::string> values = {"", "GET", "POST", "/", "200", "0", "14999", "edge", "application/grpc"};
  for (size_t len : {20, 126, 127, 128, 300, 1000, 3100, 5000}) values.push_back(std::string(len, 'v'));
  onelayer::test::RandomBlocks blocks(7541, names, values, {0, 64, 100, 256, 1024, 4096, 8192},
                                      {.fresh_name = 0, .fresh_value = 4, .never = 8});
  auto number = [&] { return std::to_string(blocks.pick(100000)); };

  for (uint32_t own_limit : {4096u, 1024u, 0u}) {
    CAPTURE(own_limit);
    onelayer::HpackEncoder encoder(own_limit);
    HpackDecoder decoder;
    size_t fields_seen = 0, never_seen = 0;
    for (int b = 0; b < 2000; ++b) {
      for (uint32_t l : blocks.limit_changes()) {
        encoder.peer_table_limit(l);
        decoder.settings_limit(l);
      }
      const std::vector<Field> fields = blocks.fields<Field>(number);
      std::string block;
      encoder.begin_block(block);
      for (const Field& f : fields) encoder.field(f.name, f.value, f.never_indexed, block);
      Collect sink;
      INFO("block " << b);
      REQUIRE(decoder.decode(block, sink) == Result::ok);
      never_seen += onelayer::test::check_read_back(fields, sink.fields);
      fields_seen += fields.size();
      CHECK(decoder.table_bytes() == encoder.table_bytes());
      CHECK(decoder.entries() == encoder.entries());
      CHECK(decoder.table_limit() == encoder.table_limit());
    }
    CHECK(fields_seen > 5000);
    CHECK(never_seen > 500);
  }
}

namespace {

// A string literal of any length (RFC 7541 5.1 past the 7-bit prefix).
std::string long_literal(std::string_view s, bool huffman_coded = false) {
  std::string out;
  const uint8_t h = huffman_coded ? 0x80 : 0x00;
  size_t n = s.size();
  if (n < 127) {
    out.push_back(static_cast<char>(h | n));
  } else {
    out.push_back(static_cast<char>(h | 127));
    for (n -= 127; n >= 128; n >>= 7) out.push_back(static_cast<char>(0x80 | (n & 0x7f)));
    out.push_back(static_cast<char>(n));
  }
  return out + std::string(s);
}

}  // namespace

TEST_CASE("hpack decoder: what a connection holds does not grow with what the peer sent over time") {
  HpackDecoder d;
  // 120 small entries grow the ring to 128 places.
  std::string small;
  for (int i = 0; i < 120; ++i) small += "\x40" + literal("x") + literal("y");
  decode(d, small);
  REQUIRE(d.entries() == 120);
  // Then a 4,000-byte value through every place: each empties the table
  // before it. Kept at its place, each would stay after its eviction.
  for (int i = 0; i < 300; ++i) {
    std::string value(4000, static_cast<char>('a' + i % 26));
    CHECK(decode(d, "\x40" + literal("big") + long_literal(value)) == std::vector<Field>{{"big", value}});
    CHECK(d.entries() == (i == 0 ? 2 : 1));  // the first leaves one small entry beside it
  }
  CHECK(d.held_bytes() < 32 * 1024);

  // Huffman-coded values of 1,000 coded bytes (1,600 'a's) at each of the
  // 64 remembered places: too long to remember, decoded each time.
  std::string coded;
  for (int i = 0; i < 200; ++i) coded += unhex("18c6318c63");  // eight 'a's
  std::string block;
  for (int i = 0; i < 64; ++i) block += "\x0f\x27" + long_literal(coded, true);  // server: aaa...
  std::vector<Field> got = decode(d, block);
  REQUIRE(got.size() == 64);
  CHECK(got[63] == Field{"server", std::string(1600, 'a')});
  const uint64_t decoded = d.huffman_decoded();
  decode(d, block);
  CHECK(d.huffman_decoded() == decoded + 64);
  CHECK(d.held_bytes() < 48 * 1024);  // remembered, the places would hold 64 x 2,600 bytes
}
