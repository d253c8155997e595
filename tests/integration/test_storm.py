"""Seeing and testing the storm (docs/storm.md), through the real binary:
the successes retry budget, fault drills from the admin port and from a
route's `fault:` block, shedding with Retry-After, hidden-retry detection
across an app that retries on its own, and the attempt-failure counters.
Every counter is checked for its exact value in a scripted run."""

import threading
import time
import unittest

import harness as h
import ops_helpers as ops
from harness import IntegrationTest, wait_until
from test_three_hop import ChainApp

RETRY = {"max_attempts": 3, "backoff": {"base": "1ms", "cap": "5ms", "jitter": "none"},
         "retry_after": {"honor": True, "max": "5s"}}
AMPLE_BUDGET = {"retry_budget": {"ratio": 1.0, "min_per_second": 1000}}


def get(port, path="/", headers=None, timeout=10.0):
    with h.Conn(port, timeout=timeout) as c:
        return c.request("GET", path, headers=headers or [])


class StormTest(IntegrationTest):
    def metric(self, proxy, name, **labels):
        return ops.value(ops.metrics(self, proxy), name, **labels) or 0.0

    def settled(self, proxy, route, requests):
        return ops.settled_metrics(self, proxy, route, requests)


class SuccessesBudgetTest(StormTest):
    """mode: successes: the bucket (min_per_second * 10) starts full, each failed
    attempt withdraws 1, each success deposits `ratio`, retries stop at half."""

    def test_a_total_outage_allows_only_half_a_bucket_of_retries(self):
        origin = self.start_origin(default=h.respond(503, body=b"down"))
        proxy = self.proxy_for(origin, retry=RETRY, timeout="5s",
                               upstream={"retry_budget": {"mode": "successes", "ratio": 0.5,
                                                          "min_per_second": 10}})
        port = proxy.port()
        n = 100
        for _ in range(n):
            self.assertEqual(get(port).status, 503)
        text = self.settled(proxy, "default", n)
        # Failures 1..49 leave more than 50 of 100 tokens: those of them that
        # were a first or second attempt retried (16 requests x 2, then one).
        self.assertEqual(origin.count(), n + 33)
        self.assertEqual(ops.value(text, "onelayer_retries_total", route="default", reason="503"), 33)
        self.assertEqual(ops.value(text, "onelayer_retries_declined_total", route="default",
                                   reason="budget_exhausted"), n - 16)
        self.assertEqual(ops.value(text, "onelayer_attempt_failures_total", route="default",
                                   attempt="first", outcome="503"), n)
        self.assertEqual(ops.value(text, "onelayer_attempt_failures_total", route="default",
                                   attempt="retry", outcome="503"), 33)
        self.assertEqual(ops.value(text, "onelayer_retry_budget_tokens", upstream="origin"), 0)
        self.assertLessEqual(origin.count() / n, 1.34)

        # Recovery: each success deposits 0.5; retries come back above 50.
        origin.default = h.respond(200, body=b"ok")
        for _ in range(20):
            self.assertEqual(get(port).status, 200)
        self.settled(proxy, "default", n + 20)
        self.assertEqual(self.metric(proxy, "onelayer_retry_budget_tokens", upstream="origin"), 10)

    def test_requests_mode_stays_the_default(self):
        origin = self.start_origin(default=h.respond(503, body=b"down"))
        proxy = self.proxy_for(origin, retry=RETRY, timeout="5s",
                               upstream={"retry_budget": {"ratio": 0.5, "min_per_second": 0.001}})
        for _ in range(10):
            get(proxy.port())
        self.settled(proxy, "default", 10)
        # ratio 0.5: 10 requests deposit 5 tokens; the same outage in
        # successes mode would have retried 33 times.
        self.assertEqual(origin.count(), 10 + 5)
        cfg = ops.admin(proxy, "GET", "/config").body.decode()
        self.assertIn("mode: requests", cfg)


class FaultDrillTest(StormTest):
    def start(self, **kw):
        self.origin = self.start_origin(default=h.respond(200, body=b"real"))
        self.proxy = self.proxy_for(self.origin, retry=RETRY, timeout="5s", upstream=AMPLE_BUDGET, **kw)
        return self.proxy.port()

    def test_a_drill_from_the_admin_port_answers_every_attempt_and_then_ends(self):
        port = self.start()
        self.assertEqual(get(port).status, 200)
        r = ops.admin(self.proxy, "POST", "/fault?upstream=origin&status=503&for=30s")
        self.assertEqual((r.status, r.body), (200, b"drill started: upstream=origin status=503 percent=100 left=30s\n"))
        self.assertIn(b"upstream=origin status=503", ops.admin(self.proxy, "GET", "/fault").body)
        n = 5
        for _ in range(n):
            r = get(port)
            # The injected 503 went through the retry rules: 3 attempts, then
            # the owner's verdict, exactly as for a real 503.
            self.assertEqual(r.status, 503)
            self.assertEqual(r.header("x-retry-exhausted"), "3")
            self.assertEqual(r.header("x-onelayer-error"), "fault_injected")
        self.assertEqual(self.origin.count(), 1, "the origin saw none of the drill's attempts")
        text = self.settled(self.proxy, "default", n + 1)
        self.assertEqual(ops.value(text, "onelayer_faults_injected_total", route="default", kind="abort"), 3 * n)
        self.assertEqual(ops.value(text, "onelayer_faults_injected_total", route="default", kind="delay"), 0)
        self.assertEqual(ops.value(text, "onelayer_retries_total", route="default", reason="503"), 2 * n)
        self.assertEqual(ops.value(text, "onelayer_retries_declined_total", route="default",
                                   reason="attempts_exhausted"), n)
        self.assertEqual(ops.value(text, "onelayer_upstream_attempts_total", route="default",
                                   upstream="origin"), 3 * n + 1)
        self.assertEqual(ops.value(text, "onelayer_attempt_failures_total", route="default",
                                   attempt="first", outcome="503"), n)

        r = ops.admin(self.proxy, "DELETE", "/fault")
        self.assertEqual((r.status, r.body), (200, b"ended 1 drill(s)\n"))
        self.assertEqual(get(port).status, 200)
        self.assertEqual(self.origin.count(), 2)

    def test_a_drill_ends_by_itself_and_a_percentage_hits_some_attempts(self):
        port = self.start()
        r = ops.admin(self.proxy, "POST", "/fault?upstream=origin&status=502&for=700ms")
        self.assertEqual(r.status, 200)
        self.assertEqual(get(port).status, 502)
        time.sleep(0.8)
        self.assertEqual(get(port).status, 200)
        self.assertIn(b"no drill running", ops.admin(self.proxy, "GET", "/fault").body)
        # 50% of attempts: with 3 attempts per request most requests succeed.
        ops.admin(self.proxy, "POST", "/fault?upstream=origin&status=503&for=30s&percent=50")
        codes = [get(port).status for _ in range(40)]
        text = self.settled(self.proxy, "default", 42)
        aborts = ops.value(text, "onelayer_faults_injected_total", route="default", kind="abort")
        self.assertGreater(aborts, 5)
        self.assertGreater(self.origin.count(), 20)
        self.assertEqual(self.origin.count() + aborts,
                         ops.value(text, "onelayer_upstream_attempts_total", route="default", upstream="origin"))
        self.assertGreater(codes.count(200), codes.count(503))

    def test_bad_drill_requests_are_refused(self):
        self.start()
        cases = [("POST", "/fault?status=503&for=30s", 400), ("POST", "/fault?upstream=origin&for=30s", 400),
                 ("POST", "/fault?upstream=nope&status=503&for=30s", 404),
                 ("POST", "/fault?upstream=origin&status=503&for=30s&x=1", 400), ("PUT", "/fault", 405)]
        for method, path, status in cases:
            self.assertEqual(ops.admin(self.proxy, method, path).status, status, (method, path))
        self.assertEqual(self.metric(self.proxy, "onelayer_faults_injected_total", route="default",
                                     kind="abort"), 0)

    def test_a_route_fault_block_aborts_and_delays(self):
        port = self.start(route={"fault": {"abort": {"status": 504, "percent": 100}}})
        r = get(port)
        self.assertEqual((r.status, r.header("x-retry-exhausted")), (504, "3"))
        self.assertEqual(self.origin.count(), 0)
        self.assertEqual(self.metric(self.proxy, "onelayer_faults_injected_total", route="default",
                                     kind="abort"), 3)

    def test_a_route_delay_holds_each_attempt_before_the_upstream(self):
        port = self.start(route={"fault": {"delay": {"duration": "300ms", "percent": 100}}})
        t0 = time.monotonic()
        r = get(port)
        self.assertEqual(r.status, 200)
        arrivals = self.origin.wait_for(1)
        self.assertGreaterEqual(arrivals[0].time - t0, 0.29)
        self.assertEqual(self.metric(self.proxy, "onelayer_faults_injected_total", route="default",
                                     kind="delay"), 1)


class SheddingTest(StormTest):
    def slow_origin(self, seconds):
        def handler(arrival):
            if arrival.target.startswith("/slow"):
                return h.delay(seconds)
            return h.respond(200, body=b"fast")
        return self.start_origin(handler=handler)

    def hold(self, port, n, path="/slow"):
        """n requests in flight on threads; returns the threads and their results."""
        results = []
        threads = [threading.Thread(target=lambda: results.append(get(port, path).status)) for _ in range(n)]
        for t in threads:
            t.start()
        return threads, results

    def test_n_plus_k_concurrent_requests_on_a_limit_of_n_give_k_overloaded(self):
        origin = self.slow_origin(1.5)
        proxy = self.proxy_for(origin, listener={"max_concurrent_requests": 2})
        port = proxy.port()
        threads, results = self.hold(port, 2)
        self.assertEqual(len(origin.wait_for(2)), 2)
        k = 3
        for _ in range(k):
            t0 = time.monotonic()
            r = get(port, "/fast")
            self.assertLess(time.monotonic() - t0, 0.5, "shed at once")
            self.assertEqual(r.status, 503)
            self.assertEqual(r.header("x-onelayer-error"), "overloaded")
            self.assertGreaterEqual(int(r.header("retry-after")), 1)
        for t in threads:
            t.join()
        self.assertEqual(sorted(results), [200, 200])
        self.assertEqual(get(port, "/fast").status, 200)  # below the limit again
        self.assertEqual(origin.count(), 3, "no shed request reached the origin")
        text = self.settled(proxy, "default", 2 + k + 1)
        self.assertEqual(ops.value(text, "onelayer_shed_total", listener="main"), k)
        self.assertEqual(ops.value(text, "onelayer_requests_total", listener="main", route="default",
                                   code="503"), k)

    def test_a_onelayer_caller_waits_the_retry_after_it_is_given(self):
        origin = self.slow_origin(0.8)
        inner = self.proxy_for(origin, listener={"max_concurrent_requests": 1})
        outer = self.start_proxy(h.simple_config(inner.port(), retry=RETRY, timeout="8s",
                                                 upstream=AMPLE_BUDGET, layer_id="outer"))
        threads, results = self.hold(inner.port(), 1)
        self.assertEqual(len(origin.wait_for(1)), 1)
        t0 = time.monotonic()
        r = get(outer.port(), "/fast")
        waited = time.monotonic() - t0
        self.assertEqual(r.status, 200)
        arrivals = origin.wait_for(2)
        self.assertGreaterEqual(arrivals[1].time - t0, 1.0, "the caller waited at least Retry-After: 1")
        self.assertGreaterEqual(waited, 1.0)
        for t in threads:
            t.join()
        text = self.settled(outer, "default", 1)
        self.assertEqual(ops.value(text, "onelayer_retries_total", route="default", reason="503"), 1)
        self.assertEqual(self.metric(inner, "onelayer_shed_total", listener="main"), 1)


    def test_a_reload_changes_the_limit_and_keeps_the_count(self):
        origin = self.slow_origin(1.0)
        proxy = self.proxy_for(origin, listener={"max_concurrent_requests": 1})
        port = proxy.port()
        threads, _ = self.hold(port, 1)
        origin.wait_for(1)
        self.assertEqual(get(port, "/fast").status, 503)
        ops.rewrite_config(proxy, h.simple_config(origin.port, listener={"max_concurrent_requests": 0}))
        self.assertEqual(ops.admin(proxy, "POST", "/reload").status, 200)
        self.assertEqual(get(port, "/fast").status, 200, "limit 0: no shedding")
        for t in threads:
            t.join()
        self.assertEqual(self.metric(proxy, "onelayer_shed_total", listener="main"), 1)


class HiddenRetryTest(StormTest):
    def test_an_app_that_retries_503_itself_is_counted_by_the_inner_layer(self):
        # client -> A (owner, 3 attempts) -> app (retries 503 twice itself,
        # carries baggage) -> B (inner) -> origin that always fails.
        origin = self.start_origin(default=h.respond(503, body=b"down"))
        layer_b = self.start_proxy(h.simple_config(origin.port, retry=RETRY, timeout="8s",
                                                   upstream=AMPLE_BUDGET, layer_id="inner"))
        app = ChainApp(self, "app", layer_b.port(), "baggage", "x-retry-exhausted",
                       extra_args=["--retry-503", "2"])
        layer_a = self.start_proxy(h.simple_config(app.port, retry=RETRY, timeout="8s",
                                                   upstream=AMPLE_BUDGET, layer_id="outer"))
        requests = 2
        for _ in range(requests):
            self.assertEqual(get(layer_a.port()).status, 503)
        # 2 requests x 3 owner attempts x 3 app calls, B making one attempt each.
        self.assertEqual(origin.count(), requests * 3 * 3)
        text = ops.metrics(self, layer_b)
        self.assertEqual(ops.value(text, "onelayer_hidden_retries_total", route="default", owner="outer"),
                         requests * 3 * 2, "B counts exactly the app's own retries")
        # The request went on unchanged: B forwarded the owner's member.
        members = [a.header("baggage") for a in origin.snapshot()]
        self.assertTrue(all("retry-owner=outer" in m and "retry-attempt=" in m for m in members), members)
        self.assertIn("hidden retry", layer_b.stderr())
        self.assertEqual(layer_b.stderr().count("hidden retry"), 1, "one warning per owner per minute")

    def test_envoy_attempt_count_on_an_owned_request_counts(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin)
        get(proxy.port(), headers=[("x-retry-owner", "edge"), ("x-envoy-attempt-count", "2")])
        get(proxy.port(), headers=[("x-retry-owner", "edge"), ("x-envoy-attempt-count", "1")])
        get(proxy.port(), headers=[("x-envoy-attempt-count", "3")])  # not owned: not ours to judge
        self.assertEqual(self.metric(proxy, "onelayer_hidden_retries_total", route="default", owner="edge"), 1)
        self.assertEqual(len(ops.series(ops.metrics(self, proxy), "onelayer_hidden_retries_total")), 1)

    def test_the_owner_writes_a_fresh_id_per_request_and_the_attempt_number(self):
        origin = self.start_origin(script=[h.respond(503)], default=h.respond(200))
        proxy = self.proxy_for(origin, retry=RETRY, upstream=AMPLE_BUDGET)
        get(proxy.port())
        get(proxy.port())
        ids = []
        for a in origin.wait_for(3):
            member = [m for m in a.header("baggage").split(",") if m.startswith("retry-attempt=")]
            self.assertEqual(len(member), 1, a.header("baggage"))
            ids.append(member[0].split("=", 1)[1])
        self.assertEqual([i.split(".")[1] for i in ids], ["1", "2", "1"])
        self.assertEqual(ids[0].split(".")[0], ids[1].split(".")[0])
        self.assertNotEqual(ids[0].split(".")[0], ids[2].split(".")[0])
        self.assertEqual(len(ids[0].split(".")[0]), 16)


if __name__ == "__main__":
    unittest.main()
