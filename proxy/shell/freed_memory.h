// Giving freed heap memory back to the system. With jemalloc (the binary's
// allocator, see CMakeLists.txt) freed pages stay mapped until its decay
// clock, which only advances while the thread allocates, lets them go: after
// a burst of connections went idle and were parked, a quiet worker would
// keep their pages for good. release_freed_memory() flushes the calling
// thread's cache and purges its arena. With another allocator it does
// nothing (glibc's reuses freed chunks in place).
#pragma once

namespace onelayer {

// True when the process runs on jemalloc (found at run time, so the shell
// library works under either allocator: the test binaries use glibc's).
bool allocator_is_jemalloc();
// Flushes this thread's cache and purges its arena. A few system calls per
// run of freed pages: call it after bursts, not per request.
void release_freed_memory();

}  // namespace onelayer
