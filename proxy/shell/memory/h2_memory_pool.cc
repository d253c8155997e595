#include "shell/memory/h2_memory_pool.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "shell/memory/freed_memory.h"

namespace onelayer {

namespace {

thread_local H2MemoryPool* this_thread_pool = nullptr;

H2MemoryPool& pool_of(void* user_data) { return *static_cast<H2MemoryPool*>(user_data); }

constexpr size_t kChunkHeader = 8;

// The class a block of `usable` bytes serves whole.
size_t class_of_block(size_t usable) { return (usable + kChunkHeader) / H2MemoryPool::kClassStep; }
size_t block_bytes(size_t c) { return c * H2MemoryPool::kClassStep - kChunkHeader; }
// The class whose blocks serve a request of `bytes` (at most kLargestPooled).
size_t class_for_request(size_t bytes, size_t smallest) {
  return std::max(smallest, (bytes + kChunkHeader + H2MemoryPool::kClassStep - 1) / H2MemoryPool::kClassStep);
}

}  // namespace

H2MemoryPool::Mode H2MemoryPool::default_mode() {
  return kUnderAddressSanitizer || allocator_is_mimalloc() ? Mode::pass_through : Mode::pooled;
}

H2MemoryPool::H2MemoryPool(size_t free_bytes_limit, Mode mode) : free_bytes_limit_(free_bytes_limit), mode_(mode) {
  // mem() hands these to nghttp2 only when the pool pools: they go straight
  // to the pooled paths, without the mode test of the public calls (two
  // instructions on each of the two dozen calls a request makes).
  mem_.mem_user_data = this;
  mem_.malloc = [](size_t bytes, void* ud) { return pool_of(ud).allocate_pooled(bytes); };
  mem_.free = [](void* p, void* ud) {
    if (p) pool_of(ud).release_pooled(p);  // nghttp2 frees null pointers too
  };
  mem_.calloc = [](size_t count, size_t size, void* ud) { return pool_of(ud).allocate_zeroed_pooled(count, size); };
  mem_.realloc = [](void* p, size_t bytes, void* ud) { return pool_of(ud).reallocate_pooled(p, bytes); };
}

H2MemoryPool::~H2MemoryPool() { trim(); }

void* H2MemoryPool::allocate(size_t bytes) {
  if (mode_ == Mode::pass_through) return std::malloc(bytes);
  return allocate_pooled(bytes);
}

void* H2MemoryPool::allocate_pooled(size_t bytes) {
  if (bytes > kLargestPooled) return allocate_large(bytes);
  size_t c = class_for_request(bytes, kSmallestClass);
  if (FreeBlock* b = free_[c]) {
    free_[c] = b->next;
    free_bytes_ -= b->bytes;
    ++outstanding_;
    return b;
  }
  // The class's full size, so that the block serves any request of its
  // class when it comes back.
  void* p = std::malloc(block_bytes(c));
  if (p) ++outstanding_;
  return p;
}

void* H2MemoryPool::allocate_large(size_t bytes) {
  void* p = std::malloc(bytes);
  if (p) ++outstanding_;
  return p;
}

void H2MemoryPool::release(void* p) {
  if (!p) return;
  if (mode_ == Mode::pass_through) return std::free(p);
  release_pooled(p);
}

void H2MemoryPool::release_pooled(void* p) {
  return_block(p);
  // The last block back: no session uses the pool now.
  if (--outstanding_ == 0) trim();
}

void H2MemoryPool::return_block(void* p) {
  size_t bytes = malloc_usable_size(p);
  size_t c = class_of_block(bytes);
  if (c < kSmallestClass || c > kClasses || free_bytes_ + bytes > free_bytes_limit_) return std::free(p);
  auto* b = static_cast<FreeBlock*>(p);
  b->next = free_[c];
  b->bytes = bytes;
  free_[c] = b;
  free_bytes_ += bytes;
}

void* H2MemoryPool::allocate_zeroed(size_t count, size_t size) {
  if (mode_ == Mode::pass_through) return std::calloc(count, size);
  return allocate_zeroed_pooled(count, size);
}

void* H2MemoryPool::allocate_zeroed_pooled(size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) return nullptr;
  if (bytes > kLargestPooled) {
    // calloc: fresh pages from the system come zeroed without a memset.
    void* p = std::calloc(count, size);
    if (p) ++outstanding_;
    return p;
  }
  void* p = allocate_pooled(bytes);
  if (p) std::memset(p, 0, bytes);
  return p;
}

void* H2MemoryPool::reallocate(void* p, size_t bytes) {
  if (mode_ == Mode::pass_through) return std::realloc(p, bytes);
  return reallocate_pooled(p, bytes);
}

void* H2MemoryPool::reallocate_pooled(void* p, size_t bytes) {
  if (!p) return allocate_pooled(bytes);
  if (bytes == 0) {
    release_pooled(p);
    return nullptr;
  }
  size_t have = malloc_usable_size(p);
  // Large to large: malloc's own realloc, which may grow in place.
  if (have > kLargestPooled && bytes > kLargestPooled) return std::realloc(p, bytes);
  // Fits, and does not waste more than half of the block.
  if (bytes <= have && bytes > have / 2) return p;
  void* q = allocate_pooled(bytes);
  if (!q) return nullptr;
  std::memcpy(q, p, std::min(have, bytes));
  return_block(p);
  --outstanding_;  // not zero: `q` is out
  return q;
}

size_t H2MemoryPool::block_bytes_for(size_t bytes) { return block_bytes(class_for_request(bytes, kSmallestClass)); }

void H2MemoryPool::trim() {
  for (FreeBlock*& head : free_) {
    while (FreeBlock* b = head) {
      head = b->next;
      std::free(b);
    }
  }
  free_bytes_ = 0;
}

H2MemoryPool* H2MemoryPool::of_this_thread() { return this_thread_pool; }

void H2MemoryPool::set_for_this_thread(H2MemoryPool* pool) { this_thread_pool = pool; }

}  // namespace onelayer
