// One whole header block through nghttp2's HPACK decoder, without doctest:
// the tests' HpackBlockDecoder and the fuzz target that reads HpackDecoder
// beside nghttp2 share it.
#pragma once

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

// Appends the block's fields to `out`; false when nghttp2 refuses the block.
inline bool nghttp2_inflate_block(nghttp2_hd_inflater* inflater, std::string_view block,
                                  std::vector<DecodedField>& out) {
  auto* p = reinterpret_cast<const uint8_t*>(block.data());
  size_t left = block.size();
  for (;;) {
    nghttp2_nv nv;
    int flags = 0;
    const ssize_t n = nghttp2_hd_inflate_hd2(inflater, &nv, &flags, p, left, 1);
    if (n < 0) return false;
    p += n;
    left -= static_cast<size_t>(n);
    if (flags & NGHTTP2_HD_INFLATE_EMIT) {
      out.push_back(DecodedField{std::string(reinterpret_cast<const char*>(nv.name), nv.namelen),
                                 std::string(reinterpret_cast<const char*>(nv.value), nv.valuelen),
                                 (nv.flags & NGHTTP2_NV_FLAG_NO_INDEX) != 0});
    }
    if (flags & NGHTTP2_HD_INFLATE_FINAL) {
      nghttp2_hd_inflate_end_headers(inflater);
      return true;
    }
    if (n == 0 && left == 0) return true;
  }
}

}  // namespace onelayer::test
