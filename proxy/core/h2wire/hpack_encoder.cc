#include "core/h2wire/hpack_encoder.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/h2wire/hpack_static_table.h"

namespace onelayer {
namespace {

uint64_t mix(uint64_t h, uint64_t word) {
  h ^= word;
  h *= 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

uint64_t load8(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}
uint64_t load4(const char* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

// Eight bytes at a time, the last eight overlapping the ones before (the
// length is hashed too); names and most values are short. Loads of fixed
// sizes only: no call per string.
uint64_t hash_bytes(std::string_view s, uint64_t h) {
  const char* p = s.data();
  const size_t n = s.size();
  h = mix(h, n);
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8) h = mix(h, load8(p + i));
    return mix(h, load8(p + n - 8));
  }
  if (n >= 4) return mix(h, load4(p) << 32 | load4(p + n - 4));
  if (n > 0) return mix(h, uint64_t{uint8_t(p[0])} << 16 | uint64_t{uint8_t(p[n / 2])} << 8 | uint8_t(p[n - 1]));
  return h;
}

// Byte equality in words, as hash_bytes() reads them; inline, as it runs
// twice for most fields.
[[gnu::always_inline]] inline bool same_bytes(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  const char* p = a.data();
  const char* q = b.data();
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8)
      if (load8(p + i) != load8(q + i)) return false;
    return load8(p + n - 8) == load8(q + n - 8);
  }
  if (n >= 4) return load4(p) == load4(q) && load4(p + n - 4) == load4(q + n - 4);
  for (size_t i = 0; i < n; ++i)
    if (p[i] != q[i]) return false;
  return true;
}

uint64_t name_hash(std::string_view name) { return hash_bytes(name, 0x243F6A8885A308D3ull); }
uint64_t field_hash(std::string_view value, uint64_t name_hash) { return hash_bytes(value, name_hash ^ 0x13198A2E03707344ull); }

uint32_t tag_of(uint64_t hash) { return static_cast<uint32_t>(hash >> 32) | 1u; }

// The static table's lookups, built once: ids are static indexes (1-61);
// a name maps to its first index.
struct StaticLookup {
  static constexpr size_t kSlots = 256;
  std::array<uint32_t, kSlots> field_tag{}, field_id{}, name_tag{}, name_id{};

  StaticLookup() {
    for (uint32_t i = 0; i < kHpackStaticTable.size(); ++i) {
      const HpackStaticField& f = kHpackStaticTable[i];
      uint64_t nh = name_hash(f.name);
      put(field_tag, field_id, field_hash(f.value, nh), i + 1, false);
      put(name_tag, name_id, nh, i + 1, true);
    }
  }
  static void put(std::array<uint32_t, kSlots>& tags, std::array<uint32_t, kSlots>& ids, uint64_t hash, uint32_t id,
                  bool by_name) {
    for (size_t i = hash;; ++i) {
      size_t at = i & (kSlots - 1);
      if (tags[at] == 0) {
        tags[at] = tag_of(hash);
        ids[at] = id;
        return;
      }
      // A name keeps its first index.
      if (by_name && kHpackStaticTable[ids[at] - 1].name == kHpackStaticTable[id - 1].name) return;
    }
  }
  size_t find_field(std::string_view name, std::string_view value, uint64_t hash) const {
    uint32_t tag = tag_of(hash);
    for (size_t i = hash;; ++i) {
      size_t at = i & (kSlots - 1);
      if (field_tag[at] == 0) return 0;
      if (field_tag[at] != tag) continue;
      const HpackStaticField& f = kHpackStaticTable[field_id[at] - 1];
      if (same_bytes(f.name, name) && same_bytes(f.value, value)) return field_id[at];
    }
  }
  size_t find_name(std::string_view name, uint64_t hash) const {
    uint32_t tag = tag_of(hash);
    for (size_t i = hash;; ++i) {
      size_t at = i & (kSlots - 1);
      if (name_tag[at] == 0) return 0;
      if (name_tag[at] == tag && same_bytes(kHpackStaticTable[name_id[at] - 1].name, name)) return name_id[at];
    }
  }
};

const StaticLookup& static_lookup() {
  static const StaticLookup lookup;
  return lookup;
}

// RFC 7541 5.1 past the prefix: the prefix all ones, then 7 bits a byte.
[[gnu::noinline]] void put_long_int(std::string& out, uint8_t first, size_t max, size_t value) {
  char bytes[10];
  size_t n = 0;
  bytes[n++] = static_cast<char>(first | max);
  value -= max;
  while (value >= 128) {
    bytes[n++] = static_cast<char>(0x80 | (value & 0x7f));
    value >>= 7;
  }
  bytes[n++] = static_cast<char>(value);
  out.append(bytes, n);
}

// RFC 7541 5.1: `first` holds the representation's pattern above its
// `prefix` bits. Most integers fit the prefix: one byte, inline.
[[gnu::always_inline]] inline void put_int(std::string& out, uint8_t first, unsigned prefix, size_t value) {
  const size_t max = (size_t{1} << prefix) - 1;
  if (value < max) out.push_back(static_cast<char>(first | value));
  else put_long_int(out, first, max, value);
}

// RFC 7541 5.2, never Huffman-coded: the length, then the bytes.
void put_string(std::string& out, std::string_view s) {
  put_int(out, 0x00, 7, s.size());
  out.append(s);
}

constexpr size_t kEntryOverhead = 32;  // RFC 7541 4.1

// The form a field's name calls for, whatever its value's size: secrets
// never indexed (a short cookie: RFC 7541 7.1.3), values no later message
// repeats without indexing, the rest with. By length first: one compare.
enum class NameKind : uint8_t { plain, secret, cookie, unrepeated };
NameKind kind_of(std::string_view name) {
  switch (name.size()) {
    case 3: return same_bytes(name, "age") ? NameKind::unrepeated : NameKind::plain;
    case 4: return same_bytes(name, "etag") ? NameKind::unrepeated : NameKind::plain;
    case 5: return same_bytes(name, ":path") ? NameKind::unrepeated : NameKind::plain;
    case 6: return same_bytes(name, "cookie") ? NameKind::cookie : NameKind::plain;
    case 8: return same_bytes(name, "location") ? NameKind::unrepeated : NameKind::plain;
    case 10: return same_bytes(name, "set-cookie") ? NameKind::unrepeated : NameKind::plain;
    case 13:
      if (same_bytes(name, "authorization")) return NameKind::secret;
      return same_bytes(name, "if-none-match") ? NameKind::unrepeated : NameKind::plain;
    case 14: return same_bytes(name, "content-length") ? NameKind::unrepeated : NameKind::plain;
    case 17: return same_bytes(name, "if-modified-since") ? NameKind::unrepeated : NameKind::plain;
    default: return NameKind::plain;
  }
}

// The lookup tables start small (1 KiB for both) and double when a
// rebuild finds them over half full with live entries.
constexpr size_t kFirstSlots = 64;

}  // namespace

HpackEncoder::HpackEncoder(uint32_t own_limit) : own_limit_(own_limit) {
  if (own_limit_ < max_bytes_) {
    // The peer's decoder starts at 4096: it hears of the smaller table first.
    update_owed_ = true;
    smallest_since_ = own_limit_;
  }
}

void HpackEncoder::peer_table_limit(uint32_t bytes) {
  peer_limit_ = bytes;
  uint32_t effective = std::min(bytes, own_limit_);
  smallest_since_ = update_owed_ ? std::min(smallest_since_, effective) : effective;
  update_owed_ = true;
}

void HpackEncoder::begin_block(std::string& out) {
  position_ = 0;
  if (!update_owed_) return;
  update_owed_ = false;
  const uint32_t target = std::min(peer_limit_, own_limit_);
  if (smallest_since_ < target) {
    set_limit(smallest_since_, out);
    set_limit(target, out);
  } else if (target != max_bytes_) {
    set_limit(target, out);
  }
}

void HpackEncoder::set_limit(uint32_t bytes, std::string& out) {
  max_bytes_ = bytes;
  evict_to(bytes);
  put_int(out, 0x20, 5, bytes);
}

HpackEncoder::Form HpackEncoder::form_of(std::string_view name, std::string_view value, bool never_indexed) const {
  if (never_indexed) return Form::never;
  switch (kind_of(name)) {
    case NameKind::secret: return Form::never;
    case NameKind::cookie:
      if (value.size() < 20) return Form::never;
      break;
    case NameKind::unrepeated: return Form::without;
    case NameKind::plain: break;
  }
  if ((name.size() + value.size() + kEntryOverhead) * 4 > size_t{max_bytes_} * 3) return Form::without;
  return Form::incremental;
}

[[gnu::always_inline]] inline void HpackEncoder::put_indexed(std::string& out, size_t index) {
  put_int(out, 0x80, 7, index);
}

void HpackEncoder::put_literal(std::string& out, Form form, size_t name_index, std::string_view name,
                               std::string_view value) {
  switch (form) {
    case Form::incremental: put_int(out, 0x40, 6, name_index); break;
    case Form::without: put_int(out, 0x00, 4, name_index); break;
    case Form::never: put_int(out, 0x10, 4, name_index); break;
  }
  if (name_index == 0) put_string(out, name);
  put_string(out, value);
}

bool HpackEncoder::strings_of(uint32_t ref, std::string_view& name, std::string_view& value) const {
  if (ref & kStaticRef) {
    const HpackStaticField& f = kHpackStaticTable[(ref & ~kStaticRef) - 1];
    name = f.name;
    value = f.value;
    return true;
  }
  if (!live(ref)) return false;
  const Entry& e = entry(ref);
  name = e.name;
  value = e.value;
  return true;
}

// The field at this place of the previous block, if this one is the same
// (the same whole field, or the same name sent the same literal way): no
// hash and no table lookup, only the bytes compared.
[[gnu::always_inline]] inline bool HpackEncoder::repeat(const Remembered& r, std::string_view name,
                                                        std::string_view value, bool never_indexed,
                                                        std::string& out) const {
  std::string_view n, v;
  switch (r.what) {
    case Remembered::whole:
      if (never_indexed || !strings_of(r.ref, n, v) || !same_bytes(n, name) || !same_bytes(v, value)) return false;
      put_indexed(out, index_of_ref(r.ref));
      return true;
    case Remembered::name:
      if (r.never != never_indexed || !strings_of(r.ref, n, v) || !same_bytes(n, name)) return false;
      if (form_of(name, value, never_indexed) != r.form) return false;
      put_literal(out, r.form, index_of_ref(r.ref), name, value);
      return true;
    default:
      return false;
  }
}

void HpackEncoder::remember(size_t at, const Remembered& r) {
  if (at >= kRememberedPlaces) return;
  if (at >= remembered_.size()) remembered_.resize(at + 1);
  remembered_[at] = r;
}

void HpackEncoder::field(std::string_view name, std::string_view value, bool never_indexed, std::string& out) {
  const size_t at = position_++;
  if (at < remembered_.size() && repeat(remembered_[at], name, value, never_indexed, out)) return;
  look_up(at, name, value, never_indexed, out);
}

// A field that is not what its place held last time: hashed, looked up,
// perhaps entered. Out of line, so that the common path above keeps to a
// few registers (inlined, this path's made every field save and restore
// them all: about 20 instructions a field).
[[gnu::noinline]] void HpackEncoder::look_up(size_t at, std::string_view name, std::string_view value,
                                              bool never_indexed, std::string& out) {
  const uint64_t nh = name_hash(name);
  const uint64_t fh = field_hash(value, nh);
  // A whole field in a table goes by index, unless it is to go never
  // indexed (asked for, or a secret: the static table holds authorization
  // and cookie whole, empty).
  const Form form = form_of(name, value, never_indexed);
  if (form != Form::never) {
    if (uint32_t ref = find_field(name, value, fh)) {
      put_indexed(out, index_of_ref(ref));
      remember(at, Remembered{ref, Remembered::whole, Form::incremental, false});
      return;
    }
  }
  const uint32_t name_ref = find_name(name, nh);
  put_literal(out, form, name_ref ? index_of_ref(name_ref) : 0, name, value);
  if (form == Form::incremental) {
    if (insert(name, value, nh, fh)) remember(at, Remembered{next_id_ - 1, Remembered::whole, form, false});
    return;
  }
  // Remembered by name unless the static table holds fields of that name
  // whole (`:path` "/"): another value may be one of them next time.
  if (name_ref && !((name_ref & kStaticRef) && !kHpackStaticTable[(name_ref & ~kStaticRef) - 1].value.empty()))
    remember(at, Remembered{name_ref, Remembered::name, form, never_indexed});
}

// The id of the first live entry on `hash`'s path through `slots` that
// `match` takes; 0 when the path ends first.
template <typename Match>
uint32_t HpackEncoder::find_in(const std::vector<Slot>& slots, uint64_t hash, Match match) const {
  if (slots.empty()) return 0;
  const size_t mask = slots.size() - 1;
  const uint32_t tag = tag_of(hash);
  for (size_t i = hash;; ++i) {
    const Slot& s = slots[i & mask];
    if (s.tag == 0) return 0;
    if (s.tag == tag && live(s.id) && match(entry(s.id))) return s.id;
  }
}

uint32_t HpackEncoder::find_field(std::string_view name, std::string_view value, uint64_t hash) const {
  if (size_t index = static_lookup().find_field(name, value, hash)) return kStaticRef | static_cast<uint32_t>(index);
  return find_in(field_slots_, hash, [&](const Entry& e) {
    return e.field_hash == hash && same_bytes(e.name, name) && same_bytes(e.value, value);
  });
}

uint32_t HpackEncoder::find_name(std::string_view name, uint64_t hash) const {
  if (size_t index = static_lookup().find_name(name, hash)) return kStaticRef | static_cast<uint32_t>(index);
  return find_in(name_slots_, hash, [&](const Entry& e) { return e.name_hash == hash && same_bytes(e.name, name); });
}

void HpackEncoder::evict_to(size_t bytes) {
  while (table_bytes_ > bytes) {
    Entry& e = ring_[oldest_id_ & ring_mask_];
    table_bytes_ -= e.name.size() + e.value.size() + kEntryOverhead;
    e.name.clear();
    e.value.clear();
    ++oldest_id_;
  }
}

// Doubles the ring (entries keep their ids: each moves to its slot in the
// larger one).
void HpackEncoder::grow_ring() {
  std::vector<Entry> larger(ring_.empty() ? 16 : ring_.size() * 2);
  const size_t mask = larger.size() - 1;
  for (uint32_t id = oldest_id_; id != next_id_; ++id) larger[id & mask] = std::move(ring_[id & ring_mask_]);
  ring_ = std::move(larger);
  ring_mask_ = mask;
}

bool HpackEncoder::insert(std::string_view name, std::string_view value, uint64_t nh, uint64_t fh) {
  const size_t size = name.size() + value.size() + kEntryOverhead;
  if (size > max_bytes_) return false;  // form_of() keeps these out
  evict_to(max_bytes_ - size);
  if (field_slots_.empty()) {
    field_slots_.resize(kFirstSlots);
    name_slots_.resize(kFirstSlots);
  } else if (std::max(used_field_slots_, used_name_slots_) * 4 > field_slots_.size() * 3 || next_id_ > (1u << 30)) {
    rebuild_slots();
  }
  if (entries() == ring_.size()) grow_ring();
  const uint32_t id = next_id_++;
  Entry& e = ring_[id & ring_mask_];
  e.name.assign(name);
  e.value.assign(value);
  e.name_hash = nh;
  e.field_hash = fh;
  table_bytes_ += size;
  used_field_slots_ += put_slot(field_slots_, fh, id, false);
  used_name_slots_ += put_slot(name_slots_, nh, id, true);
  return true;
}

// Takes the first slot on the hash's path that is empty or whose entry was
// evicted; a name's slot also takes over the slot of an older entry of the
// same name, so the newest one is found. True when the slot was empty.
bool HpackEncoder::put_slot(std::vector<Slot>& slots, uint64_t hash, uint32_t id, bool by_name) {
  const size_t mask = slots.size() - 1;
  const uint32_t tag = tag_of(hash);
  const Entry& added = entry(id);
  for (size_t i = hash;; ++i) {
    Slot& s = slots[i & mask];
    bool take = s.tag == 0 || !live(s.id) || (by_name && s.tag == tag && same_bytes(entry(s.id).name, added.name));
    if (!take) continue;
    const bool was_empty = s.tag == 0;
    s = Slot{tag, id};
    return was_empty;
  }
}

// Empties both lookup tables (larger if need be) and enters the live
// entries again, oldest first, renumbered from 1 (an entry's index depends
// only on how many came after it, so no index changes).
void HpackEncoder::rebuild_slots() {
  size_t size = field_slots_.size();
  while (2 * (entries() + 1) > size) size *= 2;  // the live entries and the one coming at most half
  field_slots_.assign(size, Slot{});
  name_slots_.assign(size, Slot{});
  used_field_slots_ = used_name_slots_ = 0;
  if (oldest_id_ != 1) {  // renumbered from 1, each entry moved to its new id's place
    std::vector<Entry> renumbered(ring_.size());
    for (uint32_t id = oldest_id_; id != next_id_; ++id)
      renumbered[(id - oldest_id_ + 1) & ring_mask_] = std::move(ring_[id & ring_mask_]);
    ring_ = std::move(renumbered);
    next_id_ = next_id_ - oldest_id_ + 1;
    oldest_id_ = 1;
    remembered_.clear();  // their ids are the old ones
  }
  for (uint32_t id = oldest_id_; id < next_id_; ++id) {
    const Entry& e = entry(id);
    used_field_slots_ += put_slot(field_slots_, e.field_hash, id, false);
    used_name_slots_ += put_slot(name_slots_, e.name_hash, id, true);
  }
}

}  // namespace onelayer
