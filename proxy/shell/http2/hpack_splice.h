// The one place where onelayer's HPACK (core/h2wire) meets nghttp2's
// framing. nghttp2 frames, sequences streams and keeps flow control, but
// never encodes or decodes a field: every head goes to it with an empty
// field list and comes out of it with an empty header block. The splice
// encodes our heads with HpackEncoder and puts the blocks into the HEADERS
// frames nghttp2 writes; it takes the blocks out of received frames
// (H2HeaderBlockExtractor) before nghttp2 reads them and decodes them with
// HpackDecoder when nghttp2 delivers the frame; it follows the SETTINGS
// that size the two dynamic tables. H2Session owns one and calls it from
// its nghttp2 callbacks; nothing else of the session knows a header block.
//
// Most of this leans on what nghttp2 does, not on what its API promises.
// What the splice relies on, each checked against the linked nghttp2 by a
// test named after it (tests/unit/shell/http2/hpack_splice_invariants_test.cc):
//
//  1. A head submitted with an empty field list is framed as one HEADERS
//     frame: END_HEADERS set, not PADDED, no CONTINUATION, and its header
//     block carries no field (with a deflate table of 0 bytes, at most a
//     dynamic table size update, which the splice drops). So the block the
//     splice puts in its place is the only one the peer decodes.
//  2. before_frame_send runs for each HEADERS frame (request, response,
//     interim and trailers alike), and the next nghttp2_session_mem_send()
//     returns that frame whole and nothing else: encode() is called from
//     that callback and splice() takes the very next output.
//  3. A stream's HEADERS frames go out in the order they were submitted:
//     the held head a frame takes is the first one held for its stream.
//  4. A submitted HEADERS frame nghttp2 drops (its stream reset or closed
//     first) gets on_frame_not_send and no before_frame_send: its held head
//     is released unencoded, and the encoder's table stays as the peer's
//     decoder has it.
//  5. nghttp2 (its HTTP messaging checks off) takes HEADERS and
//     CONTINUATION frames with an empty header block: it opens, sequences
//     and ends streams by them (END_STREAM honoured) and calls on_header
//     never.
//  6. on_frame_recv for a HEADERS frame comes for the frame that ends its
//     block (after its CONTINUATIONs) and within the
//     nghttp2_session_mem_recv() given that frame's last byte, which takes
//     all of its input: the extracted block (a view valid during that call)
//     is decoded there, in the order the peer encoded the blocks.
//  7. nghttp2 still calls on_begin_frame for every HEADERS and CONTINUATION
//     frame with an empty block, and still counts the CONTINUATIONs against
//     nghttp2_option_set_max_continuations(): the session's empty-frame and
//     CONTINUATION flood limits hold on the frames as rewritten.
//  8. nghttp2's own HPACK inflater accepts every empty block, before and
//     after the peer acknowledges our SETTINGS_HEADER_TABLE_SIZE, as long
//     as that is not below its default of 4,096 bytes. Below, once the ACK
//     arrives, it wants a dynamic table size update at the start of the
//     next block, which an empty block never carries: COMPRESSION_ERROR on
//     every connection. So the splice never advertises less
//     (kLeastDecodeTableBytes).
//  9. on_frame_recv reports the peer's SETTINGS_HEADER_TABLE_SIZE as
//     received (it limits our encoder) and the ACK of our SETTINGS (from
//     then on the peer's encoder keeps to our table size: our decoder's
//     limit).
//
// Do not extend the hybrid: no other frame type or nghttp2 behaviour is to
// be leaned on here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nghttp2/nghttp2.h>
#include <sys/types.h>  // ssize_t

#include "core/h2wire/h2_header_block_extractor.h"
#include "core/h2wire/hpack_decoder.h"
#include "core/h2wire/hpack_encoder.h"
#include "shell/http2/h2_field_block.h"

namespace onelayer {

class HpackSplice {
 public:
  // One head (a HEADERS frame's fields) from its submission until its frame
  // goes out, when encode() turns it into the frame's header block, or
  // until nghttp2 drops the frame (drop()). nghttp2 sequences the frame with
  // an empty field list; the fields wait here, in the order of the list:
  // pointers into the held field block and request line (a head submitted
  // from a field block is not copied again), and copies of the rest. Kept
  // per thread for reuse (their buffers stay allocated).
  struct HeldHead {
    H2FieldBlock fields;
    std::string method, scheme, authority, path;  // requests
    std::vector<nghttp2_nv> list;  // the head's fields, in order; NGHTTP2_NV_FLAG_NO_INDEX: never indexed
    std::string copies;            // names and values not in the strings above
    size_t bytes() const {
      return fields.bytes() + method.size() + scheme.size() + authority.size() + path.size() + copies.size();
    }
    // Takes `f`'s fields: those it does not already point at (no NO_COPY
    // flag) are copied into `copies`, sized first so that it never moves.
    void keep(const nghttp2_nv* f, size_t n);
    // Out of line: four overwrites inlined in the session's
    // submit_request() crowded out what it inlines (profile.sh --h2).
    void hold_request_line(std::string_view m, std::string_view s, std::string_view a, std::string_view p);

   private:
    uint8_t* copy(const uint8_t* p, size_t n);
  };
  static std::unique_ptr<HeldHead> take_held_head();  // a spare one of this thread, or a new one
  static void give_back_held_head(std::unique_ptr<HeldHead> h);
  static void free_spare_heads();  // the thread's last session is gone

  // The least SETTINGS_HEADER_TABLE_SIZE we advertise (invariant 8).
  static constexpr uint32_t kLeastDecodeTableBytes = 4096;

  // `server`: the received bytes start with the client preface.
  // `table_bytes`: our SETTINGS_HEADER_TABLE_SIZE (not below
  // kLeastDecodeTableBytes), and the most the encoder uses whatever the
  // peer allows.
  HpackSplice(bool server, uint32_t table_bytes);
  HpackSplice(const HpackSplice&) = delete;
  HpackSplice& operator=(const HpackSplice&) = delete;

  // The options nghttp2's session needs for the splice: no HTTP messaging
  // checks (it sees no field; invariant 5), and its own deflater keeps no
  // table (invariant 1).
  static void configure(nghttp2_option* opt);
  // Our SETTINGS entry for the decoder's table.
  nghttp2_settings_entry table_setting() const { return {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, decode_table_bytes_}; }

  // SETTINGS (invariant 9): the peer's entries as received, and the ACK of ours.
  void peer_settings(const nghttp2_settings& settings);
  void own_settings_acked() { decoder_.settings_limit(decode_table_bytes_); }

  // ---- Sending. The session submits each head to nghttp2 with an empty
  // field list and holds its fields here.
  void hold(int32_t stream, std::unique_ptr<HeldHead> head) { unsent_heads_.emplace_back(stream, std::move(head)); }
  // before_frame_send of a HEADERS frame of `stream` (invariant 2): its
  // head (the first held, invariant 3) is encoded now, in the order the
  // frames go out. False when none was held.
  bool encode(int32_t stream);
  // on_frame_not_send of a HEADERS frame of `stream` (invariant 4).
  void drop(int32_t stream);
  // An encoded block waits for its frame: the next bytes nghttp2 gives are it.
  bool splicing() const { return block_stream_ != 0; }
  // `frame`/`n`: the HEADERS frame nghttp2 framed for the block encode()
  // made. Appends it to `out` with that block instead of nghttp2's, split
  // into CONTINUATION frames over the peer's largest frame size. False when
  // the frame is not as invariant 1 says (nothing appended).
  bool splice(nghttp2_session* session, const uint8_t* frame, size_t n, std::string& out);

  // ---- Receiving.
  // What the session does with the frames the splice passes on.
  class Receiver {
   public:
    virtual ~Receiver() = default;
    // nghttp2_session_mem_recv() returned `rv` for the last frames passed;
    // `undelivered`: the stream of a block taken out of them whose HEADERS
    // frame nghttp2 did not deliver (its stream was closed or refused), 0
    // when none: the session decodes it all the same, for the table the
    // peer's next blocks refer to. False: the session failed, stop.
    virtual bool passed(ssize_t rv, int32_t undelivered) = 0;
  };
  // Received bytes: the header blocks taken out, the frames that are left
  // into `session`.
  H2HeaderBlockExtractor::Error feed(nghttp2_session* session, const uint8_t* data, size_t n, Receiver& receiver);
  // The payload length, as received, of the header frame nghttp2 is reading
  // (invariant 7: on_begin_frame sees it rewritten).
  uint32_t received_length() const { return received_length_; }
  // A block of `stream` waits to be decoded (its HEADERS frame is being delivered).
  bool holds_block(int32_t stream) const { return block_in_waiting_ && block_in_stream_ == stream; }
  // Decodes the waiting block into `fields` (invariant 6).
  HpackDecoder::Result decode(HpackDecoder::Sink& fields) {
    block_in_waiting_ = false;
    return decoder_.decode(block_in_, fields);
  }
  std::string_view decode_error() const { return decoder_.error(); }

 private:
  class FramingInput;
  std::unique_ptr<HeldHead> take_unsent(int32_t stream);  // the first of `stream`'s; null if none

  uint32_t decode_table_bytes_;  // our SETTINGS_HEADER_TABLE_SIZE
  // Heads submitted whose HEADERS frames have not gone out (or been
  // dropped) yet, by stream; entries before unsent_from_ (and emptied ones)
  // are gone. Independent of the session's streams: a stream may end first.
  std::vector<std::pair<int32_t, std::unique_ptr<HeldHead>>> unsent_heads_;
  size_t unsent_from_ = 0;
  HpackEncoder encoder_;      // every header block we send
  std::string block_;         // the block encode() made last
  int32_t block_stream_ = 0;  // its stream, until splice() frames it
  // Received bytes go through extractor_, which takes the header blocks out
  // for decoder_. A block waits in block_in_ while nghttp2 reads the frame
  // that ends it.
  H2HeaderBlockExtractor extractor_;
  HpackDecoder decoder_;
  std::string_view block_in_;
  int32_t block_in_stream_ = 0;
  bool block_in_waiting_ = false;
  uint32_t received_length_ = 0;
};

}  // namespace onelayer
