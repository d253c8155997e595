"""The fleet proof (docs/fleet.md): 30 onelayer instances in front of one
origin that fails every request, each instance at a low rate. With
`scope: local` every instance has its own floor, so the origin's arrivals
per first attempt grow with the number of instances; with `scope: fleet`
the retries of the whole fleet stay within ratio x first attempts +
min_per_second x 10 over every 10 s. Exact counts, from the origin.

Heavy (60 processes): labelled nosan."""

import os
import threading
import time
import unittest

import harness as h
from fleet_helpers import CountingOrigin, RedisServer
from harness import IntegrationTest

N = int(os.environ.get("ONELAYER_FLEET_INSTANCES", "30"))
RATE = 5.0          # requests per second per instance
LOAD_SECONDS = 15   # whole seconds of load per run
RATIO = 0.1
FLOOR = 2.0
INTERVAL = 0.5      # sync_interval, seconds


def instance_config(origin_port, redis_port, scope):
    return h.simple_config(
        origin_port,
        retry={"max_attempts": 2, "retry_on": [503], "backoff": {"base": "1ms", "cap": "2ms"}},
        upstream={"retry_budget": {"ratio": RATIO, "min_per_second": FLOOR, "scope": scope, "service": "svc"}},
        fleet={"redis": "127.0.0.1:%d" % redis_port, "sync_interval": "500ms", "timeout": "200ms",
               "stale_after": "2s"})


def drive(port, stop, errors):
    """RATE requests per second on one keep-alive connection until stop."""
    period = 1.0 / RATE
    nxt = time.monotonic()
    conn = None
    while not stop.is_set():
        try:
            if conn is None:
                conn = h.Conn(port, timeout=5)
            r = conn.request("GET", "/")
            if r.status != 503:
                errors.append(r.status)
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(repr(e))
            conn = None
        nxt += period
        delay = nxt - time.monotonic()
        if delay > 0:
            stop.wait(delay)
    if conn is not None:
        conn.close()


class FleetProofTest(IntegrationTest):
    def run_fleet(self, scope):
        redis = RedisServer()
        self.addCleanup(redis.cleanup)
        redis.start()
        origin = CountingOrigin(503)
        self.addCleanup(origin.stop)
        proxies = [self.start_proxy(instance_config(origin.port, redis.port, scope)) for _ in range(N)]
        time.sleep(3 * INTERVAL)  # every instance has synced
        origin.reset()
        stop = threading.Event()
        errors = []
        threads = [threading.Thread(target=drive, args=(p.port(), stop, errors)) for p in proxies]
        start = int(time.monotonic()) + 1
        while time.monotonic() < start:
            time.sleep(0.01)
        for t in threads:
            t.start()
        time.sleep(LOAD_SECONDS)
        stop.set()
        for t in threads:
            t.join(timeout=10)
        self.assertEqual(errors, [])
        end = start + LOAD_SECONDS
        windows = []
        for s in range(start, end - 10 + 1):
            windows.append(origin.totals(s, s + 10))
        first, retries = origin.totals(start, end)
        return first, retries, windows

    def test_local_floors_add_up_fleet_budget_keeps_the_promise(self):
        local_first, local_retries, local_windows = self.run_fleet("local")
        fleet_first, fleet_retries, fleet_windows = self.run_fleet("fleet")
        local_apfa = (local_first + local_retries) / local_first
        fleet_apfa = (fleet_first + fleet_retries) / fleet_first
        print("\nN=%d, %.0f requests/s each, %d s: arrivals per first attempt local %.3f (%d first, %d retries), "
              "fleet %.3f (%d first, %d retries)" % (N, RATE, LOAD_SECONDS, local_apfa, local_first, local_retries,
                                                     fleet_apfa, fleet_first, fleet_retries))
        for (f, r), (lf, lr) in zip(fleet_windows, local_windows):
            promise = RATIO * f + FLOOR * 10
            # Slack: one interval of loads (each at most twice its share of
            # an interval), and one second of the promise because Redis's
            # seconds and the origin's do not start at the same instant.
            slack = promise * (2 * INTERVAL / 10 + 1 / 10)
            print("  10 s window: fleet %d retries for %d first (promise %.0f + %.0f), local %d for %d" % (
                r, f, promise, slack, lr, lf))
            self.assertLessEqual(r, promise + slack)
            # The local budgets' floors add up past the fleet's promise.
            self.assertGreater(lr, 2 * (RATIO * lf + FLOOR * 10))
        self.assertGreater(local_apfa, fleet_apfa + 0.2)
        self.assertGreater(fleet_retries, 0)  # the fleet does retry, within its budget


if __name__ == "__main__":
    unittest.main()
