"""The retry engine through the real binary (docs/retries.md), with scripted origins:
what the client sees and what (and when) each upstream received."""

import threading
import time
import unittest

import harness as h
from harness import IntegrationTest

FAST_BACKOFF = {"base": "10ms", "cap": "50ms", "jitter": "none"}


def retry_policy(**overrides):
    policy = {"max_attempts": 3, "backoff": dict(FAST_BACKOFF)}
    policy.update(overrides)
    return policy


class RetryTest(IntegrationTest):
    def start(self, script=(), default=None, retry=None, timeout="5s", **config):
        self.origin = self.start_origin(script=list(script), default=default)
        self.proxy = self.proxy_for(self.origin, retry=retry or retry_policy(), timeout=timeout,
                                    **config)
        return self.proxy.port()

    def settled_arrivals(self, expected, settle=0.5):
        """Arrivals once no more come in (waits for `expected`, then `settle` more)."""
        self.origin.wait_for(expected, timeout=5)
        time.sleep(settle)
        return self.origin.snapshot()

    def test_503_503_200_gives_the_client_200_after_3_arrivals(self):
        port = self.start([h.respond(503), h.respond(503)], h.respond(200, body=b"finally"))
        with h.Conn(port) as c:
            r = c.request("GET", "/flaky")
        self.assertEqual((r.status, r.body), (200, b"finally"))
        self.assertIsNone(r.header("x-retry-exhausted"))
        arrivals = self.settled_arrivals(3)
        self.assertEqual([a.target for a in arrivals], ["/flaky"] * 3)

    def test_always_503_stops_after_max_attempts_marked_exhausted(self):
        port = self.start(default=h.respond(503, body=b"down"))
        with h.Conn(port) as c:
            r = c.request("GET", "/down")
        self.assertEqual((r.status, r.body), (503, b"down"))
        self.assertEqual(r.header("x-retry-exhausted"), "3")
        self.assertEqual(len(self.settled_arrivals(3)), 3)

    def test_500_is_final_and_not_retried(self):
        port = self.start([h.respond(500, body=b"bug")])
        with h.Conn(port) as c:
            r = c.request("GET", "/")
        self.assertEqual((r.status, r.body), (500, b"bug"))
        self.assertEqual(len(self.settled_arrivals(1)), 1)

    def test_post_without_idempotency_key_is_not_retried(self):
        port = self.start(default=h.respond(503, body=b"no"))
        with h.Conn(port) as c:
            r = c.request("POST", "/orders", body=b'{"item": 1}')
        self.assertEqual((r.status, r.body), (503, b"no"))
        arrivals = self.settled_arrivals(1)
        self.assertEqual(len(arrivals), 1, arrivals)
        self.assertEqual(arrivals[0].body, b'{"item": 1}')

    def test_post_with_idempotency_key_is_retried_with_the_same_key_and_body(self):
        port = self.start([h.respond(503), h.respond(503)], h.echo())
        body = b'{"order": 42}' * 100
        with h.Conn(port) as c:
            r = c.request("POST", "/orders", headers=[("Idempotency-Key", "k-7f3a")], body=body)
        self.assertEqual((r.status, r.body), (200, body))
        arrivals = self.settled_arrivals(3)
        self.assertEqual(len(arrivals), 3)
        self.assertEqual([a.header_all("idempotency-key") for a in arrivals], [["k-7f3a"]] * 3)
        self.assertEqual([a.body for a in arrivals], [body] * 3)

    def test_retry_after_1_makes_the_retry_wait_at_least_1s(self):
        port = self.start([h.retry_after(1)], h.respond(200, body=b"later"))
        t0 = time.monotonic()
        with h.Conn(port) as c:
            r = c.request("GET", "/ra")
        elapsed = time.monotonic() - t0
        self.assertEqual((r.status, r.body), (200, b"later"))
        first, second = self.settled_arrivals(2)
        gap = second.time - first.time
        print("\nRetry-After: 1 -> gap between arrivals %.3fs, client waited %.3fs" % (gap, elapsed))
        self.assertGreaterEqual(gap, 1.0)
        self.assertLess(gap, 2.0, "waited much longer than asked")

    def test_retry_after_beyond_deadline_returns_the_503_at_once_marked_exhausted(self):
        port = self.start([h.retry_after(3600, body=b"come back in an hour")],
                          h.respond(200), timeout="2s")
        t0 = time.monotonic()
        with h.Conn(port) as c:
            r = c.request("GET", "/ra")
        elapsed = time.monotonic() - t0
        print("\nRetry-After: 3600 under a 2 s deadline -> answered in %.3fs" % elapsed)
        self.assertEqual((r.status, r.body), (503, b"come back in an hour"))
        self.assertEqual(r.header("retry-after"), "3600")
        self.assertEqual(r.header("x-retry-exhausted"), "1")
        self.assertLess(elapsed, 0.5)
        self.assertEqual(len(self.settled_arrivals(1)), 1)

    def test_connection_refused_on_post_is_retried_on_the_other_endpoint(self):
        dead_port, dead = h.closed_port()
        self.addCleanup(dead.close)
        self.origin = self.start_origin(default=h.echo())
        self.proxy = self.start_proxy(h.simple_config(
            endpoints=["127.0.0.1:%d" % dead_port, self.origin.endpoint],
            retry=retry_policy(), timeout="5s"))
        bodies = [b"post-%d" % i for i in range(4)]
        with h.Conn(self.proxy.port()) as c:
            for body in bodies:
                r = c.request("POST", "/orders", body=body)
                self.assertEqual((r.status, r.body), (200, body),
                                 "POST failed instead of being retried after a refused connect")
        arrivals = self.settled_arrivals(4)
        self.assertEqual([a.body for a in arrivals], bodies, "each POST reached the origin once")

    def test_reset_before_response_head_on_get_is_retried(self):
        port = self.start([h.close_without_response(), h.close_without_response(rst=True)],
                          h.respond(200, body=b"third time"))
        with h.Conn(port) as c:
            r = c.request("GET", "/")
        self.assertEqual((r.status, r.body), (200, b"third time"))
        self.assertEqual(len(self.settled_arrivals(3)), 3)

    def test_reset_before_response_head_on_post_is_not_retried(self):
        port = self.start([h.close_without_response()], h.respond(200))
        with h.Conn(port) as c:
            r = c.request("POST", "/", body=b"once")
        self.assertProxyError(r, 502, "upstream_reset")
        self.assertEqual(len(self.settled_arrivals(1)), 1)

    def test_reset_after_response_head_began_is_not_retried(self):
        port = self.start([h.head_then_close(200, content_length=1000, partial=b"x" * 10)],
                          h.respond(200, body=b"should not be fetched"))
        with h.Conn(port) as c:
            c.send(h.build_request("GET", "/partial"))
            partial = None
            try:
                r = c.read_response()
            except h.IncompleteMessage as e:
                r = None
                partial = e.partial
            self.assertIsNone(r, "client got a complete response: %r" % r)
            if partial is not None:
                self.assertEqual(partial.status, 200)
                self.assertLess(partial.body_len, 1000)
        arrivals = self.settled_arrivals(1, settle=0.7)
        self.assertEqual(len(arrivals), 1, arrivals)

    def test_per_try_timeout_then_success(self):
        port = self.start([h.hang()], h.respond(200, body=b"fast"),
                          retry=retry_policy(per_try_timeout="300ms"), timeout="3s")
        t0 = time.monotonic()
        with h.Conn(port) as c:
            r = c.request("GET", "/slow-then-fast")
        elapsed = time.monotonic() - t0
        self.assertEqual((r.status, r.body), (200, b"fast"))
        first, second = self.settled_arrivals(2)
        print("\nper-try timeout 300ms: retry sent %.3fs after the first try; client waited %.3fs"
              % (second.time - first.time, elapsed))
        self.assertGreaterEqual(second.time - first.time, 0.28)
        self.assertLess(elapsed, 1.5)

    def test_deadline_reached_without_usable_response_gives_504(self):
        port = self.start(default=h.hang(), retry=retry_policy(per_try_timeout="300ms",
                                                                max_attempts=10), timeout="1s")
        t0 = time.monotonic()
        with h.Conn(port) as c:
            r = c.request("GET", "/never")
        elapsed = time.monotonic() - t0
        self.assertProxyError(r, 504, "deadline_exceeded")
        self.assertGreaterEqual(elapsed, 0.9)
        self.assertLess(elapsed, 1.6)

    def test_failing_upstream_under_load_stays_within_the_retry_budget(self):
        ratio, per_second = 0.1, 5
        port = self.start(default=h.respond(503, body=b"down"),
                          retry=retry_policy(backoff={"base": "1ms", "cap": "5ms", "jitter": "none"}),
                          timeout="2s",
                          upstream={"retry_budget": {"ratio": ratio, "min_per_second": per_second}})
        threads, per_thread = 10, 30
        statuses = []
        errors = []
        lock = threading.Lock()

        pace = 0.1  # each client sends ~10 requests/s: 300 requests over ~3 s

        def client():
            try:
                with h.Conn(port) as c:
                    for i in range(per_thread):
                        started = time.monotonic()
                        r = c.request("GET", "/load")
                        with lock:
                            statuses.append(r.status)
                        time.sleep(max(0.0, pace - (time.monotonic() - started)))
            except Exception as e:  # reported below, never swallowed
                with lock:
                    errors.append(repr(e))

        t0 = time.monotonic()
        workers = [threading.Thread(target=client) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        seconds = time.monotonic() - t0
        requests = threads * per_thread
        arrivals = len(self.settled_arrivals(requests, settle=0.3))
        bound = requests * (1 + ratio) + per_second * seconds + 10
        print("\nbudget under load: %d requests in %.2fs -> %d upstream arrivals "
              "(bound %.1f = %d*(1+%.1f) + %d*%.2f + 10; without a budget: %d)"
              % (requests, seconds, arrivals, bound, requests, ratio, per_second, seconds,
                 requests * 3))
        self.assertEqual(errors, [])
        self.assertEqual(len(statuses), requests)
        self.assertEqual(set(statuses), {503})
        self.assertLessEqual(arrivals, bound)


if __name__ == "__main__":
    unittest.main()
