// Giving freed heap memory back to the system. mimalloc (the binary's
// allocator, see CMakeLists.txt) keeps the pages a thread freed for its own
// later use; after a burst of connections went idle and were parked, a
// quiet worker would keep the pages of their freed Http1ServerConnections.
// release_freed_memory() has the calling thread's heap return what it can.
// With another allocator only the recycled blocks are freed (glibc's
// reuses freed chunks in place).
#pragma once

namespace onelayer {

// True in a build with AddressSanitizer (GCC defines __SANITIZE_ADDRESS__,
// clang answers __has_feature): the free lists that reuse blocks pass
// straight through to the heap then, since a block handed out again behind
// the sanitizer's back would hide a use after free from it.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
inline constexpr bool kUnderAddressSanitizer = __has_feature(address_sanitizer);
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif

// True when the process runs on mimalloc (found at run time, so the shell
// library works under either allocator: the test binaries use glibc's).
bool allocator_is_mimalloc();
// Frees the blocks this thread keeps for reuse (recycled_blocks.h), then
// collects its heap and returns its free pages to the system. A
// few system calls per run of free pages: call it after bursts, not per
// request.
void release_freed_memory();

}  // namespace onelayer
