// A Random that returns a given sequence, so jittered waits are exact. Using
// more numbers than scripted fails the test.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/base/random.h"

namespace onelayer::test {

class ScriptedRandom final : public Random {
 public:
  ScriptedRandom(std::initializer_list<uint64_t> values) : values_(values) {}
  uint64_t next() override {
    if (pos_ >= values_.size()) {
      FAIL_CHECK("ScriptedRandom ran out of scripted values");
      return 0;
    }
    return values_[pos_++];
  }
  size_t used() const { return pos_; }

 private:
  std::vector<uint64_t> values_;
  size_t pos_ = 0;
};

}  // namespace onelayer::test
