#include "core/h2wire/hpack_decoder.h"

#include <algorithm>
#include <utility>

#include "core/h2wire/hpack_huffman.h"
#include "core/h2wire/hpack_static_table.h"

namespace onelayer {
namespace {

constexpr size_t kEntryOverhead = 32;  // RFC 7541 4.1
// Room an evicted entry's string keeps for the next one at its place; a
// larger one is given back. Without this a peer could leave a large string
// at every place of a grown ring (up to 256 places of 4 KiB in a 4 KiB
// table) and make each connection hold that much.
constexpr size_t kKeptEntryRoom = 256;

// RFC 7541 5.1 past a prefix of all ones: 7 bits a byte, least significant
// first, the top bit set on all but the last. Five bytes carry 35 bits;
// anything past 32 bits is refused (no length or index that large makes
// sense, and nothing can overflow).
[[gnu::noinline]] const char* read_long_int(const uint8_t*& p, const uint8_t* end, uint32_t& value) {
  uint64_t v = value;
  for (unsigned shift = 0; shift <= 28; shift += 7) {
    if (p == end) return "truncated block";
    const uint8_t b = *p++;
    v += uint64_t{b & 0x7fu} << shift;
    if (v > UINT32_MAX) return "integer too large";
    if (!(b & 0x80)) {
      value = static_cast<uint32_t>(v);
      return nullptr;
    }
  }
  return "integer too large";
}

// RFC 7541 5.1 at p (which is before `end`), the prefix being the bits of
// `mask`. Most integers fit the prefix: one byte, inline. nullptr, or why
// the integer is malformed.
[[gnu::always_inline]] inline const char* read_int(const uint8_t*& p, const uint8_t* end, uint8_t mask,
                                                  uint32_t& value) {
  value = *p++ & mask;
  if (value < mask) return nullptr;
  return read_long_int(p, end, value);
}

}  // namespace

HpackDecoder::HpackDecoder(uint32_t settings_limit) : settings_limit_(settings_limit) {}

void HpackDecoder::settings_limit(uint32_t bytes) {
  settings_limit_ = bytes;
  if (bytes >= limit_) return;
  owed_at_most_ = update_owed_ ? std::min(owed_at_most_, bytes) : bytes;
  update_owed_ = true;
}

HpackDecoder::Result HpackDecoder::decode(std::string_view block, Sink& sink) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(block.data());
  const uint8_t* const end = p + block.size();
  if (const char* why = size_updates(p, end)) return fail(why);
  for (size_t place = 0; p != end; ++place) {
    const uint8_t first = *p;
    std::string_view name, value;
    uint32_t index;
    bool never_indexed = false;
    if (first & 0x80) {  // indexed field (RFC 7541 6.1)
      if (const char* why = read_int(p, end, 0x7f, index)) return fail(why);
      if (!field_at(index, name, value)) return fail(index == 0 ? "index 0" : "index past the table");
    } else if ((first & 0xe0) == 0x20) {  // RFC 7541 4.2: only before the first field
      return fail("size update after a field");
    } else {
      // A literal (RFC 7541 6.2): with incremental indexing (01, a 6-bit
      // name index), without indexing (0000) or never indexed (0001, 4 bits).
      const bool indexing = first & 0x40;
      never_indexed = (first & 0xf0) == 0x10;
      // Grown now, before a view of an entry is taken: growing moves the
      // strings (a short one's bytes with it).
      if (indexing && entries_ == ring_.size()) grow_ring();
      if (const char* why = read_int(p, end, indexing ? 0x3f : 0x0f, index)) return fail(why);
      if (index == 0) {
        if (const char* why = string_at(p, end, place, true, name)) return fail(why);
      } else if (std::string_view unused; !field_at(index, name, unused)) {
        return fail("index past the table");
      }
      if (const char* why = string_at(p, end, place, false, value)) return fail(why);
      if (indexing) insert(name, value, index != 0);
    }
    if (!sink.field(name, value, never_indexed)) return Result::stopped;
  }
  return Result::ok;
}

// The size updates a block may begin with (RFC 7541 4.2, 6.3): each within
// the settings limit, the table evicting down to it, and one of them at
// most the smallest settings limit since the last block when it went
// below the table's limit.
const char* HpackDecoder::size_updates(const uint8_t*& p, const uint8_t* end) {
  while (p != end && (*p & 0xe0) == 0x20) {
    uint32_t bytes;
    if (const char* why = read_int(p, end, 0x1f, bytes)) return why;
    if (bytes > settings_limit_) return "size update over the limit";
    if (bytes <= owed_at_most_) update_owed_ = false;
    limit_ = bytes;
    evict_to(bytes);
  }
  return update_owed_ ? "size update missing" : nullptr;
}

// RFC 7541 5.2 at p: a view into the block when the string is sent as it
// is, else its Huffman-decoded text.
const char* HpackDecoder::string_at(const uint8_t*& p, const uint8_t* end, size_t place, bool is_name,
                                    std::string_view& out) {
  if (p == end) return "truncated block";
  const bool huffman = *p & 0x80;
  uint32_t length;
  if (const char* why = read_int(p, end, 0x7f, length)) return why;
  if (length > static_cast<size_t>(end - p)) return "string past the block";
  const std::string_view coded(reinterpret_cast<const char*>(p), length);
  p += length;
  if (!huffman) {
    out = coded;
    return nullptr;
  }
  return huffman_text(coded, place, is_name, out);
}

// The text of a Huffman-coded string: the remembered text when the same
// bytes came at this place last time (the header comment says why), else
// decoded afresh and remembered.
const char* HpackDecoder::huffman_text(std::string_view coded, size_t place, bool is_name, std::string_view& out) {
  if (place >= kRememberedPlaces || coded.size() > kRememberedBytes) {
    ++huffman_decoded_;
    std::string& text = is_name ? name_scratch_ : value_scratch_;
    text.clear();
    if (!HpackHuffman::decode(coded, text)) return "bad huffman string";
    out = text;
    return nullptr;
  }
  // Growing moves the places' strings; no view of them is held here (a
  // name read at this place made the place already).
  if (place >= remembered_.size()) remembered_.resize(place + 1);
  Remembered& r = is_name ? remembered_[place].name : remembered_[place].value;
  if (r.coded == coded) {
    out = r.text;
    return nullptr;
  }
  ++huffman_decoded_;
  r.text.clear();
  if (!HpackHuffman::decode(coded, r.text)) {
    r.coded.clear();
    r.text.clear();  // empty coded bytes are the empty text
    return "bad huffman string";
  }
  r.coded.assign(coded);
  out = r.text;
  return nullptr;
}

// Index 1-61: the static table; 62 on: the dynamic table, newest first.
bool HpackDecoder::field_at(uint32_t index, std::string_view& name, std::string_view& value) const {
  if (index - 1 < kHpackStaticTable.size()) {
    name = kHpackStaticTable[index - 1].name;
    value = kHpackStaticTable[index - 1].value;
    return true;
  }
  const uint32_t back = index - 1 - static_cast<uint32_t>(kHpackStaticTable.size());
  if (index == 0 || back >= entries_) return false;
  const Entry& e = ring_[(next_ - 1 - back) & ring_mask_];
  name = e.name;
  value = e.value;
  return true;
}

// Enters a field (RFC 7541 4.4) and points the views at the entry's
// strings. The new entry's place is free (grow_ring() made room), so the
// views may still be of any live entry while it is copied; eviction comes
// after. An entry larger than the table empties it and is not entered; a
// name taken from the table is copied first (eviction may free its room).
// The value is a literal's: the block's bytes or Huffman text, never an
// entry's.
void HpackDecoder::insert(std::string_view& name, std::string_view& value, bool name_from_table) {
  const size_t size = name.size() + value.size() + kEntryOverhead;
  if (size > limit_) {
    if (name_from_table) name = name_scratch_.assign(name);
    evict_to(0);
    return;
  }
  Entry& e = ring_[next_ & ring_mask_];
  e.name.assign(name);
  e.value.assign(value);
  evict_to(limit_ - size);
  ++next_;
  ++entries_;
  table_bytes_ += size;
  name = e.name;
  value = e.value;
}

void HpackDecoder::evict_to(size_t bytes) {
  while (table_bytes_ > bytes) {
    Entry& e = ring_[(next_ - entries_) & ring_mask_];
    table_bytes_ -= e.name.size() + e.value.size() + kEntryOverhead;
    --entries_;
    if (e.name.capacity() > kKeptEntryRoom) std::string().swap(e.name);
    if (e.value.capacity() > kKeptEntryRoom) std::string().swap(e.value);
  }
}

size_t HpackDecoder::held_bytes() const {
  // A string's room past the few bytes kept inside it (no heap).
  auto room = [](const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; };
  size_t bytes = ring_.capacity() * sizeof(Entry) + remembered_.capacity() * sizeof(Place);
  for (const Entry& e : ring_) bytes += room(e.name) + room(e.value);
  for (const Place& p : remembered_)
    bytes += room(p.name.coded) + room(p.name.text) + room(p.value.coded) + room(p.value.text);
  return bytes + room(name_scratch_) + room(value_scratch_);
}

// Doubles the ring; entries keep their numbers, each moving to its place
// in the larger one.
void HpackDecoder::grow_ring() {
  std::vector<Entry> larger(ring_.empty() ? 16 : ring_.size() * 2);
  const uint32_t mask = static_cast<uint32_t>(larger.size() - 1);
  for (uint32_t n = next_ - entries_; n != next_; ++n) larger[n & mask] = std::move(ring_[n & ring_mask_]);
  ring_ = std::move(larger);
  ring_mask_ = mask;
}

}  // namespace onelayer
