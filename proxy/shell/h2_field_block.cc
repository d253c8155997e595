#include "shell/h2_field_block.h"

namespace onelayer {

void H2FieldBlock::reserve(size_t fields, size_t bytes) {
  fields_.reserve(fields);
  bytes_.reserve(bytes);
}

void H2FieldBlock::put(std::string_view name, std::string_view value) {
  Span s{static_cast<uint32_t>(bytes_.size()), static_cast<uint32_t>(name.size()), 0,
         static_cast<uint32_t>(value.size())};
  size_t at = bytes_.size();
  bytes_.resize(at + name.size() + value.size());
  char* out = copy_lowercase(name, bytes_.data() + at);
  value.copy(out, value.size());
  s.value_at = static_cast<uint32_t>(at + name.size());
  fields_.push_back(s);
}

void H2FieldBlock::clear() {
  bytes_.clear();
  fields_.clear();
}

H2FieldBlock::Field H2FieldBlock::operator[](size_t i) const {
  const Span& s = fields_[i];
  std::string_view all(bytes_);
  return Field{all.substr(s.name_at, s.name_len), all.substr(s.value_at, s.value_len)};
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
