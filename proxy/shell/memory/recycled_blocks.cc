#include "shell/memory/recycled_blocks.h"

namespace onelayer {

namespace recycled_blocks_detail {

namespace {

thread_local constinit FreeList* t_lists = nullptr;  // every list this thread has used
thread_local constinit bool t_exiting = false;

void release_all() {
  for (FreeList* l = t_lists; l; l = l->next_list) l->release();
}

// Frees the thread's blocks when it exits; a block given back after that
// (an object destroyed later in the exit) is freed at once.
struct ExitRelease {
  ~ExitRelease() {
    t_exiting = true;
    for (FreeList* l = t_lists; l; l = l->next_list) l->limit = 0;
    release_all();
  }
};

}  // namespace

void FreeList::release() {
  while (head) {
    FreeBlock* b = head;
    head = b->next;
    free_block(b, size);
  }
  count = 0;
}

void enroll(FreeList& list, size_t size, size_t limit) {
  list.size = size;
  if (t_exiting) {
    list.limit = 0;
    return;
  }
  thread_local ExitRelease exit_release;
  (void)exit_release;
  list.limit = limit;
  list.next_list = t_lists;
  t_lists = &list;
}

}  // namespace recycled_blocks_detail

void release_recycled_blocks() { recycled_blocks_detail::release_all(); }

}  // namespace onelayer
