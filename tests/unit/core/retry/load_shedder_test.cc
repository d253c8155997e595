#include <doctest/doctest.h>

#include "core/retry/load_shedder.h"
#include "scripted_random.h"

using namespace onelayer;
using namespace std::chrono_literals;
using onelayer::test::ScriptedRandom;

namespace {
const TimePoint kT0 = TimePoint{} + 1000s;
constexpr uint64_t kZero = 0;                       // uniform 0.0: factor 1
constexpr uint64_t kHalf = 0x8000000000000000ULL;   // uniform 0.5: factor 1.5
}  // namespace

TEST_CASE("shed: N permits, then every request beyond is shed until one finishes") {
  auto s = std::make_shared<LoadShedder>(2, kT0);
  LoadShedder::Permit a = LoadShedder::try_acquire(s, kT0);
  LoadShedder::Permit b = LoadShedder::try_acquire(s, kT0);
  CHECK(a);
  CHECK(b);
  CHECK_FALSE(LoadShedder::try_acquire(s, kT0));
  CHECK_FALSE(LoadShedder::try_acquire(s, kT0));
  CHECK(s->shed_total() == 2);
  CHECK(s->in_flight() == 2);
  a.reset();
  CHECK(s->in_flight() == 1);
  CHECK(s->completions() == 1);
  LoadShedder::Permit c = LoadShedder::try_acquire(s, kT0);
  CHECK(c);
  LoadShedder::Permit moved = std::move(c);
  CHECK(s->in_flight() == 2);  // a move holds the same slot
}

TEST_CASE("shed: Retry-After is 1 s (x jitter) while no rate is known") {
  auto s = std::make_shared<LoadShedder>(1, kT0);
  ScriptedRandom rng{kZero, kHalf};
  CHECK(s->retry_after_seconds(kT0, rng) == 1);
  CHECK(s->retry_after_seconds(kT0, rng) == 2);  // ceil(1 * 1.5)
}

TEST_CASE("shed: Retry-After is the in-flight count over the recent completion rate") {
  auto s = std::make_shared<LoadShedder>(100, kT0);
  std::vector<LoadShedder::Permit> held;
  for (int i = 0; i < 40; ++i) held.push_back(LoadShedder::try_acquire(s, kT0));
  // 20 of them finish within the first two seconds: 10 per second.
  for (int i = 0; i < 20; ++i) held[static_cast<size_t>(i)].reset();
  CHECK(s->completion_rate(kT0 + 2s) == 10.0);
  ScriptedRandom rng{kZero, kHalf};
  // 20 still in flight at 10/s: 2 s, then x1 and x1.5.
  CHECK(s->retry_after_seconds(kT0 + 2s, rng) == 2);
  CHECK(s->retry_after_seconds(kT0 + 2s, rng) == 3);
}

TEST_CASE("shed: nothing finishing for a while gives a wait as long as that, capped at 60 s") {
  auto s = std::make_shared<LoadShedder>(1, kT0);
  LoadShedder::Permit p = LoadShedder::try_acquire(s, kT0);
  ScriptedRandom rng{kZero, kZero};
  CHECK(s->completion_rate(kT0 + 4s) == 0.0);
  CHECK(s->retry_after_seconds(kT0 + 4s, rng) == 4);
  auto slow = std::make_shared<LoadShedder>(1000, kT0);
  std::vector<LoadShedder::Permit> many;
  for (int i = 0; i < 1000; ++i) many.push_back(LoadShedder::try_acquire(slow, kT0));
  many[0].reset();  // 1 completion in 5 s with 999 in flight: ~5000 s, capped
  CHECK(slow->retry_after_seconds(kT0 + 5s, rng) == LoadShedder::kMaxRetryAfterSeconds);
}

TEST_CASE("shed: a limit of 0 (set by a reload) admits everything") {
  auto s = std::make_shared<LoadShedder>(1, kT0);
  s->set_limit(0);
  LoadShedder::Permit a = LoadShedder::try_acquire(s, kT0);
  LoadShedder::Permit b = LoadShedder::try_acquire(s, kT0);
  CHECK(a);
  CHECK(b);
}
