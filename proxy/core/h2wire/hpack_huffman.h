// The Huffman code of HPACK string literals (RFC 7541 5.2, Appendix B),
// decoding side only: onelayer's encoder sends strings as they are
// (core/h2wire/hpack_encoder.h says why), but peers Huffman-code most of theirs.
#pragma once

#include <string>
#include <string_view>

namespace onelayer {

class HpackHuffman {
 public:
  // Appends the text `in` codes to `out`. False when `in` is not a valid
  // string: the EOS symbol inside it, or an end that is not padding (up to
  // 7 bits, all ones: the most significant bits of EOS). `out` then holds
  // some of the text.
  static bool decode(std::string_view in, std::string& out);
};

}  // namespace onelayer
