// libFuzzer target for the HPACK decoder (core/h2wire/hpack_decoder.h), read side
// by side with nghttp2's own decoder (the one it replaces).
//
// Input: records of [control][length, 2 bytes little-endian][block]. The
// control byte: bit 0 = our SETTINGS_HEADER_TABLE_SIZE changes before the
// block, to one of 8 sizes (bits 1-3); bits 4-7 = after how many fields the
// sink stops (0: never). Each block is copied into a buffer of its exact
// size, so ASan reports any read past it.
//
// Invariants (abort on failure):
// - decode() returns; the sink's views are readable (every byte is read);
// - after each block the table keeps to its limit, and the limit to the
//   settings;
// - a block both decoders accept gives the same fields, never-indexed flags
//   included, and the same table size (the two may refuse different
//   blocks: nghttp2 is more lenient about a few things, e.g. integers of
//   many zero bytes, and the comparison ends at the first refusal);
// - after malformed or stopped, a fresh pair of decoders carries on (the
//   connection would have ended).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../unit/shell/nghttp2_inflate.h"
#include "core/h2wire/hpack_decoder.h"
#include "fuzz_util.h"

namespace {

using onelayer::HpackDecoder;
using Field = onelayer::test::DecodedField;

struct Sink : HpackDecoder::Sink {
  std::vector<Field> fields;
  size_t stop_after = 0;  // 0: never
  bool field(std::string_view name, std::string_view value, bool never_indexed) override {
    fields.push_back(Field{std::string(name), std::string(value), never_indexed});  // reads every byte
    return stop_after == 0 || fields.size() < stop_after;
  }
};

struct InflaterDeleter {
  void operator()(nghttp2_hd_inflater* i) const { nghttp2_hd_inflate_del(i); }
};
using Inflater = std::unique_ptr<nghttp2_hd_inflater, InflaterDeleter>;

Inflater new_inflater() {
  nghttp2_hd_inflater* i = nullptr;
  FUZZ_REQUIRE(nghttp2_hd_inflate_new(&i) == 0);
  return Inflater(i);
}

constexpr uint32_t kLimits[8] = {0, 1, 64, 100, 256, 4096, 4097, 65536};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto ours = std::make_unique<HpackDecoder>();
  Inflater theirs = new_inflater();
  bool compare = true;
  uint32_t settings = 4096;
  size_t at = 0;
  while (at + 3 <= size) {
    const uint8_t control = data[at];
    size_t length = size_t{data[at + 1]} | size_t{data[at + 2]} << 8;
    at += 3;
    if (length > size - at) length = size - at;
    const std::unique_ptr<char[]> block(new char[length ? length : 1]);
    std::copy(data + at, data + at + length, block.get());
    at += length;

    if (control & 1) {
      settings = kLimits[(control >> 1) & 7];
      ours->settings_limit(settings);
      if (compare) FUZZ_REQUIRE(nghttp2_hd_inflate_change_table_size(theirs.get(), settings) == 0);
    }
    Sink sink;
    sink.stop_after = control >> 4;
    const HpackDecoder::Result r = ours->decode(std::string_view(block.get(), length), sink);
    if (r == HpackDecoder::Result::malformed) FUZZ_REQUIRE(!ours->error().empty());
    FUZZ_REQUIRE(ours->table_bytes() <= ours->table_limit());
    if (r == HpackDecoder::Result::ok) FUZZ_REQUIRE(ours->table_limit() <= std::max<uint32_t>(settings, 4096));
    if (r == HpackDecoder::Result::stopped) FUZZ_REQUIRE(sink.stop_after != 0 && sink.fields.size() == sink.stop_after);

    if (compare && r != HpackDecoder::Result::malformed) {
      std::vector<Field> expected;
      if (onelayer::test::nghttp2_inflate_block(theirs.get(), std::string_view(block.get(), length), expected)) {
        if (r == HpackDecoder::Result::stopped) expected.resize(std::min(expected.size(), sink.fields.size()));
        FUZZ_REQUIRE(sink.fields == expected);
        if (r == HpackDecoder::Result::ok)
          FUZZ_REQUIRE(ours->table_bytes() == nghttp2_hd_inflate_get_dynamic_table_size(theirs.get()));
      } else {
        compare = false;
      }
    }
    if (r != HpackDecoder::Result::ok) {
      ours = std::make_unique<HpackDecoder>();
      theirs = new_inflater();
      compare = true;
      settings = 4096;
    }
  }
  return 0;
}
