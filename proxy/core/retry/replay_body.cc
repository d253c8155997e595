#include "core/retry/replay_body.h"

namespace onelayer {

bool ReplayBody::count(size_t n) {
  received_ += n;
  if (!replayable_ || received_ <= limit_) return false;
  replayable_ = false;
  buf_.erase(0, sent_);
  sent_ = 0;
  return true;
}

void ReplayBody::sent_through(std::string_view bytes) {
  if (!replayable_) return;
  buf_.append(bytes);
  sent_ = buf_.size();
}

void ReplayBody::sent_pending() {
  if (replayable_) {
    sent_ = buf_.size();
  } else {
    buf_.clear();
    sent_ = 0;
  }
}

}  // namespace onelayer
