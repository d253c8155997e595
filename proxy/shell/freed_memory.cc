#include "shell/freed_memory.h"

#include <cstddef>
#include <string>

// jemalloc's control interface, weak: null when the process runs on another
// allocator.
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
    __attribute__((weak));

namespace onelayer {

bool allocator_is_jemalloc() { return mallctl != nullptr; }

void release_freed_memory() {
  if (!mallctl) return;
  mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
  unsigned arena = 0;
  size_t len = sizeof arena;
  if (mallctl("thread.arena", &arena, &len, nullptr, 0) != 0) return;
  std::string name = "arena." + std::to_string(arena) + ".purge";
  mallctl(name.c_str(), nullptr, nullptr, nullptr, 0);
}

}  // namespace onelayer
