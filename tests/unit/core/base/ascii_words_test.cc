#include <doctest/doctest.h>

#include <string>

#include "core/base/ascii_words.h"

using namespace onelayer;

TEST_CASE("copy_short copies every byte at every position of 0 to 40 bytes, and nothing past the end") {
  // Below four (byte by byte), four to seven and eight to sixteen (two
  // overlapping words) and past sixteen (memcpy).
  for (size_t len = 0; len <= 40; ++len) {
    for (int b = 0; b < 256; b += 7) {
      for (size_t pos = 0; pos < len; ++pos) {
        std::string in(len, 'q');
        for (size_t i = 0; i < len; ++i) in[i] = static_cast<char>('a' + i % 26);
        in[pos] = static_cast<char>(b);
        std::string out(len + 8, '#');
        char* end = ascii_words::copy_short(in, out.data());
        REQUIRE(end == out.data() + len);
        REQUIRE_MESSAGE(out.substr(0, len) == in, "byte " << b << " at " << pos << " of " << len);
        REQUIRE(out.substr(len) == std::string(8, '#'));
      }
    }
  }
  std::string out = "#";
  CHECK(ascii_words::copy_short("", out.data()) == out.data());
  CHECK(out == "#");
}
