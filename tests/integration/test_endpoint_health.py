"""Endpoint health and balancing (docs/endpoint-health.md)
balancing") through the real binary, with real origins and dead endpoints on
127.0.0.1: a port that refuses connections, a listener whose accept queue is
full (SYNs dropped: a black hole), an origin answering 503 to everything, a
slow origin."""

import re
import time

import harness as h
import ops_helpers as ops
from harness import IntegrationTest

FAST_RETRY = {"max_attempts": 3, "backoff": {"base": "5ms", "cap": "20ms"}}


def load(port, total, concurrency=10):
    """[(status, seconds)] of `total` GETs at `concurrency`."""
    return [(status, secs) for _, status, secs in h.concurrent_gets(port, total, concurrency)]


def get(port, target="/item"):
    with h.Conn(port) as c:
        return c.request("GET", target)


class EndpointHealthTest(IntegrationTest):
    def start(self, endpoints, upstream=None, retry=None, **kw):
        up = {"name": "origin", "endpoints": endpoints, "connect_timeout": "1s"}
        up.update(upstream or {})
        cfg = h.simple_config(endpoints=endpoints, upstream=up, retry=retry or dict(FAST_RETRY),
                              timeout="5s", **kw)
        self.proxy = self.start_proxy(cfg)
        return self.proxy.port()

    def refused(self):
        port, sock = h.closed_port()
        self.addCleanup(sock.close)
        return "127.0.0.1:%d" % port

    def metrics(self):
        return ops.metrics(self, self.proxy)

    def ejected(self, endpoint, text=None):
        return ops.value(text or self.metrics(), "onelayer_endpoint_ejected", upstream="origin", endpoint=endpoint)

    def ejections(self, endpoint, text=None):
        return ops.value(text or self.metrics(), "onelayer_endpoint_ejections_total", upstream="origin",
                         endpoint=endpoint)

    def wait_log(self, pattern, timeout=5.0):
        found = h.wait_until(lambda: re.search(pattern, self.proxy.stderr()), timeout)
        self.assertTrue(found, "no log line matching %r\n%s" % (pattern, self.proxy.stderr()[-3000:]))

    def total(self, text, name):
        return sum(v for _, v in ops.series(text, name))

    # -- a refusing endpoint ----------------------------------------------
    def check_refusing_endpoint_costs_no_retries(self, balance, breaker=None):
        origin = self.start_origin()
        dead = self.refused()
        upstream = {"circuit_breaker": breaker} if breaker else {}
        if balance:
            upstream["balance"] = balance
        port = self.start([origin.endpoint, dead], upstream=upstream)
        results = load(port, 1000, 10)
        statuses = [s for s, _ in results]
        self.assertEqual(statuses.count(200), 1000, {s: statuses.count(s) for s in set(statuses)})
        text = self.metrics()
        retries = self.total(text, "onelayer_retries_total")
        attempts = self.total(text, "onelayer_upstream_attempts_total")
        # Five consecutive failures eject it; concurrency adds a few more.
        self.assertLessEqual(retries, 15, text)
        self.assertLessEqual((attempts - 1000) / 1000, 0.015)
        self.assertFalse(ops.declined(text, "default").get("budget_exhausted"), text)
        self.assertEqual(self.ejected(dead, text), 1.0)
        self.assertEqual(self.ejections(dead, text), 1.0)
        self.assertEqual(self.ejected(origin.endpoint, text), 0.0)
        self.wait_log(r"upstream origin: endpoint %s ejected for 10s \(consecutive_failures, ejection 1 in a row\)"
                      % re.escape(dead))
        return text

    def test_p2c_ejects_a_refusing_endpoint_and_the_budget_is_not_drained(self):
        self.check_refusing_endpoint_costs_no_retries(None)

    def test_round_robin_ejects_a_refusing_endpoint_and_the_budget_is_not_drained(self):
        self.check_refusing_endpoint_costs_no_retries("round_robin")

    def test_with_a_breaker_the_healthy_endpoint_keeps_serving(self):
        text = self.check_refusing_endpoint_costs_no_retries(
            None, {"consecutive_failures": 3, "open_for": "10s"})
        self.assertEqual(ops.value(text, "onelayer_circuit_breaker_state", upstream="origin"), 0.0)

    def test_the_breaker_opens_only_when_every_endpoint_that_is_in_fails(self):
        # consecutive_failures 1: a breaker counting attempts would open on the
        # dead endpoint's first refusal and answer 503 circuit_open.
        origin = self.start_origin()
        dead = self.refused()
        port = self.start([origin.endpoint, dead], upstream={
            "balance": "round_robin", "circuit_breaker": {"consecutive_failures": 1, "open_for": "30s"}})
        statuses = [get(port).status for _ in range(40)]
        self.assertEqual(statuses, [200] * 40)
        text = self.metrics()
        self.assertEqual(ops.value(text, "onelayer_circuit_breaker_state", upstream="origin"), 0.0)
        self.assertFalse(ops.declined(text, "default").get("circuit_open"))
        # The healthy endpoint dies too: now every endpoint that is in fails,
        # and the breaker opens.
        origin.stop()
        answers = [get(port) for _ in range(3)]
        self.assertIn("circuit_open", [r.header("x-onelayer-error") for r in answers])
        self.assertEqual(ops.value(self.metrics(), "onelayer_circuit_breaker_state", upstream="origin"), 1.0)

    # -- a black hole -----------------------------------------------------
    def test_a_black_holed_endpoint_costs_one_connect_timeout_not_one_per_request(self):
        origin = self.start_origin()
        hole_port, keep = h.black_hole_port()
        for s in keep:
            self.addCleanup(s.close)
        hole = "127.0.0.1:%d" % hole_port
        port = self.start([origin.endpoint, hole], upstream={"connect_timeout": "300ms"})
        durations = []
        for _ in range(30):
            t0 = time.monotonic()
            r = get(port)
            durations.append(time.monotonic() - t0)
            self.assertEqual(r.status, 200)
        slow = [d for d in durations if d >= 0.25]
        self.assertEqual(len(slow), 1, durations)  # the one request that met the black hole
        self.wait_log(r"endpoint %s ejected for 10s \(connect_timeout, ejection 1 in a row\)" % re.escape(hole))
        self.assertEqual(self.ejected(hole), 1.0)

    # -- one endpoint answering 503 ---------------------------------------
    def check_503_endpoint(self, balance):
        good = self.start_origin()
        bad = self.start_origin(default=h.respond(503, body=b"down"))
        port = self.start([good.endpoint, bad.endpoint], upstream={"balance": balance})
        results = load(port, 600, 10)
        self.assertEqual([s for s, _ in results].count(200), 600)
        text = self.metrics()
        self.assertLessEqual(self.total(text, "onelayer_retries_total"), 15)
        self.assertLessEqual(bad.count(), 15)
        return bad, text

    def test_p2c_sends_an_endpoint_answering_503_to_everything_almost_nothing(self):
        # A failure never lowers its latency estimate: p2c avoids it even
        # before five failures in a row would eject it.
        self.check_503_endpoint("p2c")

    def test_round_robin_ejects_an_endpoint_answering_503_to_everything(self):
        bad, text = self.check_503_endpoint("round_robin")
        self.assertEqual(self.ejected(bad.endpoint, text), 1.0)

    # -- a slow endpoint --------------------------------------------------
    def test_p2c_shifts_load_away_from_a_slow_endpoint(self):
        fast = self.start_origin()
        slow = self.start_origin(default=h.delay(0.1, h.respond(200, body=b"slow")))
        port = self.start([fast.endpoint, slow.endpoint])
        results = load(port, 200, 4)
        self.assertEqual([s for s, _ in results].count(200), 200)
        # Round robin would send it 100; peak-EWMA x outstanding sends it a few.
        self.assertLess(slow.count(), 20, (fast.count(), slow.count()))
        self.assertEqual(self.ejected(slow.endpoint), 0.0)  # slow is not failing
        # Health checks are off by default: only the requests arrived.
        self.assertEqual({x.target for x in fast.snapshot() + slow.snapshot()}, {"/item"})

    # -- round robin ------------------------------------------------------
    def test_round_robin_alternates_first_attempts_per_request_even_when_every_request_retries(self):
        a = self.start_origin(default=h.respond(503))
        b = self.start_origin(default=h.respond(503))
        port = self.start([a.endpoint, b.endpoint], upstream={
            "balance": "round_robin", "outlier_detection": {"enabled": False},
            "retry_budget": {"ratio": 1, "min_per_second": 1000}},
            retry={"max_attempts": 2, "backoff": {"base": "1ms", "cap": "1ms"}})
        for _ in range(10):
            self.assertEqual(get(port).status, 503)
        firsts = sorted([(x.time, "a") for x in a.snapshot() if x.header("x-retry-attempt") == "1"] +
                        [(x.time, "b") for x in b.snapshot() if x.header("x-retry-attempt") == "1"])
        self.assertEqual([n for _, n in firsts], ["a", "b"] * 5)
        # Each retry went to the other endpoint.
        self.assertEqual(a.count(), 10)
        self.assertEqual(b.count(), 10)

    # -- return after base_ejection and one probe -------------------------
    def test_an_ejected_endpoint_returns_after_base_ejection_and_one_probe(self):
        good = self.start_origin()
        flaky = self.start_origin(default=h.respond(503))
        port = self.start([good.endpoint, flaky.endpoint], upstream={
            "balance": "round_robin",
            "outlier_detection": {"consecutive_failures": 2, "base_ejection": "1s"}})
        for _ in range(4):
            self.assertEqual(get(port).status, 200)
        self.wait_log(r"endpoint %s ejected for 1s \(consecutive_failures" % re.escape(flaky.endpoint))
        ejected_at = time.monotonic()
        self.assertEqual(self.ejected(flaky.endpoint), 1.0)
        seen = flaky.count()
        flaky.default = h.respond(200, body=b"back")
        # While ejected: no first attempts and no retries reach it.
        while time.monotonic() - ejected_at < 0.8:
            self.assertEqual(get(port).status, 200)
        self.assertEqual(flaky.count(), seen)
        # After base_ejection the next request is its probe; it succeeds and it is back.
        time.sleep(max(0, 1.05 - (time.monotonic() - ejected_at)))
        for _ in range(6):
            self.assertEqual(get(port).status, 200)
        self.assertGreaterEqual(flaky.count(), seen + 3)
        self.wait_log(r"upstream origin: endpoint %s returned \(probe succeeded\)" % re.escape(flaky.endpoint))
        self.assertEqual(self.ejected(flaky.endpoint), 0.0)
        self.assertEqual(self.ejections(flaky.endpoint), 1.0)

    def test_a_failed_probe_ejects_for_twice_base_ejection(self):
        good = self.start_origin()
        bad = self.start_origin(default=h.respond(503))
        port = self.start([good.endpoint, bad.endpoint], upstream={
            "balance": "round_robin",
            "outlier_detection": {"consecutive_failures": 1, "base_ejection": "500ms"}})
        self.assertEqual([get(port).status for _ in range(2)], [200, 200])
        self.wait_log(r"endpoint %s ejected for 500ms \(consecutive_failures, ejection 1 in a row\)"
                      % re.escape(bad.endpoint))
        time.sleep(0.6)
        self.assertEqual(get(port).status, 200)  # its probe fails and is retried on the good one
        self.wait_log(r"endpoint %s ejected for 1s \(probe_failed, ejection 2 in a row\)" % re.escape(bad.endpoint))
        self.assertEqual(self.ejections(bad.endpoint), 2.0)

    # -- active health checks ---------------------------------------------
    def test_active_health_checks_eject_and_return_an_endpoint(self):
        health = {"status": 503}

        def handler(arrival):
            if arrival.target == "/healthz":
                return h.respond(health["status"], body=b"hc")
            return h.respond(200, body=b"ok")

        good = self.start_origin()
        sick = self.start_origin(handler=handler)
        port = self.start([good.endpoint, sick.endpoint], upstream={
            "health_check": {"path": "/healthz", "interval": "100ms", "timeout": "100ms",
                             "unhealthy": 2, "healthy": 2}})
        self.wait_log(r"endpoint %s ejected \(health_check: 2 failed checks in a row\), until checks pass"
                      % re.escape(sick.endpoint))
        self.assertEqual(self.ejected(sick.endpoint), 1.0)
        before = len([x for x in sick.snapshot() if x.target != "/healthz"])
        for _ in range(20):
            self.assertEqual(get(port).status, 200)
        self.assertEqual(len([x for x in sick.snapshot() if x.target != "/healthz"]), before)
        health["status"] = 200
        self.wait_log(r"endpoint %s returned \(health_check: 2 passed checks in a row\)" % re.escape(sick.endpoint))
        self.assertEqual(self.ejected(sick.endpoint), 0.0)
        checks = [x for x in sick.snapshot() if x.target == "/healthz"]
        self.assertEqual(checks[0].method, "GET")
        self.assertEqual(checks[0].header("user-agent"), "onelayer-health-check")
        self.assertFalse([x for x in good.snapshot() if x.target != "/healthz" and x.target != "/item"])

    # -- DNS names balance per address ------------------------------------
    def test_a_dns_name_takes_part_per_resolved_address(self):
        origin = self.start_origin()
        name = "localhost:%d" % origin.port
        port = self.start([name])
        for _ in range(3):
            self.assertEqual(get(port).status, 200)
        text = self.metrics()
        members = [l["endpoint"] for l, _ in ops.series(text, "onelayer_endpoint_ejected")]
        self.assertIn(name + "/127.0.0.1", members, text)
        self.assertNotIn(name, members)  # resolved: the name itself is no longer a member
