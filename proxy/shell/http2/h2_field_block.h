// The regular fields of one outgoing HTTP/2 head, built in place: every
// name (lower-cased on the way in, as HTTP/2 wants) and value is copied into
// one buffer, and each field is a pair of offsets into it. A head of a dozen
// fields costs one or two allocations instead of two strings per field, and
// H2Session hands the pairs to nghttp2 (which copies them once more into
// its frame) without another pass over the names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/http/http_headers.h"

namespace onelayer {

class H2FieldBlock final : public HeaderSink {
 public:
  struct Field {
    std::string_view name, value;
  };

  H2FieldBlock() = default;
  H2FieldBlock(const H2FieldBlock& other);
  H2FieldBlock& operator=(const H2FieldBlock& other);
  H2FieldBlock(H2FieldBlock&& other) noexcept;
  H2FieldBlock& operator=(H2FieldBlock&& other) noexcept;
  ~H2FieldBlock() = default;

  // Room for `fields` fields of `bytes` name and value bytes in all.
  void reserve(size_t fields, size_t bytes);
  // Appends a field; the name is stored lower-cased (copied and lowered in
  // one pass, straight into the buffer).
  void put(std::string_view name, std::string_view value) override;
  void clear() {
    size_ = 0;
    fields_.clear();
  }
  // Trades fields and buffers with `other`; no byte is copied.
  void swap(H2FieldBlock& other) noexcept {
    bytes_.swap(other.bytes_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
    fields_.swap(other.fields_);
  }

  size_t size() const { return fields_.size(); }
  bool empty() const { return fields_.empty(); }
  Field operator[](size_t i) const {
    const Span& s = fields_[i];
    const char* all = bytes_.get();
    return Field{std::string_view(all + s.name_at, s.name_len), std::string_view(all + s.value_at, s.value_len)};
  }
  // Name and value bytes of every field.
  size_t bytes() const { return size_; }
  // A copy as a field list (logs and tests).
  Headers headers() const;

 private:
  struct Span {
    uint32_t name_at, name_len, value_at, value_len;
  };
  void grow(size_t need);  // room for `need` bytes, the ones held kept

  // The bytes, without a terminator: a plain buffer (a std::string would
  // check its room once per append and zero what resize() adds).
  std::unique_ptr<char[]> bytes_;
  size_t size_ = 0;
  size_t capacity_ = 0;
  std::vector<Span> fields_;
};

}  // namespace onelayer
