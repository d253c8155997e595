#include "shell/memory/freed_memory.h"

#include "shell/memory/recycled_blocks.h"

// mimalloc's collection call, weak: null when the process runs on another
// allocator.
extern "C" void mi_collect(bool force) __attribute__((weak));

namespace onelayer {

bool allocator_is_mimalloc() { return mi_collect != nullptr; }

void release_freed_memory() {
  release_recycled_blocks();
  if (mi_collect) mi_collect(true);
}

}  // namespace onelayer
