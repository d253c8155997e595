// TimerList: the timers of one worker (connection header and idle deadlines,
// connect timeouts, an exchange's attempt, backoff and stall deadlines) in
// one binary min-heap, driven by one libuv timer. A timer's owner holds a
// 24-byte Entry instead of its own uv_timer_t (152 bytes), which is what an
// idle keep-alive connection mostly is.
//
// - arm(e, ms, cb): `cb(&e)` runs once, `ms` from now (uv_now), unless the
//   entry is re-armed or disarmed first. Re-arming an armed entry replaces
//   its deadline and callback. O(log n), and lazy twice over: a later
//   deadline than the one the heap holds only records how much later (no
//   heap work: what nearly every re-arm of a request's life is), and the
//   libuv timer is restarted only when the earliest deadline moves earlier.
//   An entry that comes due with a recorded push-back goes back into the heap
//   for the rest.
// - arm_at(e, deadline, cb): the same at loop time `deadline` (ms, uv_now's
//   clock): for a wait that must not end early, counted from a precise clock
//   read rather than from uv_now (which is floored to the millisecond and
//   read when the loop's turn began).
// - The owner: derive it from Entry (a base class costs nothing and the cast
//   back is exact): `class Conn : private TimerList::Entry`, and in the
//   callback `static_cast<Conn*>(e)` (from inside Conn, or owner_of<T>(e)
//   for a public base). An owner with two timers derives two distinct empty
//   subclasses of Entry, one per role.
// - Callbacks run in deadline order (ties in no particular order). A
//   callback may arm or disarm any entry, its own included, and may free the
//   owner of any entry, its own included: the list reads nothing of an entry
//   after its callback returns, and an entry disarms itself when destroyed.
//   Everything due when the libuv timer fires runs in that turn unless an
//   earlier callback disarmed or re-armed it; an entry armed by a callback
//   waits for a later firing of the libuv timer even when already due.
// - close() before the loop ends: it disarms every entry and closes the libuv
//   timer; arm() after close() does nothing.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace onelayer {

class TimerList {
 public:
  class Entry {
   public:
    using Callback = void (*)(Entry*);
    Entry() = default;
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    ~Entry();  // disarms
    bool armed() const { return list_ != nullptr; }

   private:
    friend class TimerList;
    TimerList* list_ = nullptr;  // the list it is armed in, else nullptr
    Callback cb_ = nullptr;
    // Where it waits: an index into the heap, or with kDueBit set an index
    // into the list of entries due this turn.
    uint32_t slot_ = 0;
    // How many ms its deadline lies past the one the heap holds for it.
    uint32_t later_ = 0;
  };

  explicit TimerList(uv_loop_t* loop);
  TimerList(const TimerList&) = delete;
  TimerList& operator=(const TimerList&) = delete;
  ~TimerList();

  void arm(Entry& e, uint64_t ms_from_now, Entry::Callback cb);
  void arm_at(Entry& e, uint64_t deadline, Entry::Callback cb);
  void disarm(Entry& e);
  void close();
  // Armed entries.
  size_t size() const { return heap_.size() + due_pending_; }

  // The owner of an entry it derives from publicly.
  template <class T>
  static T* owner_of(Entry* e) {
    static_assert(std::is_base_of_v<Entry, T>, "the owner derives from TimerList::Entry");
    return static_cast<T*>(e);
  }

 private:
  struct Slot {
    uint64_t deadline;  // uv_now() value at which the entry is due, or earlier (later_)
    Entry* entry;
  };
  static constexpr uint32_t kDueBit = 0x80000000u;
  static constexpr uint64_t kNever = UINT64_MAX;

  static void on_timer(uv_timer_t* t);
  void run_due();
  void push(Entry& e, uint64_t deadline, Entry::Callback cb);
  void remove_at(size_t i);
  void sift_up(size_t i);
  void sift_down(size_t i);
  void place(size_t i, Slot s) {
    heap_[i] = s;
    s.entry->slot_ = static_cast<uint32_t>(i);
  }
  void schedule(uint64_t deadline, uint64_t now);
  void set_deadline(Entry& e, uint64_t deadline, uint64_t now, Entry::Callback cb);

  uv_timer_t timer_;
  std::vector<Slot> heap_;
  std::vector<Entry*> due_;  // this turn's due entries (nullptr: disarmed since)
  size_t due_pending_ = 0;   // entries of due_ not yet run or disarmed
  uint64_t scheduled_ = kNever;  // when the libuv timer fires, kNever: stopped
  bool dispatching_ = false;
  bool closed_ = false;
};

}  // namespace onelayer
