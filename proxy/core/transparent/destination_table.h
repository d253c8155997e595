// Per-destination state for original-destination upstreams, bounded: a pod
// that calls thousands of addresses must not grow memory without bound.
// Least recently used entries go first once more than `cap` are held; an
// entry that is still in use (`in_use(value)` true: open connections, a
// request on its way) is skipped and stays until a later insert finds it
// free. So the table holds at most `cap` entries plus those in use, and
// what is in use is bounded by the connections the process may open.
// Pure: no I/O, the caller says what "in use" means.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>

namespace onelayer {

template <class V>
class DestinationTable {
 public:
  // Entries kept per worker beyond those in use (docs/transparent.md).
  static constexpr size_t kDefaultCap = 1024;

  explicit DestinationTable(size_t cap = kDefaultCap) : cap_(cap) {}

  // The entry for `key`, now the most recently used; null when absent.
  V* find(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }

  // Adds `key` (most recently used) and then evicts least recently used
  // entries not in use while above the cap; `evicted` hears each one before
  // it goes. Returns the new entry (never evicted by its own insert).
  template <class InUse, class Evicted>
  V& insert(const std::string& key, V value, InUse in_use, Evicted evicted) {
    order_.emplace_front(key, std::move(value));
    index_[key] = order_.begin();
    auto it = std::prev(order_.end());
    while (order_.size() > cap_ && it != order_.begin()) {
      auto prev = std::prev(it);
      if (!in_use(it->second)) {
        evicted(it->second);
        index_.erase(it->first);
        order_.erase(it);
      }
      it = prev;
    }
    return order_.front().second;
  }

  size_t size() const { return order_.size(); }
  size_t cap() const { return cap_; }
  template <class F>
  void for_each(F f) {
    for (auto& [k, v] : order_) f(v);
  }

 private:
  size_t cap_;
  std::list<std::pair<std::string, V>> order_;  // most recently used first
  std::unordered_map<std::string, typename std::list<std::pair<std::string, V>>::iterator> index_;
};

}  // namespace onelayer
