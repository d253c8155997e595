#include "shell/http2/h2_field_block.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/base/ascii_words.h"

namespace onelayer {

H2FieldBlock::H2FieldBlock(const H2FieldBlock& other) : fields_(other.fields_) {
  if (other.size_ > 0) {
    grow(other.size_);
    std::memcpy(bytes_.get(), other.bytes_.get(), other.size_);
    size_ = other.size_;
  }
}

H2FieldBlock& H2FieldBlock::operator=(const H2FieldBlock& other) {
  if (this == &other) return *this;
  size_ = 0;
  if (other.size_ > capacity_) grow(other.size_);
  if (other.size_ > 0) std::memcpy(bytes_.get(), other.bytes_.get(), other.size_);
  size_ = other.size_;
  fields_ = other.fields_;
  return *this;
}

H2FieldBlock::H2FieldBlock(H2FieldBlock&& other) noexcept
    : bytes_(std::move(other.bytes_)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)),
      fields_(std::move(other.fields_)) {
  other.fields_.clear();
}

H2FieldBlock& H2FieldBlock::operator=(H2FieldBlock&& other) noexcept {
  if (this == &other) return *this;
  bytes_ = std::move(other.bytes_);
  size_ = std::exchange(other.size_, 0);
  capacity_ = std::exchange(other.capacity_, 0);
  fields_ = std::move(other.fields_);
  other.fields_.clear();
  return *this;
}

void H2FieldBlock::grow(size_t need) {
  size_t room = std::max({need, capacity_ * 2, size_t{256}});
  std::unique_ptr<char[]> more(new char[room]);
  if (size_ > 0) std::memcpy(more.get(), bytes_.get(), size_);
  bytes_ = std::move(more);
  capacity_ = room;
}

void H2FieldBlock::reserve(size_t fields, size_t bytes) {
  fields_.reserve(fields);
  if (bytes > capacity_) grow(bytes);
}

void H2FieldBlock::put(std::string_view name, std::string_view value) {
  const size_t at = size_;
  const size_t need = at + name.size() + value.size();
  if (need > capacity_) grow(need);
  char* dst = bytes_.get() + at;
  // Both copied inline, in words: names and most values are short.
  ascii_words::copy_short(value, ascii_words::copy_lowercase(name, dst));
  size_ = need;
  fields_.push_back(Span{static_cast<uint32_t>(at), static_cast<uint32_t>(name.size()),
                         static_cast<uint32_t>(at + name.size()), static_cast<uint32_t>(value.size())});
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
