// Random header blocks for the HPACK round-trip tests: fields drawn from
// given names and values (so that they repeat, move place, get evicted and
// come back) or made fresh by the test, some asked to go never indexed,
// and now and then the table limit changing, once or several times,
// between blocks.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/base/random.h"

namespace onelayer::test {

class RandomBlocks {
 public:
  struct Odds {
    size_t fresh_name = 0;   // 1 in this many names made fresh (0: none)
    size_t fresh_value = 4;  // 1 in this many values
    size_t never = 6;        // 1 in this many fields never indexed
  };
  RandomBlocks(uint32_t seed, std::vector<std::string> names, std::vector<std::string> values,
               std::vector<uint32_t> limits, Odds odds)
      : rng_(seed), names_(std::move(names)), values_(std::move(values)), limits_(std::move(limits)), odds_(odds) {}

  size_t pick(size_t n) { return static_cast<size_t>(rng_() % n); }

  // The table limits to apply before the next block, in order: in 1 block
  // of 40, one to three.
  std::vector<uint32_t> limit_changes() {
    std::vector<uint32_t> out;
    if (pick(40) == 0)
      for (size_t k = 1 + pick(3); k > 0; --k) out.push_back(limits_[pick(limits_.size())]);
    return out;
  }

  // Up to 11 fields; `fresh` makes a fresh name or value.
  template <typename Field>
  std::vector<Field> fields(const std::function<std::string()>& fresh) {
    std::vector<Field> out;
    for (size_t n = pick(12); n > 0; --n) {
      Field f;
      f.name = odds_.fresh_name && pick(odds_.fresh_name) == 0 ? fresh() : names_[pick(names_.size())];
      f.value = pick(odds_.fresh_value) == 0 ? fresh() : values_[pick(values_.size())];
      f.never_indexed = pick(odds_.never) == 0;
      out.push_back(std::move(f));
    }
    return out;
  }

 private:
  std::mt19937 rng_;
  std::vector<std::string> names_, values_;
  std::vector<uint32_t> limits_;
  Odds odds_;
};

// A block read back: the same names and values in order, and a field asked
// to go never indexed came so (an encoder may choose it on its own for
// secrets, so not the other way round). How many came never indexed.
template <typename Given, typename Got>
size_t check_read_back(const std::vector<Given>& given, const std::vector<Got>& got) {
  REQUIRE(got.size() == given.size());
  size_t never = 0;
  for (size_t i = 0; i < given.size(); ++i) {
    CHECK(got[i].name == given[i].name);
    CHECK(got[i].value == given[i].value);
    if (given[i].never_indexed) CHECK(got[i].never_indexed);
    never += got[i].never_indexed;
  }
  return never;
}

}  // namespace onelayer::test
