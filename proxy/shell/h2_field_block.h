// The regular fields of one outgoing HTTP/2 head, built in place: every
// name (lower-cased on the way in, as HTTP/2 wants) and value is copied into
// one buffer, and each field is a pair of offsets into it. A head of a dozen
// fields costs one or two allocations instead of two strings per field, and
// H2Session hands the pairs to nghttp2 (which copies them once more into
// its frame) without another pass over the names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/http_headers.h"

namespace onelayer {

class H2FieldBlock final : public HeaderSink {
 public:
  struct Field {
    std::string_view name, value;
  };

  H2FieldBlock() = default;
  // Room for `fields` fields of `bytes` name and value bytes in all.
  void reserve(size_t fields, size_t bytes);
  // Appends a field; the name is stored lower-cased.
  void put(std::string_view name, std::string_view value) override;
  void clear();

  size_t size() const { return fields_.size(); }
  bool empty() const { return fields_.empty(); }
  Field operator[](size_t i) const {
    const Span& s = fields_[i];
    std::string_view all(bytes_);
    return Field{all.substr(s.name_at, s.name_len), all.substr(s.value_at, s.value_len)};
  }
  // Name and value bytes of every field.
  size_t bytes() const { return bytes_.size(); }
  // A copy as a field list (logs and tests).
  Headers headers() const;

 private:
  struct Span {
    uint32_t name_at, name_len, value_at, value_len;
  };
  std::string bytes_;
  std::vector<Span> fields_;
};

}  // namespace onelayer
