// nghttp2's own HPACK decoder over whole header blocks, for the tests that
// read back what a session or an encoder sent (one decoder per direction of
// a connection: it keeps the dynamic table from block to block).
#pragma once

#include <doctest/doctest.h>
#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nghttp2_inflate.h"

namespace onelayer::test {

class HpackBlockDecoder {
 public:
  HpackBlockDecoder() { nghttp2_hd_inflate_new(&inflater_); }
  ~HpackBlockDecoder() { nghttp2_hd_inflate_del(inflater_); }
  HpackBlockDecoder(const HpackBlockDecoder&) = delete;
  HpackBlockDecoder& operator=(const HpackBlockDecoder&) = delete;

  // The limit this side announced in SETTINGS_HEADER_TABLE_SIZE.
  void limit(uint32_t bytes) { REQUIRE(nghttp2_hd_inflate_change_table_size(inflater_, bytes) == 0); }
  size_t table_bytes() const { return nghttp2_hd_inflate_get_dynamic_table_size(inflater_); }

  // One whole block's fields, in order; fails the test on a decoding error.
  std::vector<DecodedField> decode(std::string_view block) {
    std::vector<DecodedField> out;
    REQUIRE(nghttp2_inflate_block(inflater_, block, out));
    return out;
  }

 private:
  nghttp2_hd_inflater* inflater_ = nullptr;
};

}  // namespace onelayer::test
