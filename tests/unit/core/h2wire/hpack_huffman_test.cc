// HpackHuffman: RFC 7541's own Huffman-coded strings (Appendix C.4, C.6),
// every byte value as coded by an independent encoder (the Python hpack
// package), and the strings RFC 7541 5.2 makes invalid: EOS inside, more
// than 7 bits of padding, padding that is not all ones.
#include "core/h2wire/hpack_huffman.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <string_view>

using onelayer::HpackHuffman;

namespace {

std::string unhex(std::string_view hex) {
  auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(digit(hex[i]) << 4 | digit(hex[i + 1])));
  return out;
}

std::string decoded(std::string_view coded) {
  std::string out;
  REQUIRE(HpackHuffman::decode(coded, out));
  return out;
}

bool valid(std::string_view coded) {
  std::string out;
  return HpackHuffman::decode(coded, out);
}

// Codes put one after another, most significant bit first; the last byte
// is filled with `pad` bits.
class BitWriter {
 public:
  BitWriter& put(uint32_t code, unsigned length) {
    for (unsigned i = length; i > 0; --i) bit((code >> (i - 1)) & 1);
    return *this;
  }
  std::string bytes(bool pad = true) {
    while (used_ != 0) bit(pad);
    return out_;
  }

 private:
  void bit(unsigned b) {
    if (used_ == 0) out_.push_back(0);
    out_.back() = static_cast<char>(out_.back() | b << (7 - used_));
    used_ = (used_ + 1) % 8;
  }
  std::string out_;
  unsigned used_ = 0;
};

// RFC 7541 Appendix B.
constexpr uint32_t kA = 0x3, kALength = 5;          // 'a'
constexpr uint32_t kEos = 0x3fffffff, kEosLength = 30;

// Bytes 0 to 255 in order, Huffman-coded by the Python hpack package.
constexpr std::string_view kAllBytesCoded =
    "ffc7fffd8fffffe2fffffe3fffffe4fffffe5fffffe6fffffe7fffffe8ffffeafffffff3fffffa7fffffabffffffdfffffebfffffecfffff"
    "edfffffeefffffefffffff0ffffff1ffffff2fffffffbfffffcffffffd3fffffd7fffffdbfffffdffffffe3fffffe7fffffebfffffed4fe3"
    "f9ffaffcabf1febfafefe7fdfd2cbb00089969b71d79fb9f7fff20ffbff3ff50ddbd7f061c58f265cd9f469d5af66dddbf871e5f9cff7ff7"
    "fffc3ff9ffe45fff4719242cb34e6e9d68a6a3d7dac426defe3cfaf7fffbfe7ffbffdffffffcfffe6ffff4bfff9ffffa3fffd3ffff53fffd"
    "5ffffb3fffeb7fffdaffffb7ffff73fffeeffffdeffffebffffbfffffd9ffffdbfffebffffe0ffffeeffffc3ffff8bffff1ffffe4fffee7f"
    "ffb1ffff97fffd9ffffcdffff9fffffbffffdafffeeffff4ffffb7fffee7fffe8ffffd3fffdeffffd5fffeeffffbdffffe1fffdfffff7fff"
    "ff5ffffecffff07fff87fffe0ffff17fffedffff87ffff77fffeffffeaffff8bfffe3ffff93ffff87fffcbffff37ffff1fffff83ffffe1ff"
    "febfffe3ffff3fffff2ffffa3ffffd9fffff17ffffc7fffff27ffffdefffffbffffff2fffff8fffffb7fff97fff8fffffe6fffffc1fffff8"
    "7ffffe7fffffc5ffffe5fffe4ffff2fffffd1fffff4ffffffefffffe3fffffc9fffff97fffb3ffffcffffb7fffcdffff4ffff9ffffd1ffff"
    "cffffeaffffafffffddffffeffffff4fffff5fffffabffffa7ffffd7fffff9bffffecfffffb7fffff3fffffe8fffffd3fffffabfffff5fff"
    "ffff7ffffecfffffdbfffffbbfffff7ffffff0fffffbbf";

}  // namespace

TEST_CASE("hpack huffman: RFC 7541's coded strings decode to their text") {
  CHECK(decoded(unhex("f1e3c2e5f23a6ba0ab90f4ff")) == "www.example.com");
  CHECK(decoded(unhex("a8eb10649cbf")) == "no-cache");
  CHECK(decoded(unhex("25a849e95ba97d7f")) == "custom-key");
  CHECK(decoded(unhex("25a849e95bb8e8b4bf")) == "custom-value");
  CHECK(decoded(unhex("6402")) == "302");
  CHECK(decoded(unhex("aec3771a4b")) == "private");
  CHECK(decoded(unhex("d07abe941054d444a8200595040b8166e082a62d1bff")) == "Mon, 21 Oct 2013 20:13:21 GMT");
  CHECK(decoded(unhex("9d29ad171863c78f0b97c8e9ae82ae43d3")) == "https://www.example.com");
  CHECK(decoded(unhex("9bd9ab")) == "gzip");
  CHECK(decoded(unhex("94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007")) ==
        "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1");
  CHECK(decoded("") == "");
}

TEST_CASE("hpack huffman: every byte value decodes, the long codes too, wherever they fall") {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  CHECK(decoded(unhex(kAllBytesCoded)) == all);
  // Characters whose codes are 13 to 19 bits, alone (the input's end
  // inside the first eight bytes) and after a run of short codes.
  CHECK(decoded(unhex("ffcfff7fff87ffefff7ffe7fdfff9fff7f")) == "$~\\{}<>^`");
  CHECK(decoded(unhex("ffcf")) == "$");
  CHECK(decoded(BitWriter().put(kA, kALength).put(0x7fff0, 19).bytes()) == "a\\");
}

TEST_CASE("hpack huffman: decoded text is appended to what the string held") {
  std::string out = "x-";
  CHECK(HpackHuffman::decode(unhex("aa6355e7"), out));
  CHECK(out == "x-nginx");
}

TEST_CASE("hpack huffman: the EOS symbol inside a string is invalid") {
  CHECK(decoded(BitWriter().put(kA, kALength).bytes()) == "a");
  CHECK_FALSE(valid(BitWriter().put(kA, kALength).put(kEos, kEosLength).bytes()));
  CHECK_FALSE(valid(BitWriter().put(kEos, kEosLength).put(kA, kALength).bytes()));
  CHECK_FALSE(valid(BitWriter().put(kEos, kEosLength).bytes()));
}

TEST_CASE("hpack huffman: padding of more than 7 bits is invalid") {
  CHECK(decoded("\x1f") == "a");                    // a, then 3 bits of padding
  CHECK_FALSE(valid("\xff"));                        // 8 bits of padding only
  CHECK_FALSE(valid("\x1f\xff"));                    // a, then 11
  CHECK_FALSE(valid(unhex("aa6355e7ff")));           // nginx, then a whole byte more
  CHECK_FALSE(valid(BitWriter().put(kA, kALength).put(0xffff, 16).bytes()));
}

TEST_CASE("hpack huffman: padding that is not the top bits of EOS (all ones) is invalid") {
  CHECK_FALSE(valid("\x18"));  // a, then 000
  CHECK_FALSE(valid("\x1e"));  // a, then 110
  CHECK_FALSE(valid(BitWriter().put(kA, kALength).bytes(false)));
  CHECK_FALSE(valid(unhex("aa6355e6")));  // nginx, its last padding bit 0
}
