// HpackEncoder's blocks decoded by nghttp2's own HPACK decoder: thousands
// of blocks of fields drawn from a small set (so that they repeat, move
// place, get evicted and come back), with values of every size, fields asked
// to go never indexed, secrets, and the peer's table limit changing between
// blocks (several times, down to 0 and back). Every block must decode to
// exactly the fields given, the never-indexed ones flagged so.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/h2wire/hpack_encoder.h"
#include "hpack_random_blocks.h"
#include "hpack_block_decoder.h"

using onelayer::HpackEncoder;

namespace {

using Field = onelayer::test::DecodedField;  // never_indexed: asked for, and what the decoder saw

std::string describe(const std::vector<Field>& fields) {
  std::string out;
  for (const Field& f : fields)
    out += f.name + ": " + (f.value.size() > 40 ? std::to_string(f.value.size()) + " bytes" : f.value) +
           (f.never_indexed ? " (never indexed)" : "") + "\n";
  return out;
}

}  // namespace

TEST_CASE("hpack encoder round trip: nghttp2's decoder reads every block back as it was") {
  const std::vector<std::string> names = {":method", ":scheme", ":authority", ":path", ":status", "content-length",
                                          "content-type", "cookie", "authorization", "user-agent", "baggage",
                                          "x-retry-owner", "x-retry-attempt", "x-request-timeout-ms", "date",
                                          "via", "x-forwarded-for", "grpc-status", "x-a-rather-longer-field-name"};
  std::vector<std::string> values = {"", "GET", "POST", "/", "/index.html", "200", "0", "1", "14999", "edge",
                                     "2 onelayer", "127.0.0.1", "application/grpc", "gzip, deflate"};
  for (size_t len : {20, 40, 126, 127, 128, 300, 1000, 3100, 5000}) values.push_back(std::string(len, 'v'));
  std::mt19937 numbers(1);
  onelayer::test::RandomBlocks blocks(20261204, names, values, {0, 64, 100, 256, 1024, 4096, 8192}, {});

  for (uint32_t own_limit : {4096u, 1024u, 0u}) {
    CAPTURE(own_limit);
    HpackEncoder encoder(own_limit);
    onelayer::test::HpackBlockDecoder decoder;
    size_t fields_seen = 0, never_seen = 0;
    for (int b = 0; b < 3000; ++b) {
      // Now and then the peer's limit changes, once or several times.
      for (uint32_t l : blocks.limit_changes()) {
        encoder.peer_table_limit(l);
        decoder.limit(l);
      }
      std::vector<Field> fields = blocks.fields<Field>([&] { return std::to_string(numbers()); });
      std::string block;
      encoder.begin_block(block);
      for (const Field& f : fields) encoder.field(f.name, f.value, f.never_indexed, block);
      std::vector<Field> decoded = decoder.decode(block);
      // What the decoder flags never indexed: what was asked, and secrets.
      std::vector<Field> expected = fields;
      for (Field& f : expected)
        if (f.name == "authorization" || (f.name == "cookie" && f.value.size() < 20)) f.never_indexed = true;
      INFO("block ", b, ", given:\n", describe(expected), "decoded:\n", describe(decoded));
      REQUIRE(decoded == expected);
      REQUIRE(decoder.table_bytes() == encoder.table_bytes());
      REQUIRE(encoder.table_bytes() <= encoder.table_limit());
      fields_seen += fields.size();
      for (const Field& f : expected) never_seen += f.never_indexed;
    }
    CHECK(fields_seen > 10000);
    CHECK(never_seen > 1000);
  }
}
