// The request body as one downstream request keeps it across its attempts
// (linkerd2-proxy's ReplayBody is the model). While everything received fits
// `limit` it is all kept, so every attempt can send it from the start: the
// body is replayable. Once more has come, it is not any more: only bytes not
// yet sent are held (waiting for a connection), the request still goes
// through once, and the retry decision hears body_too_large. Pure: no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace onelayer {

class ReplayBody {
 public:
  // `fits`: false when the declared length already exceeds `limit`.
  ReplayBody(uint64_t limit, bool fits) : limit_(limit), replayable_(fits) {}

  // Counts `n` more received bytes. True the one time they push the body
  // past `limit`: from then on it is not replayable and the part already
  // sent to the current attempt is dropped.
  bool count(size_t n);
  // Received bytes the current attempt has not had yet: they go with its
  // head once it is connected.
  void hold(std::string_view bytes) { buf_.append(bytes); }
  // Received bytes written straight to the current attempt: kept only while
  // replayable (for the next attempt).
  void sent_through(std::string_view bytes);

  // What the current attempt is still owed: everything kept while
  // replayable, else the held bytes. sent_pending() after writing it.
  std::string_view pending() const { return std::string_view(buf_).substr(sent_); }
  void sent_pending();
  // A new attempt: a replayable body is owed to it from the start.
  void rewind() { sent_ = 0; }
  // The whole body as kept for replay (meaningful while replayable): what
  // a hedge, which runs beside the current attempt, is sent.
  std::string_view kept() const { return buf_; }

  // Reuse of the buffer's room across bodies (its bytes are not touched):
  // give_room() hands an empty body the room of `room`, a buffer an
  // earlier body let go of (nothing happens once the body holds bytes);
  // take_room() lets this body's go, emptied, once it is done with.
  void give_room(std::string&& room) {
    if (buf_.capacity() >= room.capacity() || !buf_.empty()) return;
    buf_ = std::move(room);
    buf_.clear();
  }
  std::string take_room() {
    std::string room = std::move(buf_);
    room.clear();
    buf_.clear();
    sent_ = 0;
    return room;
  }

  bool replayable() const { return replayable_; }
  uint64_t received() const { return received_; }
  // Bytes held in memory only because no attempt could take them yet (the
  // replay copy of a replayable body is not counted): backpressure input.
  size_t queued() const { return replayable_ ? 0 : buf_.size(); }

 private:
  std::string buf_;
  size_t sent_ = 0;  // bytes of buf_ the current attempt has had
  uint64_t received_ = 0;
  uint64_t limit_;
  bool replayable_;
};

}  // namespace onelayer
