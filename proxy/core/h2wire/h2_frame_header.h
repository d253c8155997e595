// An HTTP/2 frame header (RFC 9113 4.1): 9 bytes, read and written here
// once for the code that reads frames before nghttp2 does
// (H2HeaderBlockExtractor) and the code that rewrites the ones it framed
// (H2Session::splice_block()).
#pragma once

#include <cstddef>
#include <cstdint>

namespace onelayer {

struct H2FrameHeader {
  static constexpr size_t kBytes = 9;

  uint32_t length = 0;  // of the payload, 24 bits
  uint8_t type = 0;
  uint8_t flags = 0;
  int32_t stream = 0;  // the reserved bit dropped

  static H2FrameHeader read(const uint8_t* p) {
    return H2FrameHeader{uint32_t{p[0]} << 16 | uint32_t{p[1]} << 8 | p[2], p[3], p[4],
                         static_cast<int32_t>((uint32_t{p[5]} << 24 | uint32_t{p[6]} << 16 |
                                               uint32_t{p[7]} << 8 | p[8]) & 0x7fffffffu)};
  }
  void write(uint8_t* p) const {
    const uint32_t id = static_cast<uint32_t>(stream) & 0x7fffffffu;
    p[0] = static_cast<uint8_t>(length >> 16);
    p[1] = static_cast<uint8_t>(length >> 8);
    p[2] = static_cast<uint8_t>(length);
    p[3] = type;
    p[4] = flags;
    p[5] = static_cast<uint8_t>(id >> 24);
    p[6] = static_cast<uint8_t>(id >> 16);
    p[7] = static_cast<uint8_t>(id >> 8);
    p[8] = static_cast<uint8_t>(id);
  }
};

}  // namespace onelayer
