"""The fleet proof (docs/fleet.md): 30 onelayer instances in front of one
origin that fails every request, each instance at a low rate. With
`scope: local` every instance has its own floor, so the origin's arrivals
per first attempt grow with the number of instances; with `scope: fleet`
the retries of the whole fleet stay within ratio x first attempts +
min_per_second x 10 over every 10 s. Exact counts, from the origin.

Heavy (30 processes per run): labelled nosan."""

import os
import unittest

from fleet_helpers import CountingOrigin, RedisServer, run_fleet
from harness import IntegrationTest

N = int(os.environ.get("ONELAYER_FLEET_INSTANCES", "30"))
RATE = 5.0          # requests per second per instance
LOAD_SECONDS = 15   # whole seconds of load per run
RATIO = 0.1
FLOOR = 2.0
INTERVAL_MS = 500


class FleetProofTest(IntegrationTest):
    def run_scope(self, scope):
        redis = RedisServer()
        self.addCleanup(redis.cleanup)
        redis.start()
        origin = CountingOrigin(503)
        self.addCleanup(origin.stop)
        first, retries, windows, errors, proxies = run_fleet(
            self.start_proxy, origin, redis.port, N, scope, rate=RATE, seconds=LOAD_SECONDS, ratio=RATIO,
            floor=FLOOR, interval_ms=INTERVAL_MS)
        self.assertEqual(errors, [])
        for p in proxies:  # 30 at once: stop them now rather than at cleanup
            self._stop_proxy(p, True)
        return first, retries, windows

    def test_local_floors_add_up_fleet_budget_keeps_the_promise(self):
        local_first, local_retries, local_windows = self.run_scope("local")
        fleet_first, fleet_retries, fleet_windows = self.run_scope("fleet")
        local_apfa = (local_first + local_retries) / local_first
        fleet_apfa = (fleet_first + fleet_retries) / fleet_first
        print("\nN=%d, %.0f requests/s each, %d s: arrivals per first attempt local %.3f (%d first, %d retries), "
              "fleet %.3f (%d first, %d retries)" % (N, RATE, LOAD_SECONDS, local_apfa, local_first, local_retries,
                                                     fleet_apfa, fleet_first, fleet_retries))
        for (f, r), (lf, lr) in zip(fleet_windows, local_windows):
            promise = RATIO * f + FLOOR * 10
            # Slack: one interval of grants (each instance may hold twice
            # one), and one second of the promise because Redis's seconds
            # and the origin's do not start at the same instant.
            slack = promise * (2 * INTERVAL_MS / 10000 + 1 / 10)
            print("  10 s window: fleet %d retries for %d first (promise %.0f + %.0f), local %d for %d" % (
                r, f, promise, slack, lr, lf))
            self.assertLessEqual(r, promise + slack)
            # The local budgets' floors add up far past the fleet's promise.
            self.assertGreater(lr, 2 * (RATIO * lf + FLOOR * 10))
        self.assertGreater(local_apfa, fleet_apfa + 0.2)
        self.assertGreater(fleet_retries, 0)  # the fleet does retry, within its budget


if __name__ == "__main__":
    unittest.main()
