"""Exact /metrics values after scripted request sequences (docs/operations.md "Metrics"):
requests, attempts, retries by trigger, declines by reason, amplification,
budget tokens, breaker state and the duration histogram."""

import threading
import unittest

import harness as h
import ops_helpers as ops
from harness import IntegrationTest

REASONS = ["not_idempotent", "body_too_large", "attempts_exhausted", "budget_exhausted", "deadline",
           "retry_after_beyond_deadline", "outer_owner", "inner_exhausted", "circuit_open",
           "server_pushback", "deadline_too_short"]
# A budget that never limits these tests: 1000 tokens at start, 10 per request.
AMPLE_BUDGET = {"ratio": 10, "min_per_second": 1000}


def per_target(script_for_target):
    """An Origin handler answering the n-th arrival of each target with
    script_for_target[n] (the last action repeats)."""
    counts = {}
    lock = threading.Lock()

    def handler(arrival):
        with lock:
            n = counts.get(arrival.target, 0)
            counts[arrival.target] = n + 1
        return script_for_target[min(n, len(script_for_target) - 1)]
    return handler


class MetricsValuesTest(IntegrationTest):
    ROUTE = "counted"

    def start(self, retry=None, upstream_extra=None, timeout="5s", **origin_kwargs):
        self.origin = self.start_origin(**origin_kwargs)
        up = {"retry_budget": dict(AMPLE_BUDGET)}
        up.update(upstream_extra or {})
        policy = {"max_attempts": 3, "backoff": dict(ops.FAST_BACKOFF)}
        policy.update(retry or {})
        self.proxy = self.start_proxy(ops.config(
            [ops.listener("main", [ops.route(self.ROUTE, timeout=timeout, retry=policy)])],
            [ops.upstream("origin", [self.origin.endpoint], **up)]))
        return self.proxy.port()

    def send(self, n, method="GET", headers=None, body=b"", fresh_connections=False):
        statuses = []
        port = self.proxy.port()
        conn = None if fresh_connections else h.Conn(port)
        try:
            for i in range(n):
                c = h.Conn(port) if fresh_connections else conn
                try:
                    r = c.request(method, "/req/%d" % i, headers=headers, body=body)
                finally:
                    if fresh_connections:
                        c.close()
                statuses.append(r.status)
                if r.wants_close() and not fresh_connections:
                    conn.close()
                    conn = h.Conn(port)
        finally:
            if conn is not None:
                conn.close()
        return statuses

    def settled(self, requests, route_name=None, proxy=None):
        return ops.settled_metrics(self, proxy or self.proxy, route_name or self.ROUTE, requests)

    def assertDeclines(self, text, **expected):
        want = {reason: 0 for reason in REASONS}
        want.update(expected)
        self.assertEqual(ops.declined(text, self.ROUTE), want)

    def assertCounts(self, text, requests, attempts, retries_503=0):
        total = sum(v for l, v in ops.series(text, "onelayer_requests_total") if l["route"] == self.ROUTE)
        self.assertEqual(total, requests, "requests_total")
        self.assertEqual(ops.value(text, "onelayer_upstream_attempts_total", route=self.ROUTE,
                                   upstream="origin"), attempts)
        self.assertEqual(ops.value(text, "onelayer_retries_total", route=self.ROUTE, reason="503") or 0,
                         retries_503)
        self.assertEqual(ops.value(text, "onelayer_request_duration_seconds_count", route=self.ROUTE),
                         requests, "histogram count equals requests")

    # ------------------------------------------------------------------
    def test_ten_requests_with_two_retries_each_give_10_requests_30_attempts_ratio_3(self):
        self.start(handler=per_target([h.respond(503), h.respond(503), h.respond(200, body=b"ok")]))
        self.assertEqual(self.send(10), [200] * 10)
        text = self.settled(10)
        self.assertEqual(ops.value(text, "onelayer_requests_total", listener="main", route=self.ROUTE,
                                   code="200"), 10)
        self.assertEqual(ops.value(text, "onelayer_requests_total", listener="main", route=self.ROUTE,
                                   code="503"), None, "a retried 503 was counted as a downstream answer")
        self.assertCounts(text, requests=10, attempts=30, retries_503=20)
        for trigger in ("connect-failure", "reset", "timeout"):
            self.assertEqual(ops.value(text, "onelayer_retries_total", route=self.ROUTE, reason=trigger), 0)
        self.assertEqual(ops.value(text, "onelayer_amplification_ratio", route=self.ROUTE), 3.0)
        self.assertDeclines(text)
        buckets = {l["le"]: v for l, v in ops.series(text, "onelayer_request_duration_seconds_bucket")
                   if l["route"] == self.ROUTE}
        self.assertEqual(buckets["+Inf"], 10)
        self.assertGreater(ops.value(text, "onelayer_request_duration_seconds_sum", route=self.ROUTE), 0)
        self.assertIsNotNone(ops.value(text, "onelayer_retry_budget_tokens", upstream="origin"))
        self.assertEqual(ops.value(text, "onelayer_circuit_breaker_state", upstream="origin"), 0)

    def test_post_without_idempotency_key_is_declined_not_idempotent(self):
        self.start(default=h.respond(503))
        self.assertEqual(self.send(3, "POST", body=b"order"), [503] * 3)
        text = self.settled(3)
        self.assertCounts(text, requests=3, attempts=3)
        self.assertDeclines(text, not_idempotent=3)

    def test_post_with_idempotency_key_is_retried_not_declined(self):
        self.start(handler=per_target([h.respond(503), h.respond(200)]))
        self.assertEqual(self.send(2, "POST", headers=[("Idempotency-Key", "k1")], body=b"x"), [200, 200])
        text = self.settled(2)
        self.assertCounts(text, requests=2, attempts=4, retries_503=2)
        self.assertDeclines(text)

    def test_body_over_buffer_limit_is_declined_body_too_large(self):
        self.start(default=h.respond(503), retry={"buffer_limit": "1KiB"})
        self.assertEqual(self.send(2, "PUT", body=b"b" * 4096), [503, 503])
        text = self.settled(2)
        self.assertCounts(text, requests=2, attempts=2)
        self.assertDeclines(text, body_too_large=2)

    def test_always_503_is_declined_attempts_exhausted_once_per_request(self):
        self.start(default=h.respond(503))
        self.assertEqual(self.send(4), [503] * 4)
        text = self.settled(4)
        self.assertCounts(text, requests=4, attempts=12, retries_503=8)
        self.assertDeclines(text, attempts_exhausted=4)
        self.assertEqual(ops.value(text, "onelayer_amplification_ratio", route=self.ROUTE), 3.0)

    def test_empty_budget_declines_every_retry_budget_exhausted(self):
        self.start(default=h.respond(503), upstream_extra={"retry_budget": {"ratio": 0, "min_per_second": 0}})
        self.assertEqual(self.send(5), [503] * 5)
        text = self.settled(5)
        self.assertCounts(text, requests=5, attempts=5)
        self.assertDeclines(text, budget_exhausted=5)
        self.assertEqual(ops.value(text, "onelayer_retry_budget_tokens", upstream="origin"), 0)
        self.assertEqual(ops.value(text, "onelayer_amplification_ratio", route=self.ROUTE), 1.0)

    def test_budget_tokens_count_deposits_and_spends(self):
        # ratio 1, no floor: each request deposits one token, each retry spends one.
        self.start(handler=per_target([h.respond(503), h.respond(200)]),
                   upstream_extra={"retry_budget": {"ratio": 1, "min_per_second": 0}})
        text = ops.metrics(self, self.proxy)
        self.assertEqual(ops.value(text, "onelayer_retry_budget_tokens", upstream="origin"), 0)
        self.assertEqual(self.send(3), [200] * 3)  # each: deposit 1, spend 1 on its retry
        text = self.settled(3)
        self.assertEqual(ops.value(text, "onelayer_retry_budget_tokens", upstream="origin"), 0)
        self.assertCounts(text, requests=3, attempts=6, retries_503=3)
        self.origin.handler = None
        self.origin.default = h.respond(200)
        self.assertEqual(self.send(2), [200] * 2)  # deposits without spends
        text = self.settled(5)
        self.assertEqual(ops.value(text, "onelayer_retry_budget_tokens", upstream="origin"), 2)

    def test_backoff_longer_than_time_left_is_declined_deadline(self):
        self.start(default=h.respond(503), timeout="300ms",
                   retry={"backoff": {"base": "1s", "cap": "1s", "jitter": "none"}})
        for _ in range(2):
            with h.Conn(self.proxy.port()) as c:
                r = c.request("GET", "/slow-backoff")
            self.assertEqual(r.status, 503)
            self.assertEqual(r.header("x-retry-exhausted"), "1")
        text = self.settled(2)
        self.assertCounts(text, requests=2, attempts=2)
        self.assertDeclines(text, deadline=2)

    def test_retry_after_beyond_the_deadline_is_declined_retry_after_beyond_deadline(self):
        self.start(default=h.retry_after(3600), timeout="2s")
        self.assertEqual(self.send(3), [503] * 3)
        text = self.settled(3)
        self.assertCounts(text, requests=3, attempts=3)
        self.assertDeclines(text, retry_after_beyond_deadline=3)

    def test_request_owned_by_an_outer_layer_is_declined_outer_owner(self):
        self.start(default=h.respond(503))
        self.assertEqual(self.send(2, headers=[("x-retry-owner", "outer-layer")]), [503, 503])
        text = self.settled(2)
        self.assertCounts(text, requests=2, attempts=2)
        self.assertDeclines(text, outer_owner=2)
        self.assertEqual(ops.value(text, "onelayer_amplification_ratio", route=self.ROUTE), 1.0)

    def test_response_marked_exhausted_by_an_inner_layer_is_declined_inner_exhausted(self):
        self.start(default=h.respond(503, headers=[("x-retry-exhausted", "3")]))
        self.assertEqual(self.send(3), [503] * 3)
        text = self.settled(3)
        self.assertCounts(text, requests=3, attempts=3)
        self.assertDeclines(text, inner_exhausted=3)

    def test_open_breaker_is_declined_circuit_open_and_shown_in_breaker_state(self):
        # Request 1: 503 (failure 1), retry, 503 (failure 2: opens) -> the next
        # retry is refused circuit_open. Requests 2 and 3 never reach the origin.
        self.start(default=h.respond(503),
                   upstream_extra={"circuit_breaker": {"consecutive_failures": 2, "open_for": "60s"}})
        with h.Conn(self.proxy.port()) as c:
            first = c.request("GET", "/a")
        self.assertEqual((first.status, first.header("x-retry-exhausted")), (503, "2"))
        for _ in range(2):
            with h.Conn(self.proxy.port()) as c:
                self.assertProxyError(c.request("GET", "/b"), 503, "circuit_open")
        text = self.settled(3)
        self.assertCounts(text, requests=3, attempts=2, retries_503=1)
        self.assertDeclines(text, circuit_open=3)
        self.assertEqual(ops.value(text, "onelayer_circuit_breaker_state", upstream="origin"), 1)
        self.assertEqual(self.origin.count(), 2)

    def test_route_without_retry_never_counts_retries(self):
        origin = self.start_origin(default=h.respond(200))
        proxy = self.start_proxy(ops.config(
            [ops.listener("main", [ops.route("plain")])], [ops.upstream("origin", [origin.endpoint])]))
        with h.Conn(proxy.port()) as c:
            for _ in range(4):
                self.assertEqual(c.request("GET", "/").status, 200)
        text = self.settled(4, "plain", proxy)
        self.assertEqual(ops.value(text, "onelayer_upstream_attempts_total", route="plain", upstream="origin"), 4)
        self.assertEqual(sum(v for l, v in ops.series(text, "onelayer_retries_total") if l["route"] == "plain"), 0)
        self.assertEqual(ops.value(text, "onelayer_amplification_ratio", route="plain"), 1.0)


class ProcessMetricsTest(IntegrationTest):
    def test_connection_and_byte_counters_move_with_traffic(self):
        origin = self.start_origin(default=h.respond(200, body=b"x" * 1000))
        proxy = self.proxy_for(origin)
        before = ops.metrics(self, proxy)
        self.assertEqual(ops.value(before, "onelayer_config_generation"), 1)
        c = h.Conn(proxy.port())
        self.addCleanup(c.close)
        self.assertEqual(c.request("POST", "/", body=b"y" * 500).status, 200)
        during = ops.settled_metrics(self, proxy, "default", 1)
        self.assertEqual(ops.value(during, "onelayer_downstream_connections_active", protocol="http1"), 1)
        self.assertEqual(ops.value(during, "onelayer_downstream_connections_total"), 1)
        self.assertGreaterEqual(ops.value(during, "onelayer_upstream_connections_total", protocol="http1"), 1)
        self.assertEqual(ops.value(during, "onelayer_upstream_connections_total", protocol="h2"), 0)
        self.assertGreaterEqual(ops.value(during, "onelayer_bytes_in_total"), 500)
        self.assertGreaterEqual(ops.value(during, "onelayer_bytes_out_total"), 1000)
        c.close()
        after = ops.wait_until(lambda: (lambda t: t if ops.value(
            t, "onelayer_downstream_connections_active", protocol="http1") == 0 else None)(ops.metrics(self, proxy)), 3)
        self.assertIsNotNone(after, "downstream_connections_active did not go back to 0")


if __name__ == "__main__":
    unittest.main()
