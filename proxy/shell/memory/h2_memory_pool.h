// H2MemoryPool: the allocator behind one worker's nghttp2 sessions. nghttp2
// allocates and frees a dozen small blocks for each proxied request (its
// streams, queued frames, copies of header lists); with hundreds of streams
// at once they are freed in bursts of one size, more than malloc's
// per-thread cache holds, and malloc's slow path then costs more than the
// request's own framing. The pool keeps freed blocks on a free list per size
// class and hands them out again; blocks over kLargestPooled bytes go
// straight to malloc and free.
//
// A block carries no header: it is an ordinary malloc block, and its class
// at free time is read from malloc_usable_size() (glibc's and mimalloc's
// both have it). Class c holds blocks of at least 16c - 8 usable bytes,
// which is what glibc gives for a 16c-byte chunk (its header takes 8), so a
// pooled block takes no more memory than malloc's own for the same request.
// Blocks are as aligned as malloc's.
//
// Bounded: the free lists hold at most free_bytes_limit bytes (past that a
// freed block goes back to malloc), and they are emptied when the last block
// handed out comes back: a worker with no HTTP/2 session left keeps no spare
// memory for them.
//
// One pool per worker thread, owned by the Worker, which outlives every
// session on its loop (nghttp2_session_del frees through the pool too). Not
// thread-safe: only one thread uses a pool at a time.
#pragma once

#include <nghttp2/nghttp2.h>

#include <cstddef>

namespace onelayer {

class H2MemoryPool {
 public:
  enum class Mode { pooled, pass_through };
  // Pooled on glibc's malloc. Every call goes straight to malloc and free
  // under AddressSanitizer (a reused block would hide a use after free from
  // it), and on mimalloc, whose own free lists are as quick as the pool's
  // (the pool made a request dearer there: docs/performance.md, "Allocator").
  static Mode default_mode();

  static constexpr size_t kClassStep = 16;
  static constexpr size_t kClasses = 64;
  static constexpr size_t kLargestPooled = kClassStep * kClasses - 8;  // 1016 bytes
  // On the benchmark's path a request's blocks come to about 2.5 KB (both
  // sessions): what 512 streams free at once fits, with room to spare.
  static constexpr size_t kDefaultFreeBytesLimit = 2 * 1024 * 1024;

  explicit H2MemoryPool(size_t free_bytes_limit = kDefaultFreeBytesLimit, Mode mode = default_mode());
  H2MemoryPool(const H2MemoryPool&) = delete;
  H2MemoryPool& operator=(const H2MemoryPool&) = delete;
  ~H2MemoryPool();

  // What nghttp2_session_*_new3 takes (nghttp2 copies it; the pool must
  // outlive the session). Null when the pool passes through: nghttp2's own
  // allocator then, without a call more per allocation.
  nghttp2_mem* mem() { return mode_ == Mode::pooled ? &mem_ : nullptr; }

  // malloc, free, calloc and realloc as nghttp2 calls them.
  void* allocate(size_t bytes);
  void release(void* p);
  // Null if count * size overflows.
  void* allocate_zeroed(size_t count, size_t size);
  // Keeps the first min(old, new) bytes; null (and `p` untouched) when out
  // of memory; realloc(p, 0) frees `p` and returns null, as glibc's does.
  void* reallocate(void* p, size_t bytes);

  // What a pooled block for a request of `bytes` (at most kLargestPooled)
  // is asked of malloc: its class's size.
  static size_t block_bytes_for(size_t bytes);

  // Gives every free block back to malloc.
  void trim();
  // Bytes of the blocks on the free lists.
  size_t free_bytes() const { return free_bytes_; }
  // Blocks handed out and not given back yet (pooled mode only).
  size_t outstanding() const { return outstanding_; }

  // The pool of the worker whose loop runs on this thread, null elsewhere:
  // the sessions H2Session makes on this thread use it.
  static H2MemoryPool* of_this_thread();
  static void set_for_this_thread(H2MemoryPool* pool);

 private:
  // A block on a free list: its link and its usable size.
  struct FreeBlock {
    FreeBlock* next;
    size_t bytes;
  };
  // The smallest class holds a FreeBlock.
  static constexpr size_t kSmallestClass = 2;

  // The calls above once the mode is known to be pooled (what nghttp2's
  // callbacks call); release_pooled takes a non-null block.
  void* allocate_pooled(size_t bytes);
  void release_pooled(void* p);
  void* allocate_zeroed_pooled(size_t count, size_t size);
  void* reallocate_pooled(void* p, size_t bytes);
  void* allocate_large(size_t bytes);
  // Onto a free list or back to malloc, without the count of blocks out.
  void return_block(void* p);

  FreeBlock* free_[kClasses + 1] = {};  // by class c: blocks of at least 16c - 8 bytes
  size_t free_bytes_ = 0;
  size_t outstanding_ = 0;
  size_t free_bytes_limit_;
  Mode mode_;
  nghttp2_mem mem_;
};

}  // namespace onelayer
