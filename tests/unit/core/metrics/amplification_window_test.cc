#include "core/metrics/amplification_window.h"

#include <doctest/doctest.h>

#include <cstdint>

namespace onelayer {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;  // an arbitrary epoch millisecond

}  // namespace

TEST_CASE("AmplificationWindowForgetsSecondsOlderThanSixty") {
  AmplificationWindow w;
  CHECK(w.ratio(kT0) == 0.0);  // no requests: 0, not NaN

  for (int i = 0; i < 10; ++i) w.add_request(kT0, 3);           // second 0: ratio 3
  for (int i = 0; i < 10; ++i) w.add_request(kT0 + 30'000, 1);  // second 30: ratio 1

  CHECK(w.ratio(kT0 + 29'999) == doctest::Approx(3.0));
  CHECK(w.ratio(kT0 + 59'999) == doctest::Approx(2.0));  // 40 attempts / 20 requests
  CHECK(w.ratio(kT0 + 60'000) == doctest::Approx(1.0));  // second 0 slid out
  CHECK(w.totals(kT0 + 60'000).requests == 10);
  CHECK(w.ratio(kT0 + 90'000) == 0.0);                   // everything slid out
}

TEST_CASE("AmplificationSlotReusedAfterSixtySecondsStartsFromZero") {
  AmplificationWindow w;
  w.add_request(kT0, 5);
  w.add_request(kT0 + 60'000, 1);  // same slot, next minute
  CHECK(w.totals(kT0 + 60'000).requests == 1);
  CHECK(w.totals(kT0 + 60'000).attempts == 1);
}

TEST_CASE("AmplificationLateWriterDoesNotOverwriteANewerSecond") {
  AmplificationWindow w;
  w.add_request(kT0 + 60'000, 2);
  w.add_request(kT0, 7);  // a minute late, same slot: outside every window now
  CHECK(w.totals(kT0 + 60'000).requests == 1);
  CHECK(w.totals(kT0 + 60'000).attempts == 2);
}

TEST_CASE("AmplificationWindowWorksBeforeTheEpoch") {
  AmplificationWindow w;
  w.add_request(-1, 4);  // second -1, not second 0
  CHECK(w.ratio(-1) == doctest::Approx(4.0));
  CHECK(w.ratio(59'000) == 0.0);
  CHECK(w.ratio(58'999) == doctest::Approx(4.0));
}

}  // namespace onelayer
