// The HPACK decoder (RFC 7541) of one HTTP/2 connection's receiving side:
// a header block's bytes in, its fields out, in order, with the dynamic
// table kept in step with the peer's encoder.
//
// Pure: no I/O and no HTTP/2 framing; H2Session joins a HEADERS frame's
// fragment and its CONTINUATIONs' and hands over the whole block. It
// replaces nghttp2's decoder on the proxy's hot path, so the common cases
// are made cheap:
//
// - A field by index hands out views of the stored entry (or of the static
//   table): nothing is copied.
// - A literal sent as it is (no Huffman coding) is a view into the block.
// - Huffman-coded strings are decoded into buffers the decoder keeps, so
//   no field allocates once they have grown. And per place in the block
//   (the first 64 fields), the decoder remembers the last Huffman-coded
//   name and value it decoded there, coded and decoded: origins send the
//   same fields in the same order on every response (NGINX's `server`,
//   `content-type`, `date` as literals, the date the same for a second),
//   so when the same coded bytes come at the same place again, comparing
//   them is all it takes (a memcmp instead of a table step per character).
// - The dynamic table is a ring of entries whose strings keep their room
//   when evicted, so entering a field rarely allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace onelayer {

class HpackDecoder {
 public:
  // Receives a block's fields in order; the views are valid during the call only.
  class Sink {
   public:
    virtual ~Sink() = default;
    // false: stop decoding (decode() returns Result::stopped).
    virtual bool field(std::string_view name, std::string_view value, bool never_indexed) = 0;
  };
  enum class Result : uint8_t { ok, malformed, stopped };

  // settings_limit: the largest table a size update may ask for now (RFC
  // 7541 4.2 / RFC 9113 SETTINGS_HEADER_TABLE_SIZE); the table starts at
  // 4096 bytes (the protocol's default) whatever this is.
  explicit HpackDecoder(uint32_t settings_limit = 4096);

  // Our SETTINGS_HEADER_TABLE_SIZE took effect (the peer acknowledged it):
  // size updates may go up to `bytes` from now on. When `bytes` is below
  // the table's current size limit, the next block must begin with a size
  // update to at most `bytes` (else malformed); after several changes, to
  // at most the smallest of them (RFC 7541 4.2).
  void settings_limit(uint32_t bytes);

  // One complete header block (a HEADERS frame's fragment and its
  // CONTINUATIONs', joined). Decodes and hands each field to `sink`.
  // malformed = a COMPRESSION_ERROR for the connection; error() says why in
  // a few words. After malformed or stopped the decoder's state is of no
  // further use (the connection ends).
  Result decode(std::string_view block, Sink& sink);
  std::string_view error() const { return error_; }

  // The dynamic table: its size in RFC 7541 bytes (name + value + 32 per
  // entry), its entries and the maximum size it keeps to now.
  size_t table_bytes() const { return table_bytes_; }
  size_t entries() const { return entries_; }
  uint32_t table_limit() const { return limit_; }
  // Huffman-coded strings decoded so far, not taken from the per-place
  // memory (for tests and statistics).
  uint64_t huffman_decoded() const { return huffman_decoded_; }
  // Heap bytes the decoder holds (its strings' room, the ring and the
  // places): bounded by the table's size and the per-place limits, not by
  // what the peer has sent over time.
  size_t held_bytes() const;

 private:
  struct Entry {
    std::string name, value;
  };
  // The last Huffman-coded string at one place of a block: its bytes as
  // sent and its text.
  struct Remembered {
    std::string coded, text;
  };
  struct Place {
    Remembered name, value;
  };
  static constexpr size_t kRememberedPlaces = 64;
  // Longer coded strings are not remembered (decoded into the scratch
  // buffers): what a connection's places hold stays under 64 x 2 x 2 x 128
  // bytes plus the text, whatever the peer sends.
  static constexpr size_t kRememberedBytes = 128;

  Result fail(const char* why) {
    error_ = why;
    return Result::malformed;
  }
  const char* size_updates(const uint8_t*& p, const uint8_t* end);
  const char* string_at(const uint8_t*& p, const uint8_t* end, size_t place, bool is_name, std::string_view& out);
  const char* huffman_text(std::string_view coded, size_t place, bool is_name, std::string_view& out);
  bool field_at(uint32_t index, std::string_view& name, std::string_view& value) const;
  void insert(std::string_view& name, std::string_view& value, bool name_from_table);
  void evict_to(size_t bytes);
  void grow_ring();

  uint32_t settings_limit_;
  uint32_t limit_ = 4096;        // the table's maximum size now
  bool update_owed_ = false;     // the next block must begin with a size update
  uint32_t owed_at_most_ = 0;    // to at most this (the smallest settings limit since)
  // The entries: the newest at next_ - 1, the oldest at next_ - entries_,
  // each at its number's place in a ring of a power of two (grown as
  // needed). Evicted places keep their strings (room and bytes) until an
  // insertion reuses them.
  std::vector<Entry> ring_;
  uint32_t ring_mask_ = 0;
  uint32_t next_ = 0;
  uint32_t entries_ = 0;
  size_t table_bytes_ = 0;
  std::vector<Place> remembered_;          // by place in the block, grown as places are used
  std::string name_scratch_, value_scratch_;  // Huffman text past the remembered places
  uint64_t huffman_decoded_ = 0;
  const char* error_ = "";
};

}  // namespace onelayer
