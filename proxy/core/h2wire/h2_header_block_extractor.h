// Takes the header blocks out of a received HTTP/2 byte stream (RFC 9113
// section 4), so that onelayer's own HPACK decoder (core/h2wire/hpack_decoder.h)
// reads them and the framing layer (nghttp2) gets every frame with an empty
// header block: it still sequences HEADERS and CONTINUATION, opens and
// closes streams, counts CONTINUATIONs and sees END_STREAM, but never
// decodes a field.
//
// Pure: bytes in, bytes and blocks out through a Sink, in stream order.
// Every frame but HEADERS and CONTINUATION goes on untouched (the input's
// own bytes, no copy). A HEADERS or CONTINUATION frame goes on rewritten
// once its payload is complete: the same type, flags and stream, its
// padding dropped (PADDED cleared), its priority fields kept, its length
// what is left. A block whose fragments all sat in one frame of one input
// is handed on as a view of the input; one in pieces is joined first.
//
// What the framing layer can no longer check on these frames is checked
// here, with the RFC 9113 error code: a frame over SETTINGS_MAX_FRAME_SIZE
// (FRAME_SIZE_ERROR), padding or priority fields longer than the payload,
// a frame other than CONTINUATION on the block's stream inside a block, a
// CONTINUATION outside one, a HEADERS on stream 0, and PUSH_PROMISE, which
// onelayer never allows (it sends SETTINGS_ENABLE_PUSH 0 as a client, and a
// client may not push).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/h2wire/h2_frame_header.h"

namespace onelayer {

class H2HeaderBlockExtractor {
 public:
  class Sink {
   public:
    virtual ~Sink() = default;
    // Bytes for the framing layer, in order. `received_length`: when the
    // bytes are a rewritten HEADERS or CONTINUATION frame, its payload
    // length as received (the frame-flood count needs it); 0 otherwise.
    // False: stop (the framing layer failed).
    virtual bool pass(const uint8_t* data, size_t n, uint32_t received_length) = 0;
    // A complete header block of `stream`, just before the rewritten frame
    // that ends it is passed. The view is valid until that pass() returns.
    virtual void block(int32_t stream, std::string_view block) = 0;
  };

  struct Error {
    uint32_t code = 0;  // RFC 9113 error code; 0: none
    const char* reason = "";
    explicit operator bool() const { return code != 0; }
  };

  // `client_preface`: the input starts with the 24-byte client connection
  // preface (a server's), passed on as it is. `max_frame_size`: our
  // SETTINGS_MAX_FRAME_SIZE.
  H2HeaderBlockExtractor(bool client_preface, uint32_t max_frame_size);

  // The next bytes received. An error is final: feed nothing after it.
  Error feed(const uint8_t* data, size_t n, Sink& sink);

 private:
  enum class State : uint8_t { preface, frame_header, passing, block_frame };
  enum FrameType : uint8_t { kHeaders = 0x1, kPushPromise = 0x5, kContinuation = 0x9 };

  Error start_frame(const uint8_t* hd);
  Error take_block_bytes(const uint8_t*& p, const uint8_t* end, Sink& sink, bool& stopped);
  bool finish_block_frame(Sink& sink);

  State state_;
  uint32_t max_frame_size_;
  uint32_t left_ = 0;         // bytes left of the preface or of the frame being passed or read
  uint8_t header_[H2FrameHeader::kBytes] = {};  // a frame header arriving in pieces
  uint8_t header_have_ = 0;
  // The HEADERS or CONTINUATION frame being read.
  uint8_t type_ = 0, flags_ = 0;
  int32_t stream_ = 0;
  uint32_t length_ = 0;       // its payload length as received
  uint32_t prefix_left_ = 0;  // pad length and priority bytes still to come
  uint32_t fragment_left_ = 0;
  uint32_t padding_ = 0;
  uint8_t prefix_[6] = {};    // pad length, then the 5 priority bytes
  uint8_t prefix_have_ = 0;
  // The block being read: its stream (0: none open) and its fragments so
  // far, joined unless the whole block is one view of the input.
  int32_t block_stream_ = 0;
  std::string joined_;
  std::string_view whole_;    // a block read in one piece, from the input
  bool whole_set_ = false;
};

}  // namespace onelayer
