#include "core/h2wire/h2_header_block_extractor.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace onelayer {
namespace {

constexpr uint32_t kPrefaceBytes = 24;  // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
constexpr uint8_t kEndHeaders = 0x4;
constexpr uint8_t kPadded = 0x8;
constexpr uint8_t kPriority = 0x20;
constexpr uint32_t kProtocolError = 0x1;
constexpr uint32_t kFrameSizeError = 0x6;
constexpr size_t kKeptJoinedRoom = 16 * 1024;

}  // namespace

H2HeaderBlockExtractor::H2HeaderBlockExtractor(bool client_preface, uint32_t max_frame_size)
    : state_(client_preface ? State::preface : State::frame_header),
      max_frame_size_(max_frame_size),
      left_(client_preface ? kPrefaceBytes : 0) {}

H2HeaderBlockExtractor::Error H2HeaderBlockExtractor::feed(const uint8_t* data, size_t n, Sink& sink) {
  const uint8_t* p = data;
  const uint8_t* const end = data + n;
  const uint8_t* pass_from = p;  // the input's bytes to pass on as they are, from here to p
  bool stopped = false;
  auto pass_up_to = [&](const uint8_t* upto) {
    if (upto > pass_from && !sink.pass(pass_from, static_cast<size_t>(upto - pass_from), 0)) stopped = true;
    pass_from = upto;
  };
  while (p < end && !stopped) {
    switch (state_) {
      case State::preface:
      case State::passing: {
        size_t take = std::min<size_t>(left_, static_cast<size_t>(end - p));
        p += take;
        left_ -= static_cast<uint32_t>(take);
        if (left_ == 0) state_ = State::frame_header;
        break;
      }
      case State::frame_header: {
        const uint8_t* at = p;  // where this frame's header starts in the input
        const uint8_t* hd;
        // Begun in an earlier input: not among the bytes to pass. Such a
        // header is always the first thing of this input (at == data ==
        // pass_from), so passing up to `at` passes nothing of it.
        bool held = header_have_ > 0;
        if (!held && end - p >= static_cast<ptrdiff_t>(H2FrameHeader::kBytes)) {
          hd = p;
          p += H2FrameHeader::kBytes;
        } else {
          size_t take = std::min<size_t>(H2FrameHeader::kBytes - header_have_, static_cast<size_t>(end - p));
          std::memcpy(header_ + header_have_, p, take);
          header_have_ = static_cast<uint8_t>(header_have_ + take);
          p += take;
          if (header_have_ < H2FrameHeader::kBytes) {  // the rest comes with the next input
            if (!held) pass_up_to(at);
            pass_from = p;
            break;
          }
          hd = header_;
          header_have_ = 0;
        }
        if (Error e = start_frame(hd)) {
          pass_up_to(at);
          return stopped ? Error{} : e;
        }
        if (state_ == State::passing) {
          if (held) {  // its header is ours, not the input's: passed on its own
            if (!sink.pass(header_, H2FrameHeader::kBytes, 0)) stopped = true;
            pass_from = p;
          }
          if (left_ == 0) state_ = State::frame_header;
          break;
        }
        // A HEADERS or CONTINUATION frame: nothing of it goes on as it is.
        pass_up_to(at);
        pass_from = p;
        if (stopped) break;
        if (left_ == 0 && !finish_block_frame(sink)) stopped = true;
        break;
      }
      case State::block_frame: {
        if (Error e = take_block_bytes(p, end, sink, stopped)) return stopped ? Error{} : e;
        pass_from = p;
        break;
      }
    }
  }
  if (!stopped) pass_up_to(p);
  return Error{};
}

H2HeaderBlockExtractor::Error H2HeaderBlockExtractor::start_frame(const uint8_t* hd) {
  const auto [length, type, flags, stream] = H2FrameHeader::read(hd);
  if (block_stream_ != 0 && (type != kContinuation || stream != block_stream_))
    return Error{kProtocolError, "a frame other than CONTINUATION inside a header block"};
  if (type == kPushPromise) return Error{kProtocolError, "PUSH_PROMISE (never allowed)"};
  if (type != kHeaders && type != kContinuation) {
    state_ = State::passing;
    left_ = length;
    return Error{};
  }
  if (length > max_frame_size_) return Error{kFrameSizeError, "a header frame over SETTINGS_MAX_FRAME_SIZE"};
  if (stream == 0) return Error{kProtocolError, "a header frame on stream 0"};
  type_ = type;
  flags_ = flags;
  stream_ = stream;
  length_ = length;
  left_ = length;
  prefix_have_ = 0;
  padding_ = 0;
  if (type == kContinuation) {
    if (block_stream_ == 0) return Error{kProtocolError, "CONTINUATION outside a header block"};
    prefix_left_ = 0;
    fragment_left_ = length;
  } else {
    prefix_left_ = ((flags & kPadded) ? 1 : 0) + ((flags & kPriority) ? 5 : 0);
    if (length < prefix_left_) return Error{kFrameSizeError, "HEADERS shorter than its padding and priority fields"};
    fragment_left_ = length - prefix_left_;  // less the padding, once its length is read
    block_stream_ = stream;
    joined_.clear();
    whole_set_ = false;
  }
  state_ = State::block_frame;
  return Error{};
}

H2HeaderBlockExtractor::Error H2HeaderBlockExtractor::take_block_bytes(const uint8_t*& p, const uint8_t* end,
                                                                      Sink& sink, bool& stopped) {
  while (p < end && prefix_left_ > 0) {
    prefix_[prefix_have_++] = *p++;
    --prefix_left_;
    --left_;
    if (prefix_have_ == 1 && (flags_ & kPadded) && type_ == kHeaders) {
      padding_ = prefix_[0];
      if (padding_ > fragment_left_) return Error{kProtocolError, "padding longer than the frame"};
      fragment_left_ -= padding_;
    }
  }
  if (prefix_left_ > 0) return Error{};
  if (fragment_left_ > 0) {
    const size_t here = static_cast<size_t>(end - p);
    // The whole block in this frame and this input (fragment and padding):
    // a view of the input, not a copy.
    if (type_ == kHeaders && (flags_ & kEndHeaders) && joined_.empty() && !whole_set_ && left_ <= here) {
      whole_ = std::string_view(reinterpret_cast<const char*>(p), fragment_left_);
      whole_set_ = true;
      p += fragment_left_;
      left_ -= fragment_left_;
      fragment_left_ = 0;
    } else {
      size_t take = std::min<size_t>(fragment_left_, here);
      joined_.append(reinterpret_cast<const char*>(p), take);
      p += take;
      left_ -= static_cast<uint32_t>(take);
      fragment_left_ -= static_cast<uint32_t>(take);
    }
  }
  if (fragment_left_ > 0) return Error{};
  const size_t skip = std::min<size_t>(left_, static_cast<size_t>(end - p));  // the padding
  p += skip;
  left_ -= static_cast<uint32_t>(skip);
  if (left_ == 0 && !finish_block_frame(sink)) stopped = true;
  return Error{};
}

// The frame's payload is read: the block (if this frame ends it), then the
// frame as the framing layer is to see it.
bool H2HeaderBlockExtractor::finish_block_frame(Sink& sink) {
  state_ = State::frame_header;
  if (flags_ & kEndHeaders) {
    sink.block(stream_, whole_set_ ? whole_ : std::string_view(joined_));
    block_stream_ = 0;
    whole_set_ = false;
  }
  const bool priority = type_ == kHeaders && (flags_ & kPriority);
  uint8_t frame[H2FrameHeader::kBytes + 5];
  const uint32_t length = priority ? 5 : 0;
  const uint8_t flags = type_ == kHeaders ? static_cast<uint8_t>(flags_ & ~kPadded) : flags_;
  H2FrameHeader{length, type_, flags, stream_}.write(frame);
  if (priority) std::memcpy(frame + H2FrameHeader::kBytes, prefix_ + ((flags_ & kPadded) ? 1 : 0), 5);
  const bool go_on = sink.pass(frame, H2FrameHeader::kBytes + length, length_);
  // The block was read while the frame was passed. Room for a block joined
  // from many CONTINUATIONs is given back rather than kept per connection.
  if ((flags_ & kEndHeaders) && joined_.capacity() > kKeptJoinedRoom) std::string().swap(joined_);
  return go_on;
}

}  // namespace onelayer
