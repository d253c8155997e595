#include "core/retry/request_window.h"

#include <algorithm>

namespace onelayer {

void RequestWindow::add(int64_t second) {
  Bucket& bucket = buckets_[static_cast<size_t>(second % kSeconds)];
  if (bucket.second != second) bucket = Bucket{second, 0};
  ++bucket.requests;
  if (second == latest_) {
    // A bucket replaced above held a second kSeconds or more before this
    // one: it was out of the window already, so the total only grows.
    ++total_;
    return;
  }
  latest_ = std::max(latest_, second);
  total_ = summed(latest_);
}

int64_t RequestWindow::summed(int64_t second) const {
  int64_t requests = 0;
  for (const Bucket& b : buckets_)
    if (b.second > second - kSeconds && b.second <= second) requests += b.requests;
  return requests;
}

}  // namespace onelayer
