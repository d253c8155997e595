#include "shell/io/timer_list.h"

#include <utility>

namespace onelayer {

TimerList::Entry::~Entry() {
  if (list_ != nullptr) list_->disarm(*this);
}

TimerList::TimerList(uv_loop_t* loop) {
  uv_timer_init(loop, &timer_);
  timer_.data = this;
}

TimerList::~TimerList() {
  // Entries that outlive the list must not reach back into it.
  for (const Slot& s : heap_) s.entry->list_ = nullptr;
  for (Entry* e : due_)
    if (e != nullptr) e->list_ = nullptr;
}

void TimerList::arm(Entry& e, uint64_t ms_from_now, Entry::Callback cb) {
  const uint64_t now = uv_now(timer_.loop);
  set_deadline(e, ms_from_now > kNever - now ? kNever : now + ms_from_now, now, cb);
}

void TimerList::arm_at(Entry& e, uint64_t deadline, Entry::Callback cb) {
  set_deadline(e, deadline, uv_now(timer_.loop), cb);
}

void TimerList::set_deadline(Entry& e, uint64_t deadline, uint64_t now, Entry::Callback cb) {
  if (closed_) return;
  if (e.list_ == this && (e.slot_ & kDueBit) == 0) {
    e.cb_ = cb;
    size_t i = e.slot_;
    uint64_t held = heap_[i].deadline;
    if (deadline >= held) {
      if (deadline - held <= UINT32_MAX) {
        e.later_ = static_cast<uint32_t>(deadline - held);  // lazy: no heap work
        return;
      }
      heap_[i].deadline = deadline;
      e.later_ = 0;
      sift_down(i);
      return;
    }
    heap_[i].deadline = deadline;
    e.later_ = 0;
    sift_up(i);
  } else {
    if (e.list_ != nullptr) e.list_->disarm(e);  // due this turn: goes back in
    push(e, deadline, cb);
  }
  if (!dispatching_ && deadline < scheduled_) schedule(deadline, now);
}

void TimerList::disarm(Entry& e) {
  if (e.list_ != this) return;
  if ((e.slot_ & kDueBit) != 0) {
    due_[e.slot_ & ~kDueBit] = nullptr;
    --due_pending_;
  } else {
    remove_at(e.slot_);
  }
  e.list_ = nullptr;
  e.cb_ = nullptr;
  // The libuv timer stays as it is: when it fires with nothing due, it is
  // set for whatever is earliest then.
}

void TimerList::close() {
  if (closed_) return;
  closed_ = true;
  for (const Slot& s : heap_) s.entry->list_ = nullptr;
  heap_.clear();
  for (Entry*& e : due_) {
    if (e != nullptr) e->list_ = nullptr;
    e = nullptr;
  }
  due_pending_ = 0;
  uv_timer_stop(&timer_);
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
}

void TimerList::on_timer(uv_timer_t* t) { static_cast<TimerList*>(t->data)->run_due(); }

void TimerList::run_due() {
  scheduled_ = kNever;
  uint64_t now = uv_now(timer_.loop);
  // First take out everything due, then run it: a callback's own arming
  // goes into the heap and waits for a later turn.
  while (!heap_.empty() && heap_[0].deadline <= now) {
    Entry* e = heap_[0].entry;
    if (e->later_ != 0) {  // pushed back since: back in for the rest, in order
      heap_[0].deadline += e->later_;
      e->later_ = 0;
      sift_down(0);
      continue;
    }
    remove_at(0);
    e->slot_ = kDueBit | static_cast<uint32_t>(due_.size());
    due_.push_back(e);
    ++due_pending_;
  }
  dispatching_ = true;
  for (size_t i = 0; i < due_.size(); ++i) {
    Entry* e = due_[i];
    if (e == nullptr) continue;
    --due_pending_;
    Entry::Callback cb = e->cb_;
    e->list_ = nullptr;
    e->cb_ = nullptr;
    cb(e);  // may free e's owner: e is not read again
  }
  due_.clear();
  dispatching_ = false;
  if (!closed_ && !heap_.empty()) schedule(heap_[0].deadline, uv_now(timer_.loop));
}

void TimerList::schedule(uint64_t deadline, uint64_t now) {
  scheduled_ = deadline;
  uv_timer_start(&timer_, on_timer, deadline > now ? deadline - now : 0, 0);
}

void TimerList::push(Entry& e, uint64_t deadline, Entry::Callback cb) {
  e.list_ = this;
  e.cb_ = cb;
  e.later_ = 0;
  heap_.push_back(Slot{deadline, &e});
  e.slot_ = static_cast<uint32_t>(heap_.size() - 1);
  sift_up(heap_.size() - 1);
}

void TimerList::remove_at(size_t i) {
  Slot last = heap_.back();
  heap_.pop_back();
  if (i == heap_.size()) return;
  place(i, last);
  if (i > 0 && heap_[(i - 1) / 2].deadline > last.deadline) {
    sift_up(i);
  } else {
    sift_down(i);
  }
}

void TimerList::sift_up(size_t i) {
  Slot s = heap_[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (heap_[parent].deadline <= s.deadline) break;
    place(i, heap_[parent]);
    i = parent;
  }
  place(i, s);
}

void TimerList::sift_down(size_t i) {
  Slot s = heap_[i];
  size_t n = heap_.size();
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && heap_[child + 1].deadline < heap_[child].deadline) ++child;
    if (heap_[child].deadline >= s.deadline) break;
    place(i, heap_[child]);
    i = child;
  }
  place(i, s);
}

}  // namespace onelayer
