"""Hot reload (docs/operations.md "Hot reload"): SIGHUP and POST /reload with valid and
invalid files, listeners opening and closing, no failed request under load,
and upstream state (breakers, budgets) kept across a reload."""

import re
import signal
import socket
import threading
import time
import unittest

import harness as h
import ops_helpers as ops
from harness import IntegrationTest


class ReloadTest(IntegrationTest):
    def ports(self, proxy):
        return ops.read_ports(proxy.ports_path)

    def test_sighup_with_a_changed_file_adds_a_route_and_listener_and_closes_a_removed_one(self):
        a = self.start_origin(name="a", default=h.respond(200, body=b"a"))
        b = self.start_origin(name="b", default=h.respond(200, body=b"b"))
        proxy = self.start_proxy(ops.config(
            [ops.listener("main", [ops.route("old", "ua")]),
             ops.listener("doomed", [ops.route("d", "ua")])],
            [ops.upstream("ua", [a.endpoint])]))
        main_port, doomed_port = proxy.port("main"), proxy.port("doomed")
        with h.Conn(doomed_port) as c:
            self.assertEqual(c.request("GET", "/").body, b"a")

        ops.rewrite_config(proxy, ops.config(
            [ops.listener("main", [ops.route("new", "ub", match={"path_prefix": "/new"}),
                                   ops.route("old", "ua")]),
             ops.listener("added", [ops.route("x", "ub")])],
            [ops.upstream("ua", [a.endpoint]), ops.upstream("ub", [b.endpoint])]))
        proxy.signal(signal.SIGHUP)
        ports = ops.wait_until(lambda: (lambda p: p if "added" in p and "doomed" not in p else None)(
            self.ports(proxy)), timeout=5)
        self.assertTrue(ports, "ports file not rewritten after SIGHUP: %r" % self.ports(proxy))
        self.assertEqual(ports["main"], main_port, "an unchanged listener keeps its socket")
        self.assertEqual(ports["admin"], proxy.admin_port)

        with h.Conn(main_port) as c:
            self.assertEqual(c.request("GET", "/new/thing").body, b"b", "new route not in force")
            self.assertEqual(c.request("GET", "/other").body, b"a")
        with h.Conn(ports["added"]) as c:
            self.assertEqual(c.request("GET", "/").body, b"b", "added listener does not serve")
        self.assertTrue(ops.wait_until(lambda: ops.connect_refused(doomed_port), timeout=3),
                        "removed listener still accepts connections")
        text = ops.metrics(self, proxy)
        self.assertEqual(ops.value(text, "onelayer_config_reloads_total", result="ok"), 1)
        self.assertEqual(ops.value(text, "onelayer_config_reloads_total", result="error"), 0)
        self.assertEqual(ops.value(text, "onelayer_config_generation"), 2)
        cfg = ops.admin(proxy, "GET", "/config").body.decode()
        self.assertIn("added", cfg)
        self.assertNotIn("doomed", cfg)

    def test_post_reload_with_a_valid_file_answers_200_and_takes_it(self):
        origin = self.start_origin()
        proxy = self.start_proxy(ops.config(
            [ops.listener("main", [ops.route("first", match={"path_prefix": "/first"})])],
            [ops.upstream("origin", [origin.endpoint])]))
        with h.Conn(proxy.port()) as c:
            self.assertProxyError(c.request("GET", "/second"), 404, "no_route")
        ops.rewrite_config(proxy, ops.config(
            [ops.listener("main", [ops.route("second", match={"path_prefix": "/second"})])],
            [ops.upstream("origin", [origin.endpoint])]))
        r = ops.admin(proxy, "POST", "/reload")
        self.assertEqual(r.status, 200, r)
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/second").status, 200)
            self.assertProxyError(c.request("GET", "/first"), 404, "no_route")
        text = ops.metrics(self, proxy)
        self.assertEqual(ops.value(text, "onelayer_config_reloads_total", result="ok"), 1)
        self.assertEqual(ops.value(text, "onelayer_config_generation"), 2)

    def test_invalid_file_changes_nothing_answers_500_with_every_error_and_logs_them(self):
        origin = self.start_origin(default=h.respond(200, body=b"still here"))
        good = ops.config([ops.listener("main", [ops.route("kept")])],
                          [ops.upstream("origin", [origin.endpoint])])
        proxy = self.start_proxy(good)
        config_before = ops.admin(proxy, "GET", "/config").body
        bad = good.replace("drain_timeout: 2s", "drain_timeout: soon\nbogus_key: 1")
        self.assertNotEqual(bad, good)
        ops.rewrite_config(proxy, bad)
        r = ops.admin(proxy, "POST", "/reload")
        self.assertEqual(r.status, 500, r)
        body = r.body.decode()
        errors = [line for line in body.splitlines() if line.strip()]
        self.assertEqual(len(errors), 2, body)
        self.assertTrue(any("drain_timeout" in e and re.search(r":\d+:\d+:", e) for e in errors), body)
        self.assertTrue(any("bogus_key" in e for e in errors), body)
        # Old config still serving, unchanged.
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/").body, b"still here")
        self.assertEqual(ops.admin(proxy, "GET", "/config").body, config_before)
        # SIGHUP with the same file: a second error.
        proxy.signal(signal.SIGHUP)
        text = ops.wait_until(lambda: (lambda t: t if ops.value(
            t, "onelayer_config_reloads_total", result="error") == 2 else None)(ops.metrics(self, proxy)), 5)
        self.assertIsNotNone(text, "SIGHUP with an invalid file was not counted as an error")
        self.assertEqual(ops.value(text, "onelayer_config_reloads_total", result="ok"), 0)
        self.assertEqual(ops.value(text, "onelayer_config_generation"), 1)
        stderr = proxy.stderr()
        for e in errors:
            self.assertEqual(stderr.count(e), 2, "error %r not logged once per reload:\n%s" % (e, stderr))
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/").body, b"still here")

    def test_unreadable_file_is_an_error_and_the_old_config_serves(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin)
        ops.rewrite_config(proxy, "")
        r = ops.admin(proxy, "POST", "/reload")
        self.assertEqual(r.status, 500, r)
        self.assertIn("empty", r.body.decode())
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/").status, 200)

    def test_reload_that_cannot_bind_a_listener_changes_nothing_and_a_later_reload_opens_it(self):
        # A port held by a socket without SO_REUSEPORT: binding it fails.
        held = socket.socket()
        self.addCleanup(held.close)
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        held_port = held.getsockname()[1]
        origin = self.start_origin()
        base = [ops.listener("main", [ops.route("r")])]
        ups = [ops.upstream("origin", [origin.endpoint])]
        proxy = self.start_proxy(ops.config(base, ups))
        ops.rewrite_config(proxy, ops.config(
            base + [ops.listener("extra", [ops.route("r")]),
                    ops.listener("clash", [ops.route("r")], listen="127.0.0.1:%d" % held_port)], ups))
        r = ops.admin(proxy, "POST", "/reload")
        self.assertEqual(r.status, 500, r)
        self.assertNotIn("extra", self.ports(proxy), "a failed reload published a listener")
        text = ops.metrics(self, proxy)
        self.assertEqual(ops.value(text, "onelayer_config_reloads_total", result="error"), 1)
        self.assertEqual(ops.value(text, "onelayer_config_generation"), 1)

        ops.rewrite_config(proxy, ops.config(base + [ops.listener("extra", [ops.route("r")])], ups))
        self.assertEqual(ops.admin(proxy, "POST", "/reload").status, 200)
        ports = self.ports(proxy)
        self.assertIn("extra", ports)
        with h.Conn(ports["extra"], timeout=2) as c:
            self.assertEqual(c.request("GET", "/").status, 200,
                             "listener 'extra' is in the ports file but nothing accepts on it")

    def test_reloads_under_continuous_load_fail_no_request(self):
        origin = self.start_origin(default=h.respond(200, body=b"ok"))

        def cfg(timeout):
            return ops.config(
                [ops.listener("main", [ops.route("busy", timeout=timeout,
                                                 retry={"max_attempts": 2, "backoff": ops.FAST_BACKOFF})])],
                [ops.upstream("origin", [origin.endpoint])])
        proxy = self.start_proxy(cfg("5s"))
        port = proxy.port()
        stop = threading.Event()
        results = {"ok": 0, "failed": []}
        lock = threading.Lock()

        def client(fresh):
            conn = None
            try:
                while not stop.is_set():
                    if conn is None:
                        conn = h.Conn(port)
                    try:
                        r = conn.request("GET", "/load")
                        good = r.status == 200 and r.body == b"ok"
                        with lock:
                            if good:
                                results["ok"] += 1
                            else:
                                results["failed"].append(repr(r))
                        if fresh or r.wants_close():
                            conn.close()
                            conn = None
                    except Exception as e:  # counted as a failed request
                        with lock:
                            results["failed"].append(repr(e))
                        conn.close()
                        conn = None
            finally:
                if conn is not None:
                    conn.close()

        threads = [threading.Thread(target=client, args=(i % 2 == 0,), daemon=True) for i in range(4)]
        for t in threads:
            t.start()
        self.addCleanup(stop.set)
        time.sleep(0.3)
        reloads = 6
        for i in range(reloads):
            ops.rewrite_config(proxy, cfg("%ds" % (5 + i)))
            if i % 2:
                self.assertEqual(ops.admin(proxy, "POST", "/reload").status, 200)
            else:
                proxy.signal(signal.SIGHUP)
            time.sleep(0.15)
        # One invalid reload in the middle of the load too.
        ops.rewrite_config(proxy, "listeners: [")
        self.assertEqual(ops.admin(proxy, "POST", "/reload").status, 500)
        time.sleep(0.3)
        stop.set()
        for t in threads:
            t.join(10)
        print("\nreload under load: %d requests ok, %d failed, %d reloads" % (
            results["ok"], len(results["failed"]), reloads))
        self.assertEqual(results["failed"], [])
        self.assertGreater(results["ok"], 50)
        text = ops.settled_metrics(self, proxy, "busy", results["ok"])
        self.assertEqual(ops.value(text, "onelayer_config_reloads_total", result="ok"), reloads)
        self.assertEqual(ops.value(text, "onelayer_config_reloads_total", result="error"), 1)
        self.assertEqual(ops.value(text, "onelayer_requests_total", listener="main", route="busy", code="200"),
                         results["ok"], "counters were reset by a reload")

    def test_in_flight_request_finishes_on_the_old_config_after_a_reload(self):
        a = self.start_origin(name="a", default=h.delay(0.6, h.respond(200, body=b"old upstream")))
        b = self.start_origin(name="b", default=h.respond(200, body=b"new upstream"))
        proxy = self.start_proxy(ops.config([ops.listener("main", [ops.route("r", "ua")])],
                                            [ops.upstream("ua", [a.endpoint])]))
        c = h.Conn(proxy.port())
        self.addCleanup(c.close)
        c.send(h.build_request("GET", "/in-flight"))
        a.wait_for(1)
        ops.rewrite_config(proxy, ops.config([ops.listener("main", [ops.route("r", "ub")])],
                                             [ops.upstream("ub", [b.endpoint])]))
        self.assertEqual(ops.admin(proxy, "POST", "/reload").status, 200)
        self.assertEqual(c.read_response().body, b"old upstream")
        self.assertEqual(c.request("GET", "/after").body, b"new upstream")

    def test_open_breaker_of_an_unchanged_upstream_stays_open_across_a_reload(self):
        origin = self.start_origin(default=h.respond(503))
        up = ops.upstream("origin", [origin.endpoint],
                          circuit_breaker={"consecutive_failures": 2, "open_for": "60s"})
        proxy = self.start_proxy(ops.config([ops.listener("main", [ops.route("r")])], [up]))
        with h.Conn(proxy.port()) as c:
            for _ in range(2):
                self.assertEqual(c.request("GET", "/").status, 503)
        self.assertEqual(ops.value(ops.metrics(self, proxy), "onelayer_circuit_breaker_state",
                                   upstream="origin"), 1)
        ops.rewrite_config(proxy, ops.config(
            [ops.listener("main", [ops.route("r", timeout="3s"), ops.route("other")])], [up]))
        self.assertEqual(ops.admin(proxy, "POST", "/reload").status, 200)
        with h.Conn(proxy.port()) as c:
            self.assertProxyError(c.request("GET", "/"), 503, "circuit_open")
        text = ops.metrics(self, proxy)
        self.assertEqual(ops.value(text, "onelayer_circuit_breaker_state", upstream="origin"), 1)
        self.assertEqual(origin.count(), 2, "the reload closed the breaker")

    def test_budget_of_an_unchanged_upstream_keeps_its_tokens_and_a_renamed_one_starts_fresh(self):
        origin = self.start_origin()
        budget = {"ratio": 1, "min_per_second": 0}  # one token per request, no floor
        proxy = self.start_proxy(ops.config(
            [ops.listener("main", [ops.route("s", "renamed", match={"path_prefix": "/s"}),
                                   ops.route("r", "kept")])],
            [ops.upstream("kept", [origin.endpoint], retry_budget=budget),
             ops.upstream("renamed", [origin.endpoint], retry_budget=budget)]))
        with h.Conn(proxy.port()) as c:
            for _ in range(3):
                self.assertEqual(c.request("GET", "/").status, 200)
            self.assertEqual(c.request("GET", "/s").status, 200)
        text = ops.metrics(self, proxy)
        self.assertEqual(ops.value(text, "onelayer_retry_budget_tokens", upstream="kept"), 3)
        self.assertEqual(ops.value(text, "onelayer_retry_budget_tokens", upstream="renamed"), 1)
        ops.rewrite_config(proxy, ops.config(
            [ops.listener("main", [ops.route("s", "fresh", match={"path_prefix": "/s"}),
                                   ops.route("r", "kept", timeout="4s")])],
            [ops.upstream("kept", [origin.endpoint], retry_budget=budget),
             ops.upstream("fresh", [origin.endpoint], retry_budget=budget)]))
        self.assertEqual(ops.admin(proxy, "POST", "/reload").status, 200)
        text = ops.metrics(self, proxy)
        self.assertEqual(ops.value(text, "onelayer_retry_budget_tokens", upstream="kept"), 3)
        self.assertEqual(ops.value(text, "onelayer_retry_budget_tokens", upstream="fresh"), 0)
        self.assertIsNone(ops.value(text, "onelayer_retry_budget_tokens", upstream="renamed"),
                          "a removed upstream is still reported")


if __name__ == "__main__":
    unittest.main()
