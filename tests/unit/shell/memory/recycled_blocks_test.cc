// RecycledBlocks: per-thread free lists of fixed-size blocks.
#include <doctest/doctest.h>

#include <memory>
#include <thread>
#include <unordered_map>
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

TEST_CASE("recycled blocks: the allocator recycles single objects, not arrays") {
  release_recycled_blocks();
  struct Node {
    char bytes[72];
  };
  RecyclingAllocator<Node> alloc;
  Node* one = alloc.allocate(1);
  Node* many = alloc.allocate(5);
  alloc.deallocate(many, 5);
  CHECK(RecycledBlocks<sizeof(Node)>::kept() == 0);
  alloc.deallocate(one, 1);
  CHECK(RecycledBlocks<sizeof(Node)>::kept() == (kRecycles ? 1 : 0));
  if (kRecycles) CHECK(alloc.allocate(1) == one);
  else one = alloc.allocate(1);
  alloc.deallocate(one, 1);
  release_recycled_blocks();
}

TEST_CASE("recycled blocks: a map on the allocator works as a map") {
  release_recycled_blocks();
  using Map = std::unordered_map<int, int, std::hash<int>, std::equal_to<int>,
                                 RecyclingAllocator<std::pair<const int, int>>>;
  Map m;
  for (int i = 0; i < 100; ++i) m[i] = i * 2;
  for (int i = 0; i < 100; ++i) CHECK(m.at(i) == i * 2);
  m.clear();
  for (int i = 0; i < 50; ++i) m[i] = i;
  CHECK(m.size() == 50);
  m.clear();
  release_recycled_blocks();
}
