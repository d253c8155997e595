#include <doctest/doctest.h>

#include "core/request/fault_injector.h"
#include "scripted_random.h"

using namespace onelayer;
using namespace std::chrono_literals;
using onelayer::test::ScriptedRandom;

namespace {
const TimePoint kT0 = TimePoint{} + 1000s;
// uniform() takes the top 53 bits: v/2^64 for these.
constexpr uint64_t kLow = 0;                         // uniform 0.0
constexpr uint64_t kHigh = 0xF000000000000000ULL;    // uniform 0.9375

FaultConfig abort_fault(int status, double percent) {
  FaultConfig f;
  f.enabled = true;
  f.abort_status = status;
  f.abort_percent = percent;
  return f;
}
}  // namespace

TEST_CASE("fault: no block and no drill: nothing, and no random number drawn") {
  FaultInjector fi;
  ScriptedRandom rng{};
  FaultInjector::Decision d = fi.decide(FaultConfig{}, "up", kT0, rng);
  CHECK(d.abort_status == 0);
  CHECK(d.delay == Millis{0});
  CHECK(rng.used() == 0);
  CHECK_FALSE(fi.any_drill());
}

TEST_CASE("fault: route abort at 100% always, at 10% by the random draw") {
  FaultInjector fi;
  ScriptedRandom none{};
  CHECK(fi.decide(abort_fault(503, 100), "up", kT0, none).abort_status == 503);
  ScriptedRandom rng{kLow, kHigh};
  CHECK(fi.decide(abort_fault(503, 10), "up", kT0, rng).abort_status == 503);  // 0.0 < 10%
  CHECK(fi.decide(abort_fault(503, 10), "up", kT0, rng).abort_status == 0);    // 93.75% >= 10%
}

TEST_CASE("fault: route delay applies when no abort is drawn") {
  FaultInjector fi;
  FaultConfig f = abort_fault(503, 50);
  f.delay = Millis{200};
  f.delay_percent = 100;
  ScriptedRandom rng{kHigh};  // abort not drawn
  FaultInjector::Decision d = fi.decide(f, "up", kT0, rng);
  CHECK(d.abort_status == 0);
  CHECK(d.delay == Millis{200});
}

TEST_CASE("fault: a drill aborts every attempt to its upstream until it ends") {
  FaultInjector fi;
  auto drill = FaultInjector::parse_drill_query("upstream=up&status=503&for=30s", nullptr);
  REQUIRE(drill);
  fi.start_drill(*drill, kT0);
  CHECK(fi.any_drill());
  ScriptedRandom rng{};
  FaultInjector::Decision d = fi.decide(FaultConfig{}, "up", kT0 + 29s, rng);
  CHECK(d.abort_status == 503);
  CHECK(d.from_drill);
  CHECK(fi.decide(FaultConfig{}, "other", kT0 + 1s, rng).abort_status == 0);
  CHECK(fi.decide(FaultConfig{}, "up", kT0 + 30s, rng).abort_status == 0);  // over
  CHECK_FALSE(fi.any_drill());
  CHECK(fi.drills(kT0 + 30s).empty());
}

TEST_CASE("fault: a drill's percent, replacement and DELETE") {
  FaultInjector fi;
  fi.start_drill(*FaultInjector::parse_drill_query("upstream=up&status=500&for=1m&percent=50", nullptr), kT0);
  ScriptedRandom rng{kLow, kHigh};
  CHECK(fi.decide(FaultConfig{}, "up", kT0, rng).abort_status == 500);
  CHECK(fi.decide(FaultConfig{}, "up", kT0, rng).abort_status == 0);
  fi.start_drill(*FaultInjector::parse_drill_query("upstream=up&status=502&for=5s", nullptr), kT0);
  REQUIRE(fi.drills(kT0).size() == 1);
  CHECK(fi.drills(kT0)[0].status == 502);
  CHECK(fi.stop_all() == 1);
  CHECK(fi.decide(FaultConfig{}, "up", kT0, rng).abort_status == 0);
}

TEST_CASE("fault: drill queries that are refused say why") {
  std::string err;
  CHECK_FALSE(FaultInjector::parse_drill_query("status=503&for=30s", &err));
  CHECK(err.find("upstream") != std::string::npos);
  CHECK_FALSE(FaultInjector::parse_drill_query("upstream=u&for=30s", &err));
  CHECK(err.find("status") != std::string::npos);
  CHECK_FALSE(FaultInjector::parse_drill_query("upstream=u&status=503", &err));
  CHECK(err.find("for") != std::string::npos);
  CHECK_FALSE(FaultInjector::parse_drill_query("upstream=u&status=50&for=1s", &err));
  CHECK_FALSE(FaultInjector::parse_drill_query("upstream=u&status=503&for=30", &err));
  CHECK_FALSE(FaultInjector::parse_drill_query("upstream=u&status=503&for=2d", &err));
  CHECK_FALSE(FaultInjector::parse_drill_query("upstream=u&status=503&for=1s&percent=101", &err));
  CHECK_FALSE(FaultInjector::parse_drill_query("upstream=u&status=503&for=1s&colour=red", &err));
  CHECK(err.find("colour") != std::string::npos);
  CHECK_FALSE(FaultInjector::parse_drill_query("upstream=u%2&status=503&for=1s", &err));
  auto ok = FaultInjector::parse_drill_query("upstream=my%2Dup&status=503&for=1500ms&percent=12.5", &err);
  REQUIRE(ok);
  CHECK(ok->upstream == "my-up");
  CHECK(ok->duration == Millis{1500});
  CHECK(ok->percent == 12.5);
}
