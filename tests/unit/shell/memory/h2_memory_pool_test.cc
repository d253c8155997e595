// H2MemoryPool: freed small blocks come back for requests of their size
// class, large ones go to malloc, realloc and calloc keep malloc's meaning,
// the free lists stay under their limit and empty when asked or when the
// last block comes back, and the sessions H2Session makes on a worker's
// thread allocate from the worker's pool. The pools below are made pooled
// by hand, so these tests check the pool's own code under the sanitizer
// build too (where a worker's pool passes everything through).
#include <doctest/doctest.h>
#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "h2_handler_stub.h"
#include "shell/memory/freed_memory.h"
#include "shell/memory/h2_memory_pool.h"
#include "shell/http2/h2_session.h"

using namespace onelayer;

namespace {

using Mode = H2MemoryPool::Mode;

// A pooled pool with one block out, so that the lists are not emptied when
// a test's other blocks come back.
struct PoolWithOneOut {
  H2MemoryPool pool;
  void* kept;
  explicit PoolWithOneOut(size_t limit = H2MemoryPool::kDefaultFreeBytesLimit)
      : pool(limit, Mode::pooled), kept(pool.allocate(8)) {}
  ~PoolWithOneOut() { pool.release(kept); }
};

void fill(void* p, size_t n, uint8_t seed) {
  auto* b = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) b[i] = uint8_t(seed + i * 7);
}

bool holds(const void* p, size_t n, uint8_t seed) {
  auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i] != uint8_t(seed + i * 7)) return false;
  return true;
}

}  // namespace

TEST_CASE("FreedSmallBlockComesBackForARequestOfItsClass") {
  PoolWithOneOut t;
  void* a = t.pool.allocate(100);  // class 7: 89 to 104 bytes
  REQUIRE(a);
  t.pool.release(a);
  CHECK(t.pool.free_bytes() >= 104);
  void* b = t.pool.allocate(89);
  CHECK(b == a);
  CHECK(t.pool.free_bytes() == 0);
  t.pool.release(b);
}

TEST_CASE("FreedSmallBlockDoesNotServeALargerClass") {
  PoolWithOneOut t;
  void* a = t.pool.allocate(100);
  t.pool.release(a);
  size_t spare = t.pool.free_bytes();
  void* b = t.pool.allocate(H2MemoryPool::kLargestPooled);
  CHECK(b != a);
  CHECK(t.pool.free_bytes() == spare);
  t.pool.release(b);
}

TEST_CASE("ZeroByteRequestGetsABlockOfTheSmallestClass") {
  PoolWithOneOut t;
  void* a = t.pool.allocate(0);
  REQUIRE(a);
  t.pool.release(a);
  CHECK(t.pool.allocate(16) == a);
  t.pool.release(a);
}

TEST_CASE("PooledBlockIsAskedOfMallocAtGlibcsChunkSizeForTheRequest") {
  for (size_t n = 24; n <= H2MemoryPool::kLargestPooled; ++n) {
    // glibc: n plus its 8-byte header, rounded up to 16, less the header.
    size_t glibc = (n + 8 + 15) / 16 * 16 - 8;
    CHECK(H2MemoryPool::block_bytes_for(n) == glibc);
  }
  CHECK(H2MemoryPool::block_bytes_for(0) == 24);  // room for a free-list link
}

TEST_CASE("FreedBlockServesTheLargestClassItsUsableSizeHolds") {
  PoolWithOneOut t;
  for (size_t n = 0; n <= H2MemoryPool::kLargestPooled; ++n) {
    void* p = t.pool.allocate(n);
    // malloc may give more than asked (glibc does not split off a remainder
    // too small to be a chunk).
    size_t usable = malloc_usable_size(p);
    size_t served = (usable + 8) / 16 * 16 - 8;
    t.pool.release(p);
    void* q = t.pool.allocate(served);
    CHECK(q == p);
    t.pool.release(q);
  }
}

TEST_CASE("BlocksAboveTheLargestClassGoStraightBackToMalloc") {
  PoolWithOneOut t;
  void* a = t.pool.allocate(4 * H2MemoryPool::kLargestPooled);
  REQUIRE(a);
  CHECK(t.pool.outstanding() == 2);
  t.pool.release(a);
  CHECK(t.pool.free_bytes() == 0);
  CHECK(t.pool.outstanding() == 1);
}

TEST_CASE("BlocksAreAlignedAsMallocsAreAtEverySize") {
  PoolWithOneOut t;
  std::vector<void*> blocks;
  for (size_t n = 0; n <= 2 * H2MemoryPool::kLargestPooled; n += 5) blocks.push_back(t.pool.allocate(n));
  // Again from the free lists.
  for (void* p : blocks) t.pool.release(p);
  blocks.clear();
  for (size_t n = 0; n <= 2 * H2MemoryPool::kLargestPooled; n += 5) blocks.push_back(t.pool.allocate(n));
  for (void* p : blocks) {
    CHECK(reinterpret_cast<uintptr_t>(p) % alignof(std::max_align_t) == 0);
    t.pool.release(p);
  }
}

TEST_CASE("ReallocKeepsTheContentGrowingAndShrinkingAcrossClasses") {
  PoolWithOneOut t;
  void* p = t.pool.allocate(20);
  fill(p, 20, 1);
  p = t.pool.reallocate(p, 300);  // a larger class
  REQUIRE(p);
  CHECK(holds(p, 20, 1));
  fill(p, 300, 2);
  p = t.pool.reallocate(p, 3000);  // past the largest class
  REQUIRE(p);
  CHECK(holds(p, 300, 2));
  fill(p, 3000, 3);
  p = t.pool.reallocate(p, 6000);  // large to large
  REQUIRE(p);
  CHECK(holds(p, 3000, 3));
  p = t.pool.reallocate(p, 40);  // back to a small class
  REQUIRE(p);
  CHECK(holds(p, 40, 3));
  void* same = t.pool.reallocate(p, 30);  // still fits, not half empty
  CHECK(same == p);
  CHECK(holds(p, 30, 3));
  p = t.pool.reallocate(p, 5);  // a smaller class
  REQUIRE(p);
  CHECK(holds(p, 5, 3));
  CHECK(t.pool.outstanding() == 2);
  t.pool.release(p);
  CHECK(t.pool.outstanding() == 1);
}

TEST_CASE("ReallocOfNullAllocatesAndToZeroFrees") {
  PoolWithOneOut t;
  void* p = t.pool.reallocate(nullptr, 50);
  REQUIRE(p);
  CHECK(t.pool.outstanding() == 2);
  CHECK(t.pool.reallocate(p, 0) == nullptr);
  CHECK(t.pool.outstanding() == 1);
  CHECK(t.pool.allocate(50) == p);  // it was given back to the pool
  t.pool.release(p);
}

TEST_CASE("CallocZeroesAReusedBlock") {
  PoolWithOneOut t;
  void* a = t.pool.allocate(64);
  std::memset(a, 0xab, 64);
  t.pool.release(a);
  void* z = t.pool.allocate_zeroed(4, 16);
  REQUIRE(z == a);
  CHECK(std::string(static_cast<char*>(z), 64) == std::string(64, '\0'));
  t.pool.release(z);
  void* big = t.pool.allocate_zeroed(3, H2MemoryPool::kLargestPooled);
  REQUIRE(big);
  CHECK(std::string(static_cast<char*>(big), 3 * H2MemoryPool::kLargestPooled) ==
        std::string(3 * H2MemoryPool::kLargestPooled, '\0'));
  t.pool.release(big);
}

TEST_CASE("CallocRefusesACountTimesSizeThatOverflows") {
  PoolWithOneOut t;
  CHECK(t.pool.allocate_zeroed(SIZE_MAX / 2, 3) == nullptr);
  CHECK(t.pool.allocate_zeroed(size_t(1) << 33, size_t(1) << 33) == nullptr);
  CHECK(t.pool.outstanding() == 1);
}

TEST_CASE("FreeListsHoldNoMoreThanTheirLimit") {
  constexpr size_t kLimit = 1000;
  PoolWithOneOut t(kLimit);
  std::vector<void*> blocks;
  for (int i = 0; i < 20; ++i) blocks.push_back(t.pool.allocate(100));
  for (void* p : blocks) t.pool.release(p);
  CHECK(t.pool.free_bytes() <= kLimit);
  CHECK(t.pool.free_bytes() > kLimit - 2 * 128);  // filled up to it
  CHECK(t.pool.outstanding() == 1);
}

TEST_CASE("TrimGivesEveryFreeBlockBack") {
  PoolWithOneOut t;
  std::vector<void*> blocks;
  for (size_t n = 10; n < 900; n += 50) blocks.push_back(t.pool.allocate(n));
  for (void* p : blocks) t.pool.release(p);
  REQUIRE(t.pool.free_bytes() > 0);
  t.pool.trim();
  CHECK(t.pool.free_bytes() == 0);
  void* again = t.pool.allocate(10);  // from malloc again
  CHECK(again);
  t.pool.release(again);
}

TEST_CASE("LastBlockBackEmptiesTheFreeLists") {
  H2MemoryPool pool(H2MemoryPool::kDefaultFreeBytesLimit, Mode::pooled);
  void* a = pool.allocate(100);
  void* b = pool.allocate(200);
  pool.release(a);
  CHECK(pool.free_bytes() > 0);
  pool.release(b);
  CHECK(pool.outstanding() == 0);
  CHECK(pool.free_bytes() == 0);
}

TEST_CASE("PassThroughPoolKeepsNothing") {
  H2MemoryPool pool(H2MemoryPool::kDefaultFreeBytesLimit, Mode::pass_through);
  void* keep = pool.allocate(8);
  void* a = pool.allocate(100);
  pool.release(a);
  CHECK(pool.free_bytes() == 0);
  void* b = pool.reallocate(pool.allocate_zeroed(2, 10), 500);
  REQUIRE(b);
  pool.release(b);
  CHECK(pool.free_bytes() == 0);
  pool.release(keep);
  CHECK(pool.mem() == nullptr);  // sessions take nghttp2's own allocator
}

TEST_CASE("DefaultPoolPoolsOnGlibcsMallocOutsideTheSanitizer") {
  REQUIRE(!allocator_is_mimalloc());  // the test binaries run on glibc's malloc
  H2MemoryPool pool;
  void* keep = pool.allocate(8);
  pool.release(pool.allocate(100));
  CHECK((pool.free_bytes() > 0) == !kUnderAddressSanitizer);
  pool.release(keep);
}

TEST_CASE("NghttpCallsThroughMemReachThePool") {
  PoolWithOneOut t;
  nghttp2_mem* mem = t.pool.mem();
  void* p = mem->malloc(40, mem->mem_user_data);
  CHECK(t.pool.outstanding() == 2);
  p = mem->realloc(p, 400, mem->mem_user_data);
  void* z = mem->calloc(2, 8, mem->mem_user_data);
  CHECK(t.pool.outstanding() == 3);
  mem->free(p, mem->mem_user_data);
  mem->free(z, mem->mem_user_data);
  mem->free(nullptr, mem->mem_user_data);
  CHECK(t.pool.outstanding() == 1);
  CHECK(t.pool.free_bytes() > 0);
}

TEST_CASE("NghttpCallsThroughMemKeepTheCountOfBlocksOutOnEveryPath") {
  // nghttp2's callbacks take the pooled paths directly (no mode test): the
  // same accounting as the public calls, large blocks and realloc's edges
  // included, and the lists emptied when the last block comes back.
  H2MemoryPool pool(H2MemoryPool::kDefaultFreeBytesLimit, Mode::pooled);
  nghttp2_mem* mem = pool.mem();
  REQUIRE(mem != nullptr);
  void* ud = mem->mem_user_data;
  void* small = mem->malloc(40, ud);
  void* large = mem->malloc(4 * H2MemoryPool::kLargestPooled, ud);
  void* zeroed_large = mem->calloc(3, H2MemoryPool::kLargestPooled, ud);
  void* from_null = mem->realloc(nullptr, 100, ud);
  REQUIRE((small && large && zeroed_large && from_null));
  CHECK(pool.outstanding() == 4);
  fill(small, 40, 5);
  small = mem->realloc(small, 700, ud);  // to a larger class: a new block, the old one on its list
  REQUIRE(small);
  CHECK(holds(small, 40, 5));
  CHECK(pool.outstanding() == 4);
  CHECK(pool.free_bytes() > 0);
  CHECK(mem->realloc(from_null, 0, ud) == nullptr);  // frees
  CHECK(pool.outstanding() == 3);
  mem->free(nullptr, ud);
  CHECK(pool.outstanding() == 3);
  void* zeroed = mem->calloc(5, 8, ud);
  REQUIRE(zeroed);
  CHECK(std::string(static_cast<char*>(zeroed), 40) == std::string(40, '\0'));
  CHECK(pool.outstanding() == 4);
  for (void* p : {small, large, zeroed_large, zeroed}) mem->free(p, ud);
  CHECK(pool.outstanding() == 0);
  CHECK(pool.free_bytes() == 0);
}

TEST_CASE("SessionsMadeOnAWorkersThreadAllocateFromItsPool") {
  H2MemoryPool pool(H2MemoryPool::kDefaultFreeBytesLimit, Mode::pooled);
  test::H2HandlerStub handler;
  H2MemoryPool::set_for_this_thread(&pool);
  {
    H2Session client(H2Session::Role::client, &handler);
    H2Session::Head head;
    head.method = "GET";
    head.scheme = "http";
    head.authority = "example.test";
    head.path = "/";
    CHECK(client.submit_request(head, true) > 0);
    std::string out;
    client.flush(out);
    CHECK(!out.empty());
    CHECK(pool.outstanding() > 0);
  }
  H2MemoryPool::set_for_this_thread(nullptr);
  // The session freed all it had; with it gone, the pool kept nothing.
  CHECK(pool.outstanding() == 0);
  CHECK(pool.free_bytes() == 0);
  // Off a worker's thread: nghttp2's own allocator.
  H2Session other(H2Session::Role::server, &handler);
  CHECK(pool.outstanding() == 0);
}
