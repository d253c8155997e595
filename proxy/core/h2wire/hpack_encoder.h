// The HPACK encoder (RFC 7541) of one HTTP/2 connection's sending side:
// header fields in, a header block's bytes out, with the connection's
// dynamic table kept in step with the peer's decoder.
//
// Pure: no I/O and no HTTP/2 framing; H2Session puts the block into the
// HEADERS (and CONTINUATION) frames nghttp2 sequences. It replaces nghttp2's
// own encoder for two reasons (docs/http2.md, "Header compression"):
//
// - Strings go as they are, never Huffman-coded. A field that repeats is
//   sent by index (one byte) either way, so Huffman coding only shortens
//   the values that change on every message (a request id, a trace id, a
//   content-length); the peer then has to decode those afresh on every
//   message. On the links a sidecar uses, the few bytes saved cost more
//   CPU at both ends than they save (HAProxy's encoder makes the same
//   choice).
// - It is cheaper per field: one hash of name and value finds both a whole
//   field and its name, in the static table and in the dynamic one.
//
// What enters the dynamic table: every field, except those whose value is
// of no use again (`:path`, content-length, age, etag, if-modified-since,
// if-none-match, location, set-cookie: sent without indexing), secrets
// (authorization, and cookies under 20 bytes: never indexed, RFC 7541
// 7.1.3), fields the caller marks never-indexed (then the name still goes
// by index when a table has it), and fields over three quarters of the
// table. These are the rules nghttp2's encoder follows, so the peer sees
// the same forms as before, only without Huffman coding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace onelayer {

class HpackEncoder {
 public:
  // `own_limit`: the most dynamic-table bytes this side will use, whatever
  // the peer allows (the peer's decoder starts at 4096, RFC 7541 4.2).
  explicit HpackEncoder(uint32_t own_limit = 4096);

  // A SETTINGS_HEADER_TABLE_SIZE the peer sent, in the order received: its
  // decoder's new limit. The next block starts with the size updates it
  // calls for (the smallest limit since the last block first, RFC 7541 4.2).
  void peer_table_limit(uint32_t bytes);

  // Starts a header block in `out` (appended to): the size updates owed.
  void begin_block(std::string& out);
  // One field of the block. `name` is in lower case; `never_indexed` asks
  // for the never-indexed form (RFC 7541 6.2.3).
  void field(std::string_view name, std::string_view value, bool never_indexed, std::string& out);

  // The dynamic table: its size in RFC 7541 bytes (32 per entry besides
  // name and value), its entries and the limit it keeps to.
  size_t table_bytes() const { return table_bytes_; }
  size_t entries() const { return next_id_ - oldest_id_; }
  uint32_t table_limit() const { return max_bytes_; }

 private:
  struct Entry {
    std::string name, value;
    uint64_t name_hash = 0, field_hash = 0;
  };
  // A slot of the open-addressed lookup tables: the upper half of a hash
  // (never 0: 0 marks an empty slot) and an entry id. A slot whose entry
  // was evicted stays until an insertion reuses it or the tables are
  // rebuilt; lookups skip it.
  struct Slot {
    uint32_t tag = 0;
    uint32_t id = 0;
  };
  enum class Form : uint8_t { incremental, without, never };
  // What the field at one place of the last block was sent as: a whole
  // field by index, or a literal of the given form whose name went by
  // index. `ref` is a dynamic entry's id, or kStaticRef and a static index.
  struct Remembered {
    enum What : uint8_t { nothing, whole, name };
    uint32_t ref = 0;
    What what = nothing;
    Form form = Form::incremental;
    bool never = false;
  };
  static constexpr uint32_t kStaticRef = 0x80000000u;
  static constexpr size_t kRememberedPlaces = 64;

  Form form_of(std::string_view name, std::string_view value, bool never_indexed) const;
  bool repeat(const Remembered& r, std::string_view name, std::string_view value, bool never_indexed,
              std::string& out) const;
  void look_up(size_t at, std::string_view name, std::string_view value, bool never_indexed, std::string& out);
  void remember(size_t at, const Remembered& r);
  bool strings_of(uint32_t ref, std::string_view& name, std::string_view& value) const;  // false: evicted
  static void put_indexed(std::string& out, size_t index);
  static void put_literal(std::string& out, Form form, size_t name_index, std::string_view name,
                          std::string_view value);
  template <typename Match>
  uint32_t find_in(const std::vector<Slot>& slots, uint64_t hash, Match match) const;
  uint32_t find_field(std::string_view name, std::string_view value, uint64_t hash) const;  // a ref; 0: none
  uint32_t find_name(std::string_view name, uint64_t hash) const;                          // a ref; 0: none
  bool insert(std::string_view name, std::string_view value, uint64_t name_hash, uint64_t field_hash);
  bool put_slot(std::vector<Slot>& slots, uint64_t hash, uint32_t id, bool by_name);
  void rebuild_slots();
  void evict_to(size_t bytes);
  void grow_ring();
  void set_limit(uint32_t bytes, std::string& out);
  bool live(uint32_t id) const { return id >= oldest_id_ && id < next_id_; }
  const Entry& entry(uint32_t id) const { return ring_[id & ring_mask_]; }
  size_t index_of(uint32_t id) const { return 61 + (next_id_ - id); }  // the newest is 62
  size_t index_of_ref(uint32_t ref) const { return (ref & kStaticRef) ? (ref & ~kStaticRef) : index_of(ref); }

  uint32_t own_limit_;
  uint32_t max_bytes_ = 4096;     // the limit the peer's decoder keeps now
  uint32_t peer_limit_ = 4096;    // the peer's latest SETTINGS_HEADER_TABLE_SIZE
  uint32_t smallest_since_ = 0;   // the smallest limit since the last block
  bool update_owed_ = false;
  // The entries, oldest_id_ to next_id_ - 1, each at its id's place in a
  // ring of a power of two (grown as needed; evicted places keep their
  // strings' room).
  std::vector<Entry> ring_;
  size_t ring_mask_ = 0;
  uint32_t oldest_id_ = 1;
  uint32_t next_id_ = 1;          // the id of the next entry inserted
  size_t table_bytes_ = 0;
  std::vector<Slot> field_slots_, name_slots_;  // allocated with the first entry, grown by rebuild_slots()
  size_t used_field_slots_ = 0;   // slots filled (not reused) since the last rebuild
  size_t used_name_slots_ = 0;
  std::vector<Remembered> remembered_;  // by place in the block
  size_t position_ = 0;                 // the place of the next field
};

}  // namespace onelayer
