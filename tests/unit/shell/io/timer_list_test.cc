// TimerList on a real loop: callbacks run in deadline order and not early,
// re-arming moves a deadline either way (a later one without touching the
// libuv timer), callbacks may arm, disarm and free entries, a destroyed
// entry is disarmed. Every test ends with uv_loop_close() == 0.
#include <doctest/doctest.h>
#include <uv.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "shell/io/timer_list.h"

using onelayer::TimerList;

namespace {

// A loop with one list; closes both at the end and checks nothing is left.
struct Loop {
  Loop() {
    uv_loop_init(&loop);
    list = std::make_unique<TimerList>(&loop);
  }
  ~Loop() {
    list->close();
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0);
  }
  // Runs until no entry is armed (the list's timer is the only handle).
  void run() { uv_run(&loop, UV_RUN_DEFAULT); }
  uint64_t now() { return uv_now(&loop); }
  // How long until the list's libuv timer fires; -1: not active.
  int64_t libuv_due_in() {
    int64_t due = -1;
    uv_walk(
        &loop,
        [](uv_handle_t* h, void* arg) {
          if (h->type == UV_TIMER && uv_is_active(h))
            *static_cast<int64_t*>(arg) = static_cast<int64_t>(uv_timer_get_due_in(reinterpret_cast<uv_timer_t*>(h)));
        },
        &due);
    return due;
  }
  uv_loop_t loop;
  std::unique_ptr<TimerList> list;
};

struct Fired {
  int id;
  uint64_t at;  // uv_now() when it ran
};

// An owner: derives from the entry, as connections do.
struct Probe : TimerList::Entry {
  Probe(Loop* l, int id, std::vector<Fired>* log) : l(l), id(id), log(log) {}
  Loop* l;
  int id;
  std::vector<Fired>* log;
  uint64_t deadline = 0;  // when it was armed for
  // What the callback does besides logging, and with what.
  void (*then)(Probe*) = nullptr;
  Probe* other = nullptr;
  int count = 0;

  void arm(uint64_t ms) {
    deadline = l->now() + ms;
    l->list->arm(*this, ms, on_timer);
  }
  static void on_timer(TimerList::Entry* e) {
    Probe* p = TimerList::owner_of<Probe>(e);
    p->log->push_back(Fired{p->id, p->l->now()});
    if (p->then) p->then(p);
  }
};

// Three probes on one loop, sharing a log.
struct Probes {
  Loop l;
  std::vector<Fired> log;
  Probe a{&l, 1, &log};
  Probe b{&l, 2, &log};
  Probe c{&l, 3, &log};
};

std::vector<int> ids(const std::vector<Fired>& log) {
  std::vector<int> out;
  for (const Fired& f : log) out.push_back(f.id);
  return out;
}

}  // namespace

TEST_CASE("timer list: an entry is at most 24 bytes and starts disarmed") {
  CHECK(sizeof(TimerList::Entry) <= 24);
  Loop l;
  std::vector<Fired> log;
  Probe p(&l, 1, &log);
  CHECK_FALSE(p.armed());
  CHECK(l.list->size() == 0);
}

TEST_CASE("timer list: callbacks run in deadline order, none before its deadline") {
  Loop l;
  std::vector<Fired> log;
  std::vector<std::unique_ptr<Probe>> ps;
  const uint64_t ms[] = {30, 10, 20, 0, 40};
  for (int i = 0; i < 5; ++i) {
    ps.push_back(std::make_unique<Probe>(&l, i, &log));
    ps.back()->arm(ms[i]);
  }
  CHECK(l.list->size() == 5);
  CHECK(ps[0]->armed());
  l.run();
  CHECK(ids(log) == std::vector<int>{3, 1, 2, 0, 4});
  for (const Fired& f : log) CHECK(f.at >= ps[f.id]->deadline);
  CHECK(l.list->size() == 0);
  for (auto& p : ps) CHECK_FALSE(p->armed());
}

TEST_CASE_FIXTURE(Probes, "timer list: re-arming earlier moves the libuv timer and the order") {
  a.arm(200);
  b.arm(100);
  int64_t before = l.libuv_due_in();
  CHECK(before > 50);
  a.arm(5);
  CHECK(l.list->size() == 2);
  CHECK(l.libuv_due_in() <= 5);
  l.run();
  CHECK(ids(log) == std::vector<int>{1, 2});  // at its old deadline a ran after b
}

TEST_CASE_FIXTURE(Probes, "timer list: re-arming later leaves the libuv timer alone and runs at the new deadline") {
  a.arm(5);
  b.arm(20);
  int64_t due = l.libuv_due_in();
  CHECK(due <= 5);
  a.arm(40);  // the pushed-back deadline is only recorded
  CHECK(l.libuv_due_in() == due);
  CHECK(a.armed());
  l.run();
  CHECK(ids(log) == std::vector<int>{2, 1});
  CHECK(log[1].at >= a.deadline);
}

TEST_CASE_FIXTURE(Probes, "timer list: a push-back too large to record lazily still re-orders the heap") {
  a.arm(5);
  b.arm(10);
  a.arm(uint64_t{1} << 40);  // far past a 32-bit push-back
  CHECK(a.armed());
  b.then = [](Probe* p) { p->l->list->disarm(*p->other); };
  b.other = &a;
  l.run();
  CHECK(ids(log) == std::vector<int>{2});
  CHECK_FALSE(a.armed());
}

TEST_CASE_FIXTURE(Probes, "timer list: a disarmed entry never runs, and disarming twice is harmless") {
  a.arm(5);
  b.arm(10);
  l.list->disarm(a);
  l.list->disarm(a);
  CHECK_FALSE(a.armed());
  CHECK(l.list->size() == 1);
  l.run();
  CHECK(ids(log) == std::vector<int>{2});
}

TEST_CASE_FIXTURE(Probes, "timer list: a callback disarms another entry due in the same turn") {
  a.arm(5);
  b.arm(6);
  c.arm(30);
  a.then = [](Probe* p) { p->l->list->disarm(*p->other); };
  a.other = &b;
  // Make both due when the libuv timer fires: block past b's deadline.
  uv_sleep(20);
  l.run();
  CHECK(ids(log) == std::vector<int>{1, 3});
  CHECK(l.list->size() == 0);
}

TEST_CASE_FIXTURE(Probes, "timer list: a callback re-arms its own entry") {
  a.then = [](Probe* p) {
    if (++p->count < 3) p->arm(2);
  };
  a.arm(2);
  l.run();
  CHECK(ids(log) == std::vector<int>{1, 1, 1});
  CHECK_FALSE(a.armed());
}

TEST_CASE_FIXTURE(Probes, "timer list: an entry armed by a callback waits for a later firing even when due at once") {
  a.arm(5);
  b.arm(5);
  // Whichever of a and b runs first arms c for now: c still runs after both.
  auto arm_c = [](Probe* p) {
    if (!p->other->armed() && p->other->count++ == 0) p->other->arm(0);
  };
  a.then = arm_c;
  b.then = arm_c;
  a.other = &c;
  b.other = &c;
  l.run();
  REQUIRE(log.size() == 3);
  CHECK(log[2].id == 3);
}

TEST_CASE_FIXTURE(Probes, "timer list: a callback re-arms an entry that was due in the same turn") {
  a.arm(5);
  b.arm(6);
  a.then = [](Probe* p) { p->other->arm(15); };
  a.other = &b;
  uv_sleep(20);
  l.run();
  CHECK(ids(log) == std::vector<int>{1, 2});
  CHECK(log[1].at >= b.deadline);
}

TEST_CASE("timer list: a destroyed entry is disarmed, also from inside a callback") {
  Loop l;
  std::vector<Fired> log;
  auto gone = std::make_unique<Probe>(&l, 1, &log);
  gone->arm(5);
  CHECK(l.list->size() == 1);
  gone.reset();
  CHECK(l.list->size() == 0);

  // A callback frees the owner of another due entry, then its own.
  auto* first = new Probe(&l, 2, &log);
  auto* second = new Probe(&l, 3, &log);
  first->arm(5);
  second->arm(6);
  first->other = second;
  first->then = [](Probe* p) {
    delete p->other;
    delete p;
  };
  uv_sleep(20);
  l.run();
  CHECK(ids(log) == std::vector<int>{2});
  CHECK(l.list->size() == 0);
}

TEST_CASE("timer list: close disarms every entry, arming after close does nothing") {
  std::vector<Fired> log;
  auto l = std::make_unique<Loop>();
  Probe a(l.get(), 1, &log), b(l.get(), 2, &log);
  a.arm(5);
  b.arm(50);
  l->list->close();
  CHECK_FALSE(a.armed());
  CHECK_FALSE(b.armed());
  a.arm(1);
  CHECK_FALSE(a.armed());
  l.reset();  // runs the loop to the end: nothing fires
  CHECK(log.empty());
}

TEST_CASE("timer list: many entries, re-armed and disarmed at random, run in order and never early") {
  Loop l;
  std::vector<Fired> log;
  constexpr int n = 5000;
  std::vector<std::unique_ptr<Probe>> ps;
  uint32_t seed = 12345;
  auto next = [&seed](uint32_t mod) {
    seed = seed * 1103515245u + 12345u;
    return (seed >> 8) % mod;
  };
  for (int i = 0; i < n; ++i) {
    ps.push_back(std::make_unique<Probe>(&l, i, &log));
    ps.back()->arm(next(40));
  }
  int disarmed = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < n; ++i) {
      uint32_t what = next(10);
      if (what == 0 && ps[i]->armed()) {
        l.list->disarm(*ps[i]);
        ++disarmed;
      } else if (what < 6 && ps[i]->armed()) {
        ps[i]->arm(next(60));  // earlier or later
      }
    }
  }
  CHECK(l.list->size() == static_cast<size_t>(n - disarmed));
  l.run();
  CHECK(log.size() == static_cast<size_t>(n - disarmed));
  for (size_t i = 0; i < log.size(); ++i) {
    CHECK(log[i].at >= ps[log[i].id]->deadline);
    if (i > 0) CHECK(ps[log[i - 1].id]->deadline <= ps[log[i].id]->deadline);
  }
  CHECK(l.list->size() == 0);
}

TEST_CASE("timer list: arm_at counts from a precise clock read, so a stale loop time cannot end a wait early") {
  // uv_now() is read when the loop's turn begins: work done since then
  // (here 100 ms of sleep) makes it stale. arm(50) counts from that stale
  // time and runs before 50 ms have passed in real time; arm_at() with a
  // deadline from a precise read (rounded up) runs no earlier than asked.
  Loop l;
  std::vector<Fired> log;
  Probe from_loop_time(&l, 1, &log), from_clock(&l, 2, &log);
  uint64_t ran_ns[3] = {0, 0, 0};
  static uint64_t* ran = nullptr;
  ran = ran_ns;
  auto note = [](Probe* p) { ran[p->id] = uv_hrtime(); };
  from_loop_time.then = note;
  from_clock.then = note;
  uv_update_time(&l.loop);
  uv_sleep(100);
  const uint64_t asked_ns = uv_hrtime();
  l.list->arm(from_loop_time, 50, Probe::on_timer);
  l.list->arm_at(from_clock, (asked_ns + 50'000'000 + 999'999) / 1'000'000, Probe::on_timer);
  l.run();
  REQUIRE(ids(log) == std::vector<int>{1, 2});
  CHECK(ran_ns[1] < asked_ns + 50'000'000);  // early in real time: the stale start
  CHECK(ran_ns[2] >= asked_ns + 50'000'000);
}
