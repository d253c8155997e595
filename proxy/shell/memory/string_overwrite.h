// Overwriting a string kept from an earlier use (a field of a reused field
// list, a held head's request line) with a new value, in the room it has.
#pragma once

#include <cstring>
#include <string>
#include <string_view>

namespace onelayer {

// assign() goes through _M_replace, which allows for `v` being part of the
// string and moves its tail about: some 70 instructions a string. A kept
// string is mostly as long as the new value or longer (the same fields come
// on every head), and then the bytes are moved over and the length set:
// memmove, so that a `v` inside `s` (then never longer than `s`) comes out
// right too. A longer value (and the pseudo-header strings of a received
// head, emptied for every head) takes the out-of-line append, which skips
// the aliasing checks as a longer `v` cannot be part of `s`; out of line,
// its slow paths do not crowd the callers' registers.
[[gnu::noinline]] inline void overwrite_longer(std::string& s, std::string_view v) {
  s.clear();
  s.append(v.data(), v.size());
}

[[gnu::always_inline]] inline void overwrite(std::string& s, std::string_view v) {
  if (v.size() > s.size()) return overwrite_longer(s, v);
  if (!v.empty()) std::memmove(s.data(), v.data(), v.size());
  s.resize(v.size());  // not longer: the length and the terminator only
}

}  // namespace onelayer
