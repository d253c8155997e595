// Short strings (field names, most field values) eight bytes at a time:
// the word loads and the word-wise copy that the header rules
// (http_headers.h) and the HTTP/2 field block share. Inline, as they run
// for every field of every message and are a few instructions each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace onelayer::ascii_words {

inline uint64_t load8(const char* p) {
  uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}

inline uint64_t load4(const char* p) {
  uint32_t x;
  std::memcpy(&x, p, 4);
  return x;
}

// 4 to 7 bytes as one word: the first four and the last four (overlapping).
inline uint64_t load4_to_7(const char* p, size_t n) { return load4(p) | load4(p + n - 4) << 32; }

inline char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// The top bit of each byte of `x` that is an ASCII capital: a byte b < 0x80
// is in 'A'..'Z' when b + (0x80 - 'A') has its top bit set and
// b + (0x80 - 'Z' - 1) has not; bytes with the top bit set are no letter.
inline uint64_t capital_bits(uint64_t x) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kTops = 0x8080808080808080ull;
  const uint64_t low7 = x & ~kTops;
  return (low7 + (0x80 - 'A') * kOnes) & ~(low7 + (0x80 - 'Z' - 1) * kOnes) & ~x & kTops;
}

// The capitals' top bits, moved down to 0x20, are what lower-cases them.
inline uint64_t lower8(uint64_t x) { return x | capital_bits(x) >> 2; }

// Copies `in` to `out` (room for in.size() bytes; `out` may be in.data())
// with every byte mapped: `word` maps the eight bytes of a word, each on
// its own, and `byte` one byte (strings shorter than four). Whole words,
// overlapping at the ends: a byte mapped twice must come out the same (the
// input bytes of an overlap are read before they are written).
template <class Word, class Byte>
inline char* copy_mapped(std::string_view in, char* out, Word word, Byte byte) {
  const size_t n = in.size();
  const char* p = in.data();
  auto map_word_at = [&](size_t at) {
    const uint64_t x = word(load8(p + at));
    std::memcpy(out + at, &x, 8);
  };
  if (n < 4) {
    for (size_t i = 0; i < n; ++i) out[i] = byte(p[i]);
    return out + n;
  }
  if (n < 8) {  // the first four and the last four, both read before either is written
    const uint64_t x = word(load4_to_7(p, n));
    const uint32_t head = static_cast<uint32_t>(x), tail = static_cast<uint32_t>(x >> 32);
    std::memcpy(out, &head, 4);
    std::memcpy(out + n - 4, &tail, 4);
    return out + n;
  }
  if (n <= 16) {  // the first eight and the last eight, the same way
    const uint64_t head = word(load8(p)), tail = word(load8(p + n - 8));
    std::memcpy(out, &head, 8);
    std::memcpy(out + n - 8, &tail, 8);
    return out + n;
  }
  size_t i = 0;
  for (; i + 8 <= n; i += 8) map_word_at(i);
  if (i < n) map_word_at(n - 8);  // the last bytes as one more step over the last eight
  return out + n;
}

// ASCII capitals lowered on the way (onelayer::copy_lowercase, inline for
// the HTTP/2 field block, which lowers every name it is given).
inline char* copy_lowercase(std::string_view in, char* out) {
  return copy_mapped(in, out, [](uint64_t x) { return lower8(x); }, [](char c) { return ascii_lower(c); });
}

// A plain copy of a short string without a call to memcpy (which costs
// more than the copy below 17 bytes); longer ones go to memcpy, so `out`
// must not overlap `in`.
inline char* copy_short(std::string_view in, char* out) {
  if (in.size() > 16) {
    std::memcpy(out, in.data(), in.size());
    return out + in.size();
  }
  return copy_mapped(in, out, [](uint64_t x) { return x; }, [](char c) { return c; });
}

}  // namespace onelayer::ascii_words
