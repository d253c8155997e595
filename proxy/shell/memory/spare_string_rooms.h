// The heap room of strings let go of, kept per thread for the next string
// that needs room: an HTTP/2 stream's send buffer, a request body's replay
// buffer. One list for all of them (they are alike: a few hundred bytes of
// a body), bounded in count and in the room a kept string may have; a
// string within std::string's own inline room has none to keep.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "shell/memory/spare_list.h"

namespace onelayer {

class SpareStringRooms {
 public:
  static constexpr size_t kMaxRoom = 1024;
  static constexpr size_t kMaxKept = 512;

  // A kept room into `out` (emptied); false when none is kept.
  static bool take(std::string& out) { return List::take(out); }
  // Keeps the room of `s` (its bytes dropped), unless it has none on the
  // heap, more than kMaxRoom, or kMaxKept are kept already.
  static void give_back(std::string&& s) {
    if (s.capacity() <= std::string().capacity() || s.capacity() > kMaxRoom) return;
    s.clear();
    List::give_back(std::move(s));
  }
  static size_t kept() { return List::kept(); }
  // Frees every kept room (this thread's HTTP/2 sessions are all gone).
  static void free_all() { List::free_all(); }

 private:
  using List = SpareList<std::string, kMaxKept>;
};

}  // namespace onelayer
