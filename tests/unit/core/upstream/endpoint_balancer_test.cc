#include <doctest/doctest.h>

#include <vector>

#include "core/upstream/endpoint_balancer.h"
#include "scripted_random.h"

using namespace onelayer;
using namespace std::chrono_literals;
using onelayer::test::ScriptedRandom;

namespace {

const TimePoint kT0 = TimePoint{} + 1000s;
constexpr size_t kNone = EndpointBalancer::kNone;
constexpr uint64_t bit(size_t i) { return uint64_t{1} << i; }

// Seeds endpoint i's estimate with one finished attempt of `latency`.
void seed(EndpointBalancer& b, size_t i, Clock::duration latency, TimePoint at = kT0) {
  b.on_start(i);
  b.on_end(i, at, latency, false);
}

}  // namespace

TEST_CASE("P2cTakesTheCheaperOfTwoCandidates") {
  EndpointBalancer b(Balance::p2c);
  b.resize(2);
  seed(b, 0, 50ms);
  seed(b, 1, 1ms);
  ScriptedRandom rng{0, 1};  // a = 0 (b = 1), then a = 1 (b = 0): one draw each
  CHECK(b.pick(0b11, 0, kNone, kT0, rng) == 1);
  CHECK(b.pick(0b11, 0, kNone, kT0, rng) == 1);
  CHECK(rng.used() == 2);
}

TEST_CASE("P2cDrawsTwoDifferentCandidatesAmongTheSetBits") {
  EndpointBalancer b(Balance::p2c);
  b.resize(5);
  for (size_t i = 0; i < 5; ++i) seed(b, i, Millis(10 + i));
  const uint64_t set = bit(1) | bit(3) | bit(4);
  // between(0, 2) = 2 -> endpoint 4; between(0, 1) = 0 -> endpoint 1: 11 ms beats 14 ms.
  ScriptedRandom rng{2, 0};
  CHECK(b.pick(set, 0, kNone, kT0, rng) == 1);
  // between(0, 2) = 1 -> endpoint 3; between(0, 1) = 1, not a again -> endpoint 4:
  // the cheapest (1) was not drawn, so 13 ms wins.
  ScriptedRandom rng2{1, 1};
  CHECK(b.pick(set, 0, kNone, kT0, rng2) == 3);
  // between(0, 2) = 0 -> endpoint 1; between(0, 1) = 0, skips a -> endpoint 3.
  ScriptedRandom rng3{0, 0};
  CHECK(b.pick(set, 0, kNone, kT0, rng3) == 1);
}

TEST_CASE("P2cOutstandingRequestsMultiplyTheCost") {
  EndpointBalancer b(Balance::p2c);
  b.resize(2);
  seed(b, 0, 10ms);
  seed(b, 1, 4ms);
  b.on_start(1);
  b.on_start(1);  // 4 ms x 3 = 12 ms > 10 ms x 1
  ScriptedRandom rng{0, 0};
  CHECK(b.pick(0b11, 0, kNone, kT0, rng) == 0);
  CHECK(b.outstanding(1) == 2);
}

TEST_CASE("P2cANewEndpointGetsOneRequestThenWaitsForItsAnswer") {
  EndpointBalancer b(Balance::p2c);
  b.resize(2);
  seed(b, 0, 5ms);
  ScriptedRandom rng{0, 0, 0, 0};
  CHECK(b.pick(0b11, 0, kNone, kT0, rng) == 1);  // unseeded and idle: cost 0
  b.on_start(1);
  CHECK(b.pick(0b11, 0, kNone, kT0, rng) == 0);  // unseeded with one in flight: penalty
}

TEST_CASE("P2cAFailureNeverLowersTheEstimate") {
  EndpointBalancer b(Balance::p2c);
  b.resize(1);
  seed(b, 0, 40ms);
  b.on_start(0);
  b.on_end(0, kT0 + 1ms, 100us, true);  // a fast refusal
  CHECK(b.cost(0, kT0 + 1ms) >= 40e6 * 0.999);
}

TEST_CASE("BalancerRetryPrefersAnUntriedCandidate") {
  for (Balance mode : {Balance::p2c, Balance::round_robin}) {
    EndpointBalancer b(mode);
    b.resize(3);
    seed(b, 0, 1ms);
    seed(b, 1, 50ms);
    seed(b, 2, 50ms);
    ScriptedRandom rng{0, 0};
    size_t got = b.pick(0b111, bit(0), 0, kT0, rng);
    CHECK(got != 0);
    // Every candidate tried: one of them again.
    ScriptedRandom rng2{0, 0};
    CHECK(b.pick(0b011, 0b111, 1, kT0, rng2) != kNone);
  }
}

TEST_CASE("BalancerOnlyCandidateIsTakenWithoutRandomness") {
  EndpointBalancer b(Balance::p2c);
  b.resize(3);
  ScriptedRandom none{};
  CHECK(b.pick(bit(2), 0, kNone, kT0, none) == 2);
  CHECK(b.pick(0, 0, kNone, kT0, none) == kNone);
  CHECK(none.used() == 0);
}

TEST_CASE("RoundRobinAlternatesPerRequestEvenWhenEveryRequestRetries") {
  EndpointBalancer b(Balance::round_robin);
  b.resize(2);
  ScriptedRandom none{};
  std::vector<size_t> firsts;
  for (int r = 0; r < 6; ++r) {
    size_t first = b.pick(0b11, 0, kNone, kT0, none);
    firsts.push_back(first);
    size_t retry = b.pick(0b11, bit(first), first, kT0, none);  // the retry goes elsewhere
    CHECK(retry != first);
  }
  CHECK(firsts == std::vector<size_t>{0, 1, 0, 1, 0, 1});
}

TEST_CASE("RoundRobinRotatesOverTheCandidatesOnly") {
  EndpointBalancer b(Balance::round_robin);
  b.resize(3);
  ScriptedRandom none{};
  std::vector<size_t> got;
  for (int r = 0; r < 4; ++r) got.push_back(b.pick(bit(0) | bit(2), 0, kNone, kT0, none));
  CHECK(got == std::vector<size_t>{0, 2, 0, 2});  // endpoint 1 (ejected) gives its turn away evenly
}

TEST_CASE("RoundRobinRetryTakesTheNextAfterThePreviousWrapping") {
  EndpointBalancer b(Balance::round_robin);
  b.resize(3);
  ScriptedRandom none{};
  CHECK(b.pick(0b111, bit(2), 2, kT0, none) == 0);
  CHECK(b.pick(0b111, bit(0), 0, kT0, none) == 1);
}
