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

namespace onelayer::test {

struct DecodedField {
  std::string name, value;
  bool never_indexed = false;  // sent as a never-indexed literal
  bool operator==(const DecodedField& o) const {
    return name == o.name && value == o.value && never_indexed == o.never_indexed;
  }
};

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
    auto* p = reinterpret_cast<const uint8_t*>(block.data());
    size_t left = block.size();
    for (;;) {
      nghttp2_nv nv;
      int flags = 0;
      const ssize_t n = nghttp2_hd_inflate_hd2(inflater_, &nv, &flags, p, left, 1);
      REQUIRE(n >= 0);
      p += n;
      left -= static_cast<size_t>(n);
      if (flags & NGHTTP2_HD_INFLATE_EMIT) {
        out.push_back(DecodedField{std::string(reinterpret_cast<const char*>(nv.name), nv.namelen),
                                   std::string(reinterpret_cast<const char*>(nv.value), nv.valuelen),
                                   (nv.flags & NGHTTP2_NV_FLAG_NO_INDEX) != 0});
      }
      if (flags & NGHTTP2_HD_INFLATE_FINAL) {
        nghttp2_hd_inflate_end_headers(inflater_);
        break;
      }
      if (n == 0 && left == 0) break;
    }
    return out;
  }

 private:
  nghttp2_hd_inflater* inflater_ = nullptr;
};

}  // namespace onelayer::test
