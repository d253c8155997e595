// RecycledBlocks: per-thread free lists of fixed-size blocks.
#include <doctest/doctest.h>

#include <memory>
#include <thread>
#include <vector>

#include "shell/memory/recycled_blocks.h"

using namespace onelayer;

namespace {

struct Tracked {
  ONELAYER_RECYCLED_BLOCKS(Tracked)
  char bytes[200] = {};
};

struct DerivedTracked : Tracked {
  char more[50] = {};
};

constexpr bool kRecycles = !kUnderAddressSanitizer;

}  // namespace

TEST_CASE("recycled blocks: a freed block is the next one taken, on the same thread") {
  release_recycled_blocks();
  using Blocks = RecycledBlocks<96>;
  void* a = Blocks::take();
  void* b = Blocks::take();
  CHECK(a != b);
  Blocks::give(a);
  if (kRecycles) {
    CHECK(Blocks::kept() == 1);
    CHECK(Blocks::take() == a);
    CHECK(Blocks::kept() == 0);
  } else {
    CHECK(Blocks::kept() == 0);  // under ASan every block goes back to the heap
    a = Blocks::take();
  }
  Blocks::give(a);
  Blocks::give(b);
  Blocks::give(nullptr);  // ignored
  release_recycled_blocks();
  CHECK(Blocks::kept() == 0);
}

TEST_CASE("recycled blocks: a list keeps at most kMaxKept blocks") {
  release_recycled_blocks();
  using Blocks = RecycledBlocks<48>;
  std::vector<void*> taken;
  for (size_t i = 0; i < Blocks::kMaxKept + 10; ++i) taken.push_back(Blocks::take());
  for (void* p : taken) Blocks::give(p);
  CHECK(Blocks::kept() == (kRecycles ? Blocks::kMaxKept : 0));
  release_recycled_blocks();
  CHECK(Blocks::kept() == 0);
}

TEST_CASE("recycled blocks: lists are per thread, a block freed on another thread joins that thread's list") {
  release_recycled_blocks();
  using Blocks = RecycledBlocks<64>;
  void* p = Blocks::take();
  size_t kept_there = 99;
  std::thread([&] {
    Blocks::give(p);
    kept_there = Blocks::kept();
  }).join();  // the thread's list is freed as it exits
  CHECK(kept_there == (kRecycles ? 1 : 0));
  CHECK(Blocks::kept() == 0);
}

TEST_CASE("recycled blocks: a class's new and delete go through its size's list, a derived class's do not") {
  release_recycled_blocks();
  using Blocks = RecycledBlocks<sizeof(Tracked)>;
  auto* t = new Tracked;
  t->bytes[0] = 'x';
  delete t;
  CHECK(Blocks::kept() == (kRecycles ? 1 : 0));
  auto fresh = std::make_unique<Tracked>();
  CHECK(fresh->bytes[0] == 0);  // constructed anew in the recycled block
  CHECK(Blocks::kept() == 0);
  fresh.reset();
  Tracked* d = new DerivedTracked;  // another size: the global operators
  delete static_cast<DerivedTracked*>(d);
  CHECK(Blocks::kept() == (kRecycles ? 1 : 0));
  release_recycled_blocks();
}

