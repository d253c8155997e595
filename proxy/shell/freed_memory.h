// Giving freed heap memory back to the system. mimalloc (the binary's
// allocator, see CMakeLists.txt) keeps the pages a thread freed for its own
// later use; after a burst of connections went idle and were parked, a
// quiet worker would keep the pages of their freed DownConns.
// release_freed_memory() has the calling thread's heap return what it can.
// With another allocator only the recycled blocks are freed (glibc's
// reuses freed chunks in place).
#pragma once

namespace onelayer {

// True when the process runs on mimalloc (found at run time, so the shell
// library works under either allocator: the test binaries use glibc's).
bool allocator_is_mimalloc();
// Frees the blocks this thread keeps for reuse (recycled_blocks.h), then
// collects its heap and returns its free pages to the system. A
// few system calls per run of free pages: call it after bursts, not per
// request.
void release_freed_memory();

}  // namespace onelayer
