// H2HeaderBlockExtractor: what the framing layer gets (every frame but
// HEADERS and CONTINUATION byte for byte; those rewritten without their
// block and padding), the blocks it hands to the decoder and when, the
// same whatever the input's split, and each error it must now catch itself.
#include "core/h2wire/h2_header_block_extractor.h"

#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

using onelayer::H2HeaderBlockExtractor;

namespace {

constexpr uint8_t kData = 0x0, kHeaders = 0x1, kSettings = 0x4, kPushPromise = 0x5, kPing = 0x6,
                  kContinuation = 0x9;
constexpr uint8_t kEndStream = 0x1, kEndHeaders = 0x4, kPadded = 0x8, kPriority = 0x20;

std::string frame(uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload) {
  std::string f;
  const size_t n = payload.size();
  f.push_back(char(n >> 16));
  f.push_back(char(n >> 8));
  f.push_back(char(n));
  f.push_back(char(type));
  f.push_back(char(flags));
  f.push_back(char(stream >> 24));
  f.push_back(char(stream >> 16));
  f.push_back(char(stream >> 8));
  f.push_back(char(stream));
  return f + std::string(payload);
}

// What the sink saw: the bytes passed on, joined; each block with where in
// those bytes it came; the received lengths given with rewritten frames.
struct Recorder final : H2HeaderBlockExtractor::Sink {
  struct Block {
    int32_t stream;
    std::string bytes;
    size_t at;  // bytes passed before it
  };
  std::string passed;
  std::vector<Block> blocks;
  std::vector<uint32_t> received_lengths;
  size_t passes = 0;
  size_t stop_after = SIZE_MAX;  // passes before pass() answers false

  bool pass(const uint8_t* data, size_t n, uint32_t received_length) override {
    passed.append(reinterpret_cast<const char*>(data), n);
    if (received_length != 0) received_lengths.push_back(received_length);
    return ++passes < stop_after;
  }
  void block(int32_t stream, std::string_view b) override { blocks.push_back(Block{stream, std::string(b), passed.size()}); }
};

H2HeaderBlockExtractor::Error feed(H2HeaderBlockExtractor& x, std::string_view bytes, Recorder& r) {
  return x.feed(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), r);
}

// Fed in pieces of `piece` bytes.
H2HeaderBlockExtractor::Error feed_in_pieces(H2HeaderBlockExtractor& x, std::string_view bytes, size_t piece,
                                             Recorder& r) {
  for (size_t at = 0; at < bytes.size(); at += piece) {
    if (auto e = feed(x, bytes.substr(at, piece), r)) return e;
  }
  return {};
}

const std::string kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

}  // namespace

TEST_CASE("h2 block extractor: frames other than HEADERS and CONTINUATION go on as they are, in one pass") {
  H2HeaderBlockExtractor x(false, 16384);
  Recorder r;
  std::string in = frame(kSettings, 0, 0, std::string(6, '\1')) + frame(kPing, 0, 0, "12345678") +
                   frame(kData, kEndStream, 1, "body");
  CHECK_FALSE(feed(x, in, r));
  CHECK(r.passed == in);
  CHECK(r.passes == 1);
  CHECK(r.blocks.empty());
}

TEST_CASE("h2 block extractor: a server's input starts with the client preface, passed on untouched") {
  H2HeaderBlockExtractor x(true, 16384);
  Recorder r;
  // The preface's bytes would read as a frame header of type ' ' with a
  // huge length: only skipping them makes the HEADERS after them a block.
  std::string in = kPreface + frame(kSettings, 0, 0, "") + frame(kHeaders, kEndHeaders, 1, "\x82\x86");
  CHECK_FALSE(feed(x, in, r));
  REQUIRE(r.blocks.size() == 1);
  CHECK(r.blocks[0].bytes == "\x82\x86");
  CHECK(r.passed == kPreface + frame(kSettings, 0, 0, "") + frame(kHeaders, kEndHeaders, 1, ""));
}

TEST_CASE("h2 block extractor: a HEADERS frame goes on empty, its block handed over just before it") {
  H2HeaderBlockExtractor x(false, 16384);
  Recorder r;
  std::string before = frame(kData, 0, 1, "abc");
  std::string in = before + frame(kHeaders, kEndHeaders | kEndStream, 3, "\x82\x86\x84") + frame(kData, 0, 3, "x");
  CHECK_FALSE(feed(x, in, r));
  REQUIRE(r.blocks.size() == 1);
  CHECK(r.blocks[0].stream == 3);
  CHECK(r.blocks[0].bytes == "\x82\x86\x84");
  CHECK(r.blocks[0].at == before.size());  // after the frames before it, before its own frame
  CHECK(r.passed == before + frame(kHeaders, kEndHeaders | kEndStream, 3, "") + frame(kData, 0, 3, "x"));
  CHECK(r.received_lengths == std::vector<uint32_t>{3});
}

TEST_CASE("h2 block extractor: padding is dropped (PADDED cleared), priority fields are kept") {
  H2HeaderBlockExtractor x(false, 16384);
  Recorder r;
  std::string priority = std::string("\x80\x00\x00\x01", 4) + "\x10";
  std::string payload = std::string(1, '\x03') + priority + "\x82\x87" + std::string(3, '\0');
  CHECK_FALSE(feed(x, frame(kHeaders, kEndHeaders | kPadded | kPriority, 5, payload), r));
  REQUIRE(r.blocks.size() == 1);
  CHECK(r.blocks[0].bytes == "\x82\x87");
  CHECK(r.passed == frame(kHeaders, kEndHeaders | kPriority, 5, priority));
  CHECK(r.received_lengths == std::vector<uint32_t>{uint32_t(payload.size())});
}

TEST_CASE("h2 block extractor: HEADERS and CONTINUATIONs make one block, handed over before the last frame") {
  H2HeaderBlockExtractor x(false, 16384);
  Recorder r;
  std::string in = frame(kHeaders, kEndStream, 1, "aaa") + frame(kContinuation, 0, 1, "bb") +
                   frame(kContinuation, kEndHeaders, 1, "c");
  CHECK_FALSE(feed(x, in, r));
  REQUIRE(r.blocks.size() == 1);
  CHECK(r.blocks[0].stream == 1);
  CHECK(r.blocks[0].bytes == "aaabbc");
  std::string two_frames = frame(kHeaders, kEndStream, 1, "") + frame(kContinuation, 0, 1, "");
  CHECK(r.blocks[0].at == two_frames.size());
  CHECK(r.passed == two_frames + frame(kContinuation, kEndHeaders, 1, ""));
  CHECK(r.received_lengths == std::vector<uint32_t>{3, 2, 1});
}

TEST_CASE("h2 block extractor: the same output whatever the input's split, down to single bytes") {
  std::string in = kPreface + frame(kSettings, 0, 0, std::string(12, '\2')) +
                   frame(kHeaders, kEndHeaders | kPadded, 1, std::string(1, '\2') + "\x82\x86\x84xyz" + std::string(2, '\0')) +
                   frame(kData, kEndStream, 1, std::string(100, 'd')) + frame(kHeaders, kPriority, 3, "PPPPP" "hh") +
                   frame(kContinuation, 0, 3, "") + frame(kContinuation, kEndHeaders, 3, "iii") +
                   frame(kHeaders, kEndHeaders, 5, "") + frame(kPing, 0, 0, "87654321");
  H2HeaderBlockExtractor whole(true, 16384);
  Recorder expected;
  REQUIRE_FALSE(feed(whole, in, expected));
  REQUIRE(expected.blocks.size() == 3);
  CHECK(expected.blocks[0].bytes == "\x82\x86\x84xyz");
  CHECK(expected.blocks[1].bytes == "hhiii");
  CHECK(expected.blocks[2].bytes.empty());
  for (size_t piece : {1, 2, 3, 5, 7, 9, 10, 13, 64}) {
    CAPTURE(piece);
    H2HeaderBlockExtractor x(true, 16384);
    Recorder r;
    CHECK_FALSE(feed_in_pieces(x, in, piece, r));
    CHECK(r.passed == expected.passed);
    CHECK(r.received_lengths == expected.received_lengths);
    REQUIRE(r.blocks.size() == expected.blocks.size());
    for (size_t i = 0; i < r.blocks.size(); ++i) {
      CHECK(r.blocks[i].stream == expected.blocks[i].stream);
      CHECK(r.blocks[i].bytes == expected.blocks[i].bytes);
      CHECK(r.blocks[i].at == expected.blocks[i].at);
    }
  }
}

TEST_CASE("h2 block extractor: the errors the framing layer can no longer see, with their codes") {
  struct Case {
    const char* what;
    std::string input;
    uint32_t code;
  };
  const std::vector<Case> cases = {
      {"a header frame over SETTINGS_MAX_FRAME_SIZE", frame(kHeaders, kEndHeaders, 1, std::string(101, 'x')), 0x6},
      {"a CONTINUATION over it", frame(kHeaders, 0, 1, "a") + frame(kContinuation, kEndHeaders, 1, std::string(101, 'x')),
       0x6},
      {"padding longer than the frame", frame(kHeaders, kEndHeaders | kPadded, 1, std::string(1, '\5') + "ab"), 0x1},
      {"HEADERS shorter than its priority fields", frame(kHeaders, kEndHeaders | kPriority, 1, "abc"), 0x6},
      {"HEADERS shorter than its pad length", frame(kHeaders, kEndHeaders | kPadded, 1, ""), 0x6},
      {"a DATA frame inside a block", frame(kHeaders, 0, 1, "a") + frame(kData, 0, 1, "x"), 0x1},
      {"a HEADERS frame inside a block", frame(kHeaders, 0, 1, "a") + frame(kHeaders, kEndHeaders, 3, "b"), 0x1},
      {"a CONTINUATION of another stream", frame(kHeaders, 0, 1, "a") + frame(kContinuation, kEndHeaders, 3, "b"), 0x1},
      {"a CONTINUATION outside a block", frame(kContinuation, kEndHeaders, 1, "b"), 0x1},
      {"HEADERS on stream 0", frame(kHeaders, kEndHeaders, 0, "a"), 0x1},
      {"PUSH_PROMISE", frame(kPushPromise, kEndHeaders, 1, std::string("\0\0\0\2", 4) + "a"), 0x1},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    for (size_t piece : {size_t{1}, c.input.size()}) {
      H2HeaderBlockExtractor x(false, 100);
      Recorder r;
      auto e = feed_in_pieces(x, c.input, piece, r);
      CHECK(e.code == c.code);
      CHECK(std::string_view(e.reason).size() > 0);
    }
  }
  // A DATA frame over the size is the framing layer's to refuse: passed on.
  H2HeaderBlockExtractor x(false, 100);
  Recorder r;
  CHECK_FALSE(feed(x, frame(kData, 0, 1, std::string(101, 'x')), r));
  CHECK(r.passed.size() == 9 + 101);
}

TEST_CASE("h2 block extractor: once the sink says stop, nothing more is passed or handed over") {
  std::string in = frame(kPing, 0, 0, "12345678") + frame(kHeaders, kEndHeaders, 1, "\x82") +
                   frame(kHeaders, kEndHeaders, 3, "\x83");
  H2HeaderBlockExtractor x(false, 16384);
  Recorder r;
  r.stop_after = 2;  // the PING, then the first rewritten HEADERS
  CHECK_FALSE(feed(x, in, r));
  CHECK(r.passes == 2);
  CHECK(r.blocks.size() == 1);
  CHECK(r.passed == frame(kPing, 0, 0, "12345678") + frame(kHeaders, kEndHeaders, 1, ""));
}
