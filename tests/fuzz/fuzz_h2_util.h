// What the two HTTP/2 targets share: the frame walk that checks a
// session's output (written here, not taken from the code under test) and
// what an owner does with body bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "shell/http2/h2_session.h"

namespace fuzz {

inline uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

// `out` is whole frames: a 9-byte header, a known type, at most 16,384
// bytes of payload, the reserved bit clear; the first is a SETTINGS that is
// no ACK. Calls fn(type, flags, payload) for each.
template <class Fn>
void for_each_frame(std::string_view out, Fn&& fn) {
  bool first = true;
  while (!out.empty()) {
    FUZZ_REQUIRE(out.size() >= 9);
    auto* p = reinterpret_cast<const uint8_t*>(out.data());
    size_t len = size_t(p[0]) << 16 | size_t(p[1]) << 8 | p[2];
    uint8_t type = p[3];
    FUZZ_REQUIRE(len <= 16384);
    FUZZ_REQUIRE(type <= 9);
    FUZZ_REQUIRE((p[5] & 0x80) == 0);
    FUZZ_REQUIRE(out.size() >= 9 + len);
    if (first) FUZZ_REQUIRE(type == 4 && (p[4] & 1) == 0);
    first = false;
    fn(type, p[4], p + 9, len);
    out.remove_prefix(9 + len);
  }
}

// An owner's body bytes: consumed, or held (`hold`; the stream's window
// must bound them: at most the initial 65,535 bytes). A chunk that starts
// with 'R' makes the owner give up on the stream.
inline void take_body(onelayer::H2Session& session, int32_t id, const uint8_t* data, size_t len, bool hold,
                      uint64_t& unconsumed) {
  if (hold) {
    unconsumed += len;
    FUZZ_REQUIRE(unconsumed <= 65535);
  } else {
    session.consume(id, len);
  }
  if (len > 0 && data[0] == 'R') session.reset_stream(id, onelayer::H2Session::kCancel);
}

// Feeds `in` to `session` `piece` bytes at a time, the clock 7 ms further
// each piece, flushing into `out` after each one when `reads`, until the
// session fails or asks to close. `before(at)` runs before the piece at
// offset `at`. Returns the clock after the last piece.
template <class Before>
uint64_t feed_in_pieces(onelayer::H2Session& session, std::string_view in, size_t piece, bool reads,
                        std::string& out, Before&& before) {
  uint64_t now = 0;
  bool alive = true;
  for (size_t at = 0; at < in.size() && alive; at += piece) {
    before(at);
    size_t n = std::min(piece, in.size() - at);
    alive = session.recv(reinterpret_cast<const uint8_t*>(in.data() + at), n, now);
    now += 7;
    if (reads) session.flush(out);
    if (session.want_close()) alive = false;
  }
  return now;
}

}  // namespace fuzz
