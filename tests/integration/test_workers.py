"""Worker threads (docs/operations.md "Worker threads"): with `workers: 2` both event
loops accept and serve (SO_REUSEPORT spreads connections), the retry budget
of an upstream is one budget shared by both, and /metrics adds up what
every worker counted."""

import os
import re
import threading
import time
import unittest

import harness as h
import ops_helpers as ops
from harness import IntegrationTest

CONNECTIONS = 48


def task_cpu_ticks(pid):
    """{tid: utime+stime clock ticks} of every thread of pid."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(tid)] = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return out


def parallel(n, fn):
    """Runs fn(i) in n threads; returns the results and the exceptions raised."""
    results, errors = [None] * n, []
    lock = threading.Lock()

    def run(i):
        try:
            results[i] = fn(i)
        except Exception as e:  # collected and asserted by the caller
            with lock:
                errors.append(repr(e))
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results, errors


class WorkersTest(IntegrationTest):
    def start(self, origin, workers=2, budget=None, **route_extra):
        return self.start_proxy(ops.config(
            [ops.listener("main", [ops.route("api", match={"path_prefix": "/api"}, **route_extra)])],
            [ops.upstream("origin", [origin.endpoint],
                          retry_budget=budget or {"ratio": 0.2, "min_per_second": 10})],
            workers=workers))

    def test_two_workers_both_accept_connections(self):
        # Every no_route answer is logged by the worker thread that served it
        # ("[<thread id>]" in the text log): two workers -> two thread ids.
        origin = self.start_origin()
        proxy = self.start(origin)
        port = proxy.port()

        def one(i):
            with h.Conn(port) as c:
                return c.request("GET", "/not-routed/%d" % i).status
        statuses, errors = parallel(CONNECTIONS, one)
        self.assertEqual(errors, [])
        self.assertEqual(statuses, [404] * CONNECTIONS)
        lines = ops.wait_until(lambda: (lambda ls: ls if len(ls) >= CONNECTIONS else None)(
            [l for l in proxy.stderr().splitlines() if "no_route" in l]), timeout=3) or []
        self.assertEqual(len(lines), CONNECTIONS)
        threads = {re.search(r"\[(\d+)\]", l).group(1) for l in lines}
        main_thread = str(proxy.proc.pid)
        self.assertNotIn(main_thread, threads, "requests served on the main thread")
        self.assertEqual(len(threads), 2, "connections were served by threads %r" % threads)

    def test_two_workers_both_proxy_requests(self):
        # Proxied requests leave no per-thread log line: the CPU time of the
        # worker threads (/proc/<pid>/task) shows that both did the work.
        origin = self.start_origin(default=h.respond(200, body=b"x" * 256))
        proxy = self.start(origin)
        port = proxy.port()
        before = task_cpu_ticks(proxy.proc.pid)
        self.assertGreaterEqual(len(before), 3, "main thread + 2 workers expected: %r" % before)

        def many(i):
            n = 0
            with h.Conn(port) as c:
                for j in range(60):
                    if c.request("GET", "/api/%d/%d" % (i, j)).status == 200:
                        n += 1
            return n
        counts, errors = parallel(CONNECTIONS, many)
        self.assertEqual(errors, [])
        total = sum(counts)
        self.assertEqual(total, CONNECTIONS * 60)
        after = task_cpu_ticks(proxy.proc.pid)
        busy = sorted((after[t] - before.get(t, 0), t) for t in after if t != proxy.proc.pid)
        print("\nworker CPU ticks during %d requests: %r" % (total, busy))
        self.assertGreaterEqual(len([d for d, _ in busy if d > 0]), 2,
                                "fewer than two threads besides the main one did any work: %r" % busy)
        text = ops.settled_metrics(self, proxy, "api", total)
        self.assertEqual(ops.value(text, "onelayer_requests_total", listener="main", route="api", code="200"),
                         total, "metrics not aggregated over both workers")
        self.assertEqual(ops.value(text, "onelayer_upstream_attempts_total", route="api", upstream="origin"),
                         total)
        self.assertEqual(ops.value(text, "onelayer_downstream_connections_total"), CONNECTIONS)
        self.assertEqual(ops.value(text, "onelayer_request_duration_seconds_count", route="api"), total)

    def test_retry_budget_is_shared_by_both_workers(self):
        # min_per_second 4, ratio 0: 4 tokens at start plus 4/s. Two private
        # budgets would allow about twice as many retries.
        origin = self.start_origin(default=h.respond(503))
        proxy = self.start(origin, retry={"max_attempts": 2, "backoff": ops.FAST_BACKOFF},
                           budget={"ratio": 0, "min_per_second": 4})
        port = proxy.port()
        barrier = threading.Barrier(CONNECTIONS)
        conns = [h.Conn(port) for _ in range(CONNECTIONS)]
        for c in conns:
            self.addCleanup(c.close)

        def one(i):
            barrier.wait(10)
            return conns[i].request("GET", "/api/fail").status
        t0 = time.monotonic()
        statuses, errors = parallel(CONNECTIONS, one)
        elapsed = time.monotonic() - t0
        self.assertEqual(errors, [])
        self.assertEqual(statuses, [503] * CONNECTIONS)
        text = ops.metrics(self, proxy)
        retries = ops.value(text, "onelayer_retries_total", route="api", reason="503") or 0
        refused = ops.value(text, "onelayer_retries_declined_total", route="api", reason="budget_exhausted")
        bound = 4 + 4 * elapsed + 1
        print("\nshared budget: %d retries, %d refused in %.2fs (bound %.1f)" % (retries, refused, elapsed, bound))
        self.assertGreaterEqual(retries, 4)
        self.assertLessEqual(retries, bound)
        self.assertEqual(retries + refused, CONNECTIONS)
        self.assertEqual(len(ops.series(text, "onelayer_retry_budget_tokens")), 1,
                         "one budget gauge for the one upstream")

    def test_endpoint_ejection_is_shared_by_both_workers(self):
        # One refusing endpoint of two. Each connection first gets a no_route
        # answer (its log line names the worker thread), then proxies: both
        # workers send attempts to the dead endpoint, and the one outlier
        # detector ejects it once. Per-worker detectors would eject it twice.
        origin = self.start_origin()
        dead_port, dead_sock = h.closed_port()
        self.addCleanup(dead_sock.close)
        proxy = self.start_proxy(ops.config(
            [ops.listener("main", [ops.route("api", match={"path_prefix": "/api"},
                                             retry={"max_attempts": 3, "backoff": ops.FAST_BACKOFF})])],
            [ops.upstream("origin", [origin.endpoint, "127.0.0.1:%d" % dead_port],
                          outlier_detection={"consecutive_failures": 3, "base_ejection": "30s"})],
            workers=2))
        port = proxy.port()

        def one(i):
            with h.Conn(port) as c:
                statuses = [c.request("GET", "/not-routed/%d" % i).status]
                statuses += [c.request("GET", "/api/%d/%d" % (i, k)).status for k in range(4)]
                return statuses
        results, errors = parallel(CONNECTIONS, one)
        self.assertEqual(errors, [])
        self.assertEqual(results, [[404, 200, 200, 200, 200]] * CONNECTIONS)
        lines = [l for l in proxy.stderr().splitlines() if "no_route" in l]
        threads = {re.search(r"\[(\d+)\]", l).group(1) for l in lines}
        self.assertEqual(len(threads), 2, "connections were served by threads %r" % threads)
        text = ops.metrics(self, proxy)
        self.assertEqual(ops.value(text, "onelayer_endpoint_ejections_total", upstream="origin",
                                   endpoint="127.0.0.1:%d" % dead_port), 1)
        self.assertEqual(ops.value(text, "onelayer_endpoint_ejected", upstream="origin",
                                   endpoint="127.0.0.1:%d" % dead_port), 1)
        ejected = [l for l in proxy.stderr().splitlines() if "ejected" in l]
        self.assertEqual(len(ejected), 1, ejected)

    def test_open_breaker_is_shared_by_both_workers(self):
        origin = self.start_origin(default=h.respond(503))
        proxy = self.start_proxy(ops.config(
            [ops.listener("main", [ops.route("api")])],
            [ops.upstream("origin", [origin.endpoint],
                          circuit_breaker={"consecutive_failures": 3, "open_for": "60s"})],
            workers=2))
        port = proxy.port()
        for _ in range(3):
            with h.Conn(port) as c:
                self.assertEqual(c.request("GET", "/").status, 503)

        def one(i):
            with h.Conn(port) as c:
                return c.request("GET", "/").header("x-onelayer-error")
        reasons, errors = parallel(CONNECTIONS // 2, one)
        self.assertEqual(errors, [])
        self.assertEqual(reasons, ["circuit_open"] * (CONNECTIONS // 2))
        self.assertEqual(origin.count(), 3)


if __name__ == "__main__":
    unittest.main()
