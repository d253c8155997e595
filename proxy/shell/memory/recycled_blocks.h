// Per-thread free lists of fixed-size heap blocks, for the objects every
// proxied request creates and destroys (a stream's state on each side, the
// exchange). A block freed goes on its thread's list for
// its size and the next object of that size takes it back, without a trip
// through malloc: on the HTTP/2 path hundreds of streams end together, and
// glibc's per-thread cache (seven chunks a size) overflows into its slower
// arena code.
//
// Bounded: a list keeps at most kMaxKept blocks (512 KiB); more are freed
// at once. Memory glibc would have kept as free chunks of its own heap
// anyway: the pages were touched by the burst either way.
// release_recycled_blocks() frees every list of the calling thread (the
// worker calls it through release_freed_memory() once a burst is over).
// A block may be freed on another thread than the one that took it: it
// joins that thread's list (the memory is the process's either way).
//
// Under AddressSanitizer every call goes straight to operator new/delete,
// so a use after free is still caught.
#pragma once

#include <cstddef>
#include <new>

#include "shell/memory/freed_memory.h"

namespace onelayer {

namespace recycled_blocks_detail {

struct FreeBlock {
  FreeBlock* next;
};

// One thread's list for one block size. Trivial (no constructor or
// destructor), so a thread_local one costs no guard on each use and stays
// usable while the thread exits.
struct FreeList {
  FreeBlock* head;
  size_t count;
  size_t limit;  // blocks kept at most: kMaxKept, 0 once the thread exits
  size_t size;   // 0 until enrolled
  FreeList* next_list;  // the thread's other lists
  void release();
};

// Links a thread's list into that thread's registry (once, at its first
// use) and sets its limit.
void enroll(FreeList& list, size_t size, size_t limit);

// A block back to the global operator delete, with its size where the
// compiler has sized deallocation (clang leaves it off by default).
inline void free_block(void* p, size_t size) noexcept {
#if defined(__cpp_sized_deallocation)
  ::operator delete(p, size);
#else
  (void)size;
  ::operator delete(p);
#endif
}

}  // namespace recycled_blocks_detail

// Blocks of `Size` bytes (aligned as operator new aligns).
template <size_t Size>
class RecycledBlocks {
 public:
  // Blocks kept at most per thread: 512 KiB of them (at least 64), room
  // for the objects of several hundred requests at once.
  static constexpr size_t kMaxKept = Size * 64 > 512 * 1024 ? 64 : 512 * 1024 / Size;
  static_assert(Size >= sizeof(recycled_blocks_detail::FreeBlock));

  static void* take() {
    if constexpr (kUnderAddressSanitizer) return ::operator new(Size);
    recycled_blocks_detail::FreeList& l = list();
    recycled_blocks_detail::FreeBlock* b = l.head;
    if (!b) return ::operator new(Size);
    l.head = b->next;
    --l.count;
    return b;
  }

  static void give(void* p) noexcept {
    if (!p) return;
    if constexpr (kUnderAddressSanitizer) return recycled_blocks_detail::free_block(p, Size);
    recycled_blocks_detail::FreeList& l = list();
    if (l.count >= l.limit) return recycled_blocks_detail::free_block(p, Size);
    auto* b = static_cast<recycled_blocks_detail::FreeBlock*>(p);
    b->next = l.head;
    l.head = b;
    ++l.count;
  }

  // Blocks on the calling thread's list (for tests).
  static size_t kept() { return list().count; }

 private:
  static recycled_blocks_detail::FreeList& list() {
    thread_local constinit recycled_blocks_detail::FreeList l{};
    if (l.size == 0) recycled_blocks_detail::enroll(l, Size, kMaxKept);
    return l;
  }
};

// Frees every block kept on the calling thread's lists.
void release_recycled_blocks();

// A class's operator new/delete through RecycledBlocks: `new T` takes a
// block of sizeof(T), `delete` gives it back. Other sizes (a class derived
// from T) go to the global operators.
#define ONELAYER_RECYCLED_BLOCKS(T)                                                            \
  static void* operator new(size_t n) {                                                        \
    return n == sizeof(T) ? ::onelayer::RecycledBlocks<sizeof(T)>::take() : ::operator new(n); \
  }                                                                                            \
  static void operator delete(void* p, size_t n) noexcept {                                    \
    if (n == sizeof(T)) ::onelayer::RecycledBlocks<sizeof(T)>::give(p);                        \
    else ::onelayer::recycled_blocks_detail::free_block(p, n);                                 \
  }

}  // namespace onelayer
