// Objects kept per thread for reuse, with the buffers they hold: a head or
// a field list given back after one request serves the next one without an
// allocation. At most kMax are kept; what the caller keeps (how big an
// object may be) it decides before give_back().
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace onelayer {

template <class T, size_t kMax>
class SpareList {
 public:
  // Moves a kept object into `out`; false when none is kept.
  static bool take(T& out) {
    std::vector<T>& l = list();
    if (l.empty()) return false;
    out = std::move(l.back());
    l.pop_back();
    return true;
  }
  // Keeps `v` for a later take(), unless kMax are kept already.
  static void give_back(T&& v) {
    std::vector<T>& l = list();
    if (l.size() < kMax) l.push_back(std::move(v));
  }
  static size_t kept() { return list().size(); }
  // Frees every kept object, and the list's own room.
  static void free_all() { std::vector<T>().swap(list()); }

 private:
  static std::vector<T>& list() {
    thread_local std::vector<T> l;
    return l;
  }
};

}  // namespace onelayer
