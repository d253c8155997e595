#include "shell/h2_field_block.h"

namespace onelayer {

void H2FieldBlock::reserve(size_t fields, size_t bytes) {
  fields_.reserve(fields);
  bytes_.reserve(bytes);
}

void H2FieldBlock::put(std::string_view name, std::string_view value) {
  const size_t at = bytes_.size();
  bytes_.append(name);
  copy_lowercase(std::string_view(bytes_.data() + at, name.size()), bytes_.data() + at);  // in place
  bytes_.append(value);
  fields_.push_back(Span{static_cast<uint32_t>(at), static_cast<uint32_t>(name.size()),
                         static_cast<uint32_t>(at + name.size()), static_cast<uint32_t>(value.size())});
}

void H2FieldBlock::clear() {
  bytes_.clear();
  fields_.clear();
}

Headers H2FieldBlock::headers() const {
  Headers out;
  out.reserve(fields_.size());
  for (size_t i = 0; i < fields_.size(); ++i) {
    Field f = (*this)[i];
    out.push_back(Header{std::string(f.name), std::string(f.value)});
  }
  return out;
}

}  // namespace onelayer
