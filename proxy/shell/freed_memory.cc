#include "shell/freed_memory.h"

// mimalloc's collection call, weak: null when the process runs on another
// allocator.
extern "C" void mi_collect(bool force) __attribute__((weak));

namespace onelayer {

bool allocator_is_mimalloc() { return mi_collect != nullptr; }

void release_freed_memory() {
  if (mi_collect) mi_collect(true);
}

}  // namespace onelayer
