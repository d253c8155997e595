// nghttp2's own HPACK encoder's blocks read by HpackDecoder: thousands of
// blocks, Huffman coding on (nghttp2 uses it whenever it is shorter), of
// fields drawn from a small set (so that they repeat, move place, get
// evicted and come back) and fresh ones with bytes of every value, fields
// asked to go never indexed, and the table size changing between blocks
// (several times, down to 0 and back). Every block must decode to exactly
// the fields given, never-indexed flags included, with the encoder's table
// size.
#include <doctest/doctest.h>
#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/h2wire/hpack_decoder.h"
#include "hpack_random_blocks.h"
#include "nghttp2_inflate.h"

using onelayer::HpackDecoder;

namespace {

using Field = onelayer::test::DecodedField;

struct Collect : HpackDecoder::Sink {
  std::vector<Field> fields;
  bool field(std::string_view name, std::string_view value, bool never_indexed) override {
    fields.push_back(Field{std::string(name), std::string(value), never_indexed});
    return true;
  }
};

class Deflater {
 public:
  explicit Deflater(size_t own_limit) { REQUIRE(nghttp2_hd_deflate_new(&deflater_, own_limit) == 0); }
  ~Deflater() { nghttp2_hd_deflate_del(deflater_); }
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;

  void change_table_size(uint32_t bytes) { REQUIRE(nghttp2_hd_deflate_change_table_size(deflater_, bytes) == 0); }
  size_t table_bytes() const { return nghttp2_hd_deflate_get_dynamic_table_size(deflater_); }

  std::string block(const std::vector<Field>& fields) {
    std::vector<nghttp2_nv> nva;
    for (const Field& f : fields) {
      nva.push_back(nghttp2_nv{const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(f.name.data())),
                               const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(f.value.data())), f.name.size(),
                               f.value.size(),
                               static_cast<uint8_t>(f.never_indexed ? NGHTTP2_NV_FLAG_NO_INDEX : NGHTTP2_NV_FLAG_NONE)});
    }
    std::string out(nghttp2_hd_deflate_bound(deflater_, nva.data(), nva.size()), '\0');
    const ssize_t n = nghttp2_hd_deflate_hd(deflater_, reinterpret_cast<uint8_t*>(out.data()), out.size(), nva.data(),
                                            nva.size());
    REQUIRE(n >= 0);
    out.resize(static_cast<size_t>(n));
    return out;
  }

 private:
  nghttp2_hd_deflater* deflater_ = nullptr;
};

}  // namespace

TEST_CASE("hpack decoder round trip: nghttp2's encoder's blocks read back field for field") {
  const std::vector<std::string> names = {":method", ":scheme", ":authority", ":path", ":status", "content-length",
                                          "content-type", "cookie", "authorization", "user-agent", "server", "date",
                                          "x-request-id", "via", "grpc-status", "x-a-rather-longer-field-name"};
  std::vector<std::string> values = {"", "GET", "POST", "/", "200", "0", "nginx", "text/html; charset=utf-8",
                                     "Mon, 21 Oct 2013 20:13:21 GMT", "application/grpc", "gzip, deflate"};
  for (size_t len : {20, 126, 127, 128, 300, 1000, 3100, 5000}) values.push_back(std::string(len, 'v'));
  onelayer::test::RandomBlocks blocks(9113, names, values, {0, 64, 100, 256, 1024, 4096, 16384},
                                      {.fresh_name = 10, .fresh_value = 3, .never = 6});
  // Mostly letters (Huffman-coded: shorter), now and then any byte but an
  // upper-case letter (the long codes; a string of many is sent raw:
  // longer coded).
  auto fresh = [&] {
    std::string s;
    for (size_t n = blocks.pick(40); n > 0; --n) {
      const char c = static_cast<char>(blocks.pick(6) == 0 ? blocks.pick(256) : 'a' + blocks.pick(26));
      s.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
    }
    return s;
  };

  for (uint32_t own_limit : {4096u, 65536u}) {
    CAPTURE(own_limit);
    Deflater encoder(own_limit);
    HpackDecoder decoder;
    size_t fields_seen = 0, never_seen = 0;
    for (int b = 0; b < 3000; ++b) {
      for (uint32_t l : blocks.limit_changes()) {
        encoder.change_table_size(l);
        decoder.settings_limit(l);
      }
      const std::vector<Field> fields = blocks.fields<Field>(fresh);
      const std::string block = encoder.block(fields);
      Collect sink;
      INFO("block " << b);
      REQUIRE(decoder.decode(block, sink) == HpackDecoder::Result::ok);
      never_seen += onelayer::test::check_read_back(fields, sink.fields);
      fields_seen += fields.size();
      REQUIRE(decoder.table_bytes() == encoder.table_bytes());
    }
    CHECK(fields_seen > 10000);
    CHECK(never_seen > 1000);
    CHECK(decoder.huffman_decoded() > 1000);
  }
}
