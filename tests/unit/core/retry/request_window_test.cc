#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/retry/request_window.h"

using namespace onelayer;

namespace {

// What the window must answer, from every request ever added (in order of
// seconds, as the retry budget adds them).
int64_t reference_count(const std::vector<int64_t>& added, int64_t second) {
  int64_t n = 0;
  for (int64_t s : added)
    if (s > second - RequestWindow::kSeconds && s <= second) ++n;
  return n;
}

}  // namespace

TEST_CASE("RequestWindowCountsTheLastTenSeconds") {
  RequestWindow w;
  CHECK(w.count(0) == 0);
  w.add(0);
  w.add(0);
  w.add(3);
  CHECK(w.count(3) == 3);
  CHECK(w.count(9) == 3);
  CHECK(w.count(10) == 1);  // second 0 has left the window
  CHECK(w.count(13) == 0);
  w.add(12);
  CHECK(w.count(12) == 2);  // 3 and 12
  w.add(13);                // second 3 leaves as 13 arrives
  CHECK(w.count(13) == 2);
}

TEST_CASE("RequestWindowReusedBucketDropsItsOldSecond") {
  RequestWindow w;
  w.add(1);
  w.add(1);
  w.add(11);  // same bucket as second 1, which is out of the window now
  CHECK(w.count(11) == 1);
  w.add(11);
  CHECK(w.count(11) == 2);
  CHECK(w.count(21) == 0);
}

// The running total must equal a sum over the window at every step, across
// many expiries: any drift (a count not removed when its second leaves, or
// removed twice) shows up here.
TEST_CASE("RequestWindowRunningTotalMatchesTheSumAcrossExpiry") {
  std::mt19937_64 gen(12345);
  const int64_t gaps[] = {0, 0, 0, 0, 1, 1, 2, 3, 9, 10, 11, 25};
  RequestWindow w;
  std::vector<int64_t> added;
  int64_t second = 0;
  for (int i = 0; i < 20000; ++i) {
    second += gaps[gen() % std::size(gaps)];
    const int burst = 1 + static_cast<int>(gen() % 4);
    for (int k = 0; k < burst; ++k) {
      w.add(second);
      added.push_back(second);
    }
    REQUIRE(w.count(second) == reference_count(added, second));
    const int64_t later = second + static_cast<int64_t>(gen() % 13);  // time moved on, nothing added yet
    REQUIRE(w.count(later) == reference_count(added, later));
    // Seconds no later window holds: dropped, to keep the reference quick.
    std::erase_if(added, [&](int64_t s) { return s <= second - RequestWindow::kSeconds; });
  }
}
