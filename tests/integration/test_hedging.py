"""Hedged requests (docs/retries.md, "Hedged requests"), end to end with real
parts: the real binary, HTTP/1.1 origins (harness.Origin), h2c origins
(h2_origin.H2Origin, python3-h2) and gRPC servers (python3-grpcio).

Each scenario prints its figures (`ctest -R hedging -V` shows them):

    hedging[<scenario>]: ...
"""

import os
import select
import sys
import threading
import time
import unittest

import harness as h
import ops_helpers as ops
from harness import IntegrationTest

sys.path.append("/usr/lib/python3/dist-packages")  # Debian's python3-grpcio, python3-h2
import grpc  # noqa: E402

import grpc_peers as gp  # noqa: E402
from h2_origin import CANCEL, H2Origin  # noqa: E402

FAST_BACKOFF = {"base": "1ms", "cap": "5ms", "jitter": "none"}
SERVICE = 0.02     # every answer takes 20 ms
SLOW = 0.5         # ... except every tenth of the slow endpoint's
WARMUP = 40        # requests before measuring: the latency window needs 20 samples
MEASURED = 200


def report(scenario, text):
    print("hedging[%s]: %s" % (scenario, text), flush=True)


def p99(samples):
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * 0.99))]


class _Answer(h.Action):
    """Answers after `seconds`, unless the proxy closes the connection
    first (then it is recorded in `closed` and nothing is sent)."""

    def __init__(self, seconds, closed, status=200, body=b"ok", headers=None):
        self.seconds, self.closed, self.status, self.body = seconds, closed, status, body
        self.headers = headers or []

    def run(self, ctx):
        deadline = time.monotonic() + self.seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            r, _, _ = select.select([ctx.sock], [], [], min(left, 0.05))
            if r:
                try:
                    data = ctx.sock.recv(65536, 0)
                except OSError:
                    data = b""
                if not data:
                    self.closed.append((ctx.arrival.index, time.monotonic()))
                    return False
        return h.respond(self.status, headers=self.headers, body=self.body).run(ctx)


class HedgingTest(IntegrationTest):

    def mix_origin(self, slow_every=None, name="origin"):
        """An origin answering after SERVICE; with `slow_every`, every such
        arrival (the 10th, 20th, ...) after SLOW instead."""
        closed = []

        def handler(arrival):
            slow = slow_every is not None and arrival.index % slow_every == slow_every - 1
            return _Answer(SLOW if slow else SERVICE, closed, body=b"from " + name.encode())
        o = self.start_origin(handler=handler, name=name)
        o.closed = closed
        return o

    def proxy(self, endpoints, retry, budget=None, protocol=None, timeout="5s"):
        up = {"balance": "round_robin"}
        if budget is not None:
            up["retry_budget"] = budget
        if protocol is not None:
            up["protocol"] = protocol
        return self.start_proxy(h.simple_config(endpoints=endpoints, retry=retry, timeout=timeout, upstream=up,
                                                workers=1))

    def timed_gets(self, port, n, headers=None):
        out = []
        with h.Conn(port) as c:
            for i in range(n):
                t = time.monotonic()
                r = c.request("GET", "/item/%d" % i, headers=headers)
                out.append(time.monotonic() - t)
                self.assertEqual(r.status, 200, r.body)
        return out

    # -- the slow-endpoint mix -------------------------------------------------
    def test_after_p95_cuts_the_p99_of_a_slow_endpoint_mix_within_the_budget(self):
        fast_only = self.mix_origin(name="fast-only")
        proxy = self.proxy([fast_only.endpoint], {"max_attempts": 2, "backoff": FAST_BACKOFF})
        fast_p99 = p99(self.timed_gets(proxy.port(), MEASURED))

        fast, slow = self.mix_origin(name="fast"), self.mix_origin(slow_every=10, name="slow")
        plain = self.proxy([fast.endpoint, slow.endpoint], {"max_attempts": 2, "backoff": FAST_BACKOFF})
        plain_p99 = p99(self.timed_gets(plain.port(), MEASURED))

        fast2, slow2 = self.mix_origin(name="fast"), self.mix_origin(slow_every=10, name="slow")
        hedged = self.proxy([fast2.endpoint, slow2.endpoint],
                            {"max_attempts": 2, "backoff": FAST_BACKOFF, "hedge": {"after": "p95"}})
        self.timed_gets(hedged.port(), WARMUP)
        before = fast2.count() + slow2.count()
        hedged_p99 = p99(self.timed_gets(hedged.port(), MEASURED))
        arrivals = fast2.count() + slow2.count() - before
        extra = arrivals - MEASURED
        text = ops.metrics(self, hedged)
        won = ops.value(text, "onelayer_hedges_total", route="default", result="won") or 0
        lost = ops.value(text, "onelayer_hedges_total", route="default", result="lost") or 0
        report("slow-mix", "fast-only p99 %.1f ms; no hedging p99 %.1f ms; after p95 p99 %.1f ms, "
               "%d extra attempts per %d requests (%.1f%%), hedges won %d lost %d"
               % (fast_p99 * 1e3, plain_p99 * 1e3, hedged_p99 * 1e3, extra, MEASURED, 100.0 * extra / MEASURED,
                  won, lost))
        self.assertGreaterEqual(plain_p99, SLOW * 0.9)
        self.assertLess(hedged_p99, 3 * fast_p99)
        # Within the default budget's ratio, 20% of requests.
        self.assertGreater(extra, 0)
        self.assertLessEqual(extra, 0.2 * MEASURED)
        # The losers the slow endpoint was holding: their connections closed.
        self.assertGreater(len(slow2.closed), 0)

    def test_a_total_outage_makes_no_more_arrivals_than_retries_alone(self):
        def outage_run(retry):
            closed = []
            a, b = [self.start_origin(handler=lambda arrival: _Answer(0.03, closed, status=503, body=b"down"))
                    for _ in range(2)]
            proxy = self.proxy([a.endpoint, b.endpoint], retry, budget={"ratio": 0.2, "min_per_second": 1})
            n = 60
            with h.Conn(proxy.port()) as c:
                for i in range(n):
                    self.assertEqual(c.request("GET", "/x/%d" % i).status, 503)
            return (a.count() + b.count()) / n, ops.metrics(self, proxy)
        retry = {"max_attempts": 3, "backoff": FAST_BACKOFF}
        alone, _ = outage_run(retry)
        hedged, text = outage_run(dict(retry, hedge={"after": "10ms"}))
        declined = ops.value(text, "onelayer_hedges_total", route="default", result="declined") or 0
        report("outage", "arrivals per request: retries alone %.2f, with hedging %.2f; hedges declined %d"
               % (alone, hedged, declined))
        self.assertGreater(declined, 0)
        # One budget: a hedge spends the token a retry would have. The floor
        # refills 1 a second, so the runs may differ by a token or two.
        self.assertLessEqual(hedged, alone + 2.0 / 60)
        self.assertLess(hedged, 1.5)

    # -- who may be hedged -----------------------------------------------------
    def slow_then_fast(self):
        """Two origins; the first arrival anywhere answers after 400 ms, the others at once."""
        closed = []
        lock = threading.Lock()
        seen = [0]

        def handler(arrival):
            with lock:
                seen[0] += 1
                first = seen[0] == 1
            return _Answer(0.4 if first else 0.0, closed, body=b"first" if first else b"second")
        a = self.start_origin(handler=handler, name="a")
        b = self.start_origin(handler=handler, name="b")
        return a, b, closed

    def test_a_post_without_a_key_is_never_hedged_and_with_one_both_attempts_carry_it(self):
        a, b, _ = self.slow_then_fast()
        proxy = self.proxy([a.endpoint, b.endpoint], {"max_attempts": 3, "backoff": FAST_BACKOFF,
                                                      "hedge": {"after": "50ms"}})
        with h.Conn(proxy.port()) as c:
            r = c.request("POST", "/orders", body=b"one order")
        self.assertEqual((r.status, r.body), (200, b"first"))
        self.assertEqual(a.count() + b.count(), 1)

        a, b, closed = self.slow_then_fast()
        proxy = self.proxy([a.endpoint, b.endpoint], {"max_attempts": 3, "backoff": FAST_BACKOFF,
                                                      "hedge": {"after": "50ms"}})
        t = time.monotonic()
        with h.Conn(proxy.port()) as c:
            r = c.request("POST", "/orders", body=b"one order", headers=[("Idempotency-Key", "k-17")])
        took = time.monotonic() - t
        self.assertEqual((r.status, r.body), (200, b"second"))
        self.assertLess(took, 0.35)
        arrivals = a.snapshot() + b.snapshot()
        self.assertEqual(len(arrivals), 2)
        self.assertEqual([x.header("idempotency-key") for x in arrivals], ["k-17", "k-17"])
        self.assertEqual(sorted(x.header("x-retry-attempt") for x in arrivals), ["1", "2"])
        self.assertTrue(all(x.body == b"one order" for x in arrivals))
        self.assertTrue(all(x.header("x-retry-owner") for x in arrivals), [x.headers for x in arrivals])
        # The loser's connection was closed by the proxy.
        self.assertTrue(h.wait_until(lambda: len(closed) == 1, timeout=2.0))
        (rec,) = ops.access_records(proxy, 1, lambda r: r.get("path") == "/orders")
        self.assertEqual(rec["hedges"], "1")

    def test_a_retryable_answer_lets_the_hedge_run_on_and_no_loser_byte_reaches_the_client(self):
        closed = []
        slow503 = self.start_origin(handler=lambda a: _Answer(0.1, closed, status=503, body=b"LOSER"), name="a")
        late_ok = self.start_origin(handler=lambda a: _Answer(0.15, closed, body=b"winner"), name="b")
        proxy = self.proxy([slow503.endpoint, late_ok.endpoint], {"max_attempts": 2, "backoff": FAST_BACKOFF,
                                                                  "hedge": {"after": "20ms"}})
        for i in range(4):
            with h.Conn(proxy.port()) as c:
                r = c.request("GET", "/r/%d" % i)
                # The whole connection's bytes: one response, the winner's.
                self.assertEqual((r.status, r.body), (200, b"winner"))
                self.assertFalse(c.wait_for_data(0.3))
        # Each request reached each origin once: no retry after the 503.
        self.assertEqual((slow503.count(), late_ok.count()), (4, 4))
        text = ops.metrics(self, proxy)
        won = ops.value(text, "onelayer_hedges_total", route="default", result="won") or 0
        lost = ops.value(text, "onelayer_hedges_total", route="default", result="lost") or 0
        self.assertEqual((won + lost, ops.route_requests(text, "default")), (4, 4))

    def test_a_losing_h2_stream_is_reset_with_cancel(self):
        hang = H2Origin(lambda r: None)  # never answers
        self.addCleanup(hang.stop)
        answer = H2Origin(lambda r: r.respond(200, [("content-type", "text/plain")], b"h2 winner"))
        self.addCleanup(answer.stop)
        proxy = self.proxy(["127.0.0.1:%d" % hang.port, "127.0.0.1:%d" % answer.port],
                           {"max_attempts": 2, "backoff": FAST_BACKOFF, "hedge": {"after": "30ms"}},
                           protocol="h2c")
        for i in range(2):
            with h.Conn(proxy.port()) as c:
                r = c.request("GET", "/h2/%d" % i)
                self.assertEqual((r.status, r.body), (200, b"h2 winner"))
        self.assertTrue(h.wait_until(lambda: len(hang.resets) >= 1, timeout=2.0), hang.resets)
        self.assertTrue(all(code == CANCEL for _, _, code in hang.resets), hang.resets)
        self.assertEqual(answer.resets, [])

    # -- gRPC (A6) -------------------------------------------------------------
    def grpc_trio(self, replies):
        """Three gRPC servers answering `replies` in arrival order, whichever
        server an arrival reaches; then ok."""
        lock = threading.Lock()
        script = list(replies)

        class Shared(gp.Reply):
            def run(self, request, context):
                with lock:
                    reply = script.pop(0) if script else gp.ok()
                return reply.run(request, context)
        servers = [gp.GrpcServer(default=Shared()) for _ in range(3)]
        for s in servers:
            self.addCleanup(s.stop)
        return servers

    def grpc_proxy(self, servers, retry):
        route = ops.route("grpc", timeout="5s", retry=retry)
        up = ops.upstream("origin", [s.endpoint for s in servers], protocol="h2c", balance="round_robin")
        proxy = self.start_proxy(ops.config([ops.listener("main", [route], protocols=["http1", "h2c"])], [up]))
        client = gp.GrpcClient(proxy.port())
        self.addCleanup(client.close)
        return proxy, client

    def test_grpc_unavailable_on_a_hedge_sends_the_next_at_once(self):
        servers = self.grpc_trio([gp.slow(1.0), gp.fail()])
        _, client = self.grpc_proxy(servers, {"max_attempts": 3, "backoff": {"base": "300ms", "cap": "300ms"},
                                              "idempotent": True, "retry_on": ["unavailable"],
                                              "hedge": {"after": "200ms", "max": 2}})
        t = time.monotonic()
        code, resp, _, _ = client.call(b"hi")
        took = time.monotonic() - t
        calls = sorted((c for s in servers for c in s.calls), key=lambda c: c.arrived)
        report("grpc", "call took %.0f ms; arrivals at %s ms" %
               (took * 1e3, [round((c.arrived - calls[0].arrived) * 1e3) for c in calls]))
        self.assertEqual((code, resp), (grpc.StatusCode.OK, b"ok"))
        self.assertEqual(len(calls), 3)
        # The second hedge followed the UNAVAILABLE at once, not `after` (200 ms) later.
        self.assertLess(calls[2].arrived - calls[1].arrived, 0.12)
        self.assertLess(took, 0.8)

    def test_grpc_a_fatal_status_on_a_hedge_commits(self):
        servers = self.grpc_trio([gp.slow(1.0), gp.fail(grpc.StatusCode.INVALID_ARGUMENT, "bad")])
        _, client = self.grpc_proxy(servers, {"max_attempts": 3, "retry_on": ["unavailable"], "idempotent": True,
                                              "hedge": {"after": "100ms", "max": 2}})
        t = time.monotonic()
        code, _, _, _ = client.call(b"hi")
        took = time.monotonic() - t
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertLess(took, 0.6)
        time.sleep(0.2)
        self.assertEqual(sum(s.count() for s in servers), 2)

    def test_grpc_pushback_delays_the_next_hedge_and_a_negative_one_stops_hedging(self):
        retry = {"max_attempts": 3, "backoff": {"base": "300ms", "cap": "300ms"}, "idempotent": True,
                 "retry_on": ["unavailable"], "hedge": {"after": "50ms", "max": 2}}
        servers = self.grpc_trio([gp.slow(0.6), gp.fail(pushback=200)])
        _, client = self.grpc_proxy(servers, retry)
        code, _, _, _ = client.call(b"hi")
        calls = sorted((c for s in servers for c in s.calls), key=lambda c: c.arrived)
        self.assertEqual(code, grpc.StatusCode.OK)
        self.assertEqual(len(calls), 3)
        # Not at once: the server asked for 200 ms.
        self.assertGreaterEqual(calls[2].arrived - calls[1].arrived, 0.18)

        servers = self.grpc_trio([gp.slow(0.4), gp.fail(pushback=-1)])
        _, client = self.grpc_proxy(servers, retry)
        t = time.monotonic()
        code, resp, _, _ = client.call(b"hi")
        took = time.monotonic() - t
        # No more hedges: the slow first attempt's answer is the call's.
        self.assertEqual((code, resp), (grpc.StatusCode.OK, b"ok"))
        self.assertGreaterEqual(took, 0.35)
        time.sleep(0.1)
        self.assertEqual(sum(s.count() for s in servers), 2)

    # -- single-layer rules ----------------------------------------------------
    def test_in_a_three_layer_chain_only_the_outer_layer_hedges(self):
        # client -> outer -> middle x2 -> inner x2 -> slow | fast origins; every
        # layer has the same hedge block and two endpoints to hedge to.
        closed = []
        slow = self.start_origin(handler=lambda a: _Answer(0.3, closed, body=b"slow"), name="slow")
        fast = self.start_origin(handler=lambda a: _Answer(0.0, closed, body=b"fast"), name="fast")
        hedge_retry = {"max_attempts": 3, "backoff": FAST_BACKOFF, "hedge": {"after": "30ms"}}

        def layer(endpoints):
            return [self.proxy(endpoints, hedge_retry) for _ in range(2)]
        inners = layer([slow.endpoint, fast.endpoint])
        middles = layer(["127.0.0.1:%d" % p.port() for p in inners])
        outer = self.proxy(["127.0.0.1:%d" % p.port() for p in middles], hedge_retry)
        n = 8
        for i in range(n):
            with h.Conn(outer.port()) as c:
                self.assertEqual(c.request("GET", "/chain/%d" % i).status, 200)
        time.sleep(0.5)  # the inner layers count the requests an outer one cancelled

        def counts(proxies):
            hedges = requests = attempts = 0
            for p in proxies:
                t = ops.metrics(self, p)
                hedges += sum(ops.value(t, "onelayer_hedges_total", route="default", result=r) or 0
                              for r in ("won", "lost", "declined"))
                requests += ops.route_requests(t, "default")
                attempts += ops.value(t, "onelayer_upstream_attempts_total", route="default", upstream="origin") or 0
            return hedges, requests, attempts
        outer_hedges, _, _ = counts([outer])
        mid = counts(middles)
        inner = counts(inners)
        report("chain", "outer hedges %d; middle hedges %d, requests %d, attempts %d; inner hedges %d, "
               "requests %d, attempts %d" % ((outer_hedges,) + mid + inner))
        self.assertGreater(outer_hedges, 0)
        self.assertEqual((mid[0], inner[0]), (0, 0))
        # A layer inside makes one attempt per request it gets.
        self.assertEqual(mid[2], mid[1])
        self.assertEqual(inner[2], inner[1])
        self.assertEqual(slow.count() + fast.count(), inner[1])

    # -- deadline-aware retries ------------------------------------------------
    def test_min_time_left_declines_a_retry_the_deadline_cannot_fit(self):
        closed = []
        a = self.start_origin(handler=lambda arr: _Answer(0.25, closed, status=503, body=b"late 503"), name="a")
        b = self.start_origin(handler=lambda arr: _Answer(0.25, closed, status=503, body=b"late 503"), name="b")
        retry = {"max_attempts": 3, "backoff": FAST_BACKOFF, "min_time_left": "300ms"}
        proxy = self.proxy([a.endpoint, b.endpoint], retry, timeout="500ms")
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/short")
        # 250 ms left after the first 503: below 300 ms, so it is the answer.
        self.assertEqual((r.status, r.body), (503, b"late 503"))
        self.assertEqual(r.header("x-retry-exhausted"), "1")
        self.assertEqual(a.count() + b.count(), 1)
        text = ops.metrics(self, proxy)
        self.assertEqual(ops.value(text, "onelayer_retries_declined_total", route="default",
                                   reason="deadline_too_short"), 1)
        # Without min_time_left the retry goes, and the deadline ends it: the
        # caller gets a 504 instead of the upstream's answer.
        proxy = self.proxy([a.endpoint, b.endpoint], {"max_attempts": 3, "backoff": FAST_BACKOFF}, timeout="500ms")
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/short").status, 504)
        self.assertEqual(a.count() + b.count(), 3)


if __name__ == "__main__":
    unittest.main()
