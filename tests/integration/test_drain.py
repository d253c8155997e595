"""Graceful drain (docs/operations.md "Graceful drain"): SIGTERM/SIGINT stop accepting,
/ready turns 503, keep-alive connections are told to close, in-flight
requests (also those waiting to retry) finish, exit 0; drain_timeout cuts
what is left and the exit code (3) says so."""

import signal
import time
import unittest

import harness as h
import ops_helpers as ops
from harness import IntegrationTest


def ready_status(proxy):
    try:
        return ops.admin(proxy, "GET", "/ready", timeout=1).status
    except (OSError, h.IncompleteMessage):
        return None


class DrainTest(IntegrationTest):
    def test_sigterm_during_backoff_wait_lets_the_retry_finish_with_200_and_exit_0(self):
        origin = self.start_origin([h.respond(503)], h.respond(200, body=b"second try"))
        proxy = self.proxy_for(origin, drain_timeout="5s", timeout="5s",
                               retry={"max_attempts": 3,
                                      "backoff": {"base": "800ms", "cap": "800ms", "jitter": "none"}})
        c = h.Conn(proxy.port())
        self.addCleanup(c.close)
        c.send(h.build_request("GET", "/backoff"))
        first = origin.wait_for(1)[0]
        time.sleep(0.1)  # now inside the 800 ms backoff wait
        proxy.signal(signal.SIGTERM)
        self.assertTrue(ops.wait_until(lambda: ready_status(proxy) == 503, timeout=1),
                        "/ready did not turn 503 during the drain")
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"second try"))
        self.assertTrue(r.wants_close(), "response during drain without Connection: close: %r" % r)
        arrivals = origin.snapshot()
        self.assertEqual(len(arrivals), 2)
        self.assertGreaterEqual(arrivals[1].time - first.time, 0.75, "backoff cut short by the drain")
        self.assertEqual(proxy.stop(timeout=5), 0)

    def test_sigint_drains_like_sigterm(self):
        origin = self.start_origin(default=h.delay(0.5, h.respond(200, body=b"done")))
        proxy = self.proxy_for(origin, drain_timeout="5s")
        c = h.Conn(proxy.port())
        self.addCleanup(c.close)
        c.send(h.build_request("GET", "/slow"))
        origin.wait_for(1)
        proxy.signal(signal.SIGINT)
        self.assertEqual(c.read_response().body, b"done")
        proxy.proc.wait(5)
        self.assertEqual(proxy.proc.returncode, 0)

    def test_keep_alive_connection_gets_connection_close_on_its_next_response(self):
        origin = self.start_origin(default=h.respond(200, body=b"fast"))
        proxy = self.proxy_for(origin, drain_timeout="5s")
        c = h.Conn(proxy.port())
        self.addCleanup(c.close)
        first = c.request("GET", "/before")
        self.assertFalse(first.wants_close(), "closed before the drain: %r" % first)
        origin.default = h.delay(0.6, h.respond(200, body=b"slow"))
        c.send(h.build_request("GET", "/during"))
        origin.wait_for(2)
        proxy.signal(signal.SIGTERM)
        r = c.read_response()
        self.assertEqual(r.body, b"slow")
        self.assertEqual(r.header_list("connection"), ["close"], r)
        self.assertTrue(c.closed_by_peer(2.0), "connection left open after Connection: close")
        self.assertEqual(proxy.stop(timeout=5), 0)

    def test_idle_keep_alive_connection_is_closed_when_the_drain_starts(self):
        origin = self.start_origin(default=h.respond(200))
        proxy = self.proxy_for(origin, drain_timeout="5s")
        busy_origin_wait = h.Conn(proxy.port())
        self.addCleanup(busy_origin_wait.close)
        idle = h.Conn(proxy.port())
        self.addCleanup(idle.close)
        self.assertEqual(idle.request("GET", "/").status, 200)
        origin.default = h.delay(1.0, h.respond(200))
        busy_origin_wait.send(h.build_request("GET", "/keeps-the-process-draining"))
        origin.wait_for(2)
        proxy.signal(signal.SIGTERM)
        self.assertTrue(idle.closed_by_peer(1.0), "idle keep-alive connection not closed by the drain")
        self.assertTrue(proxy.running(), "exited before the in-flight request finished")
        self.assertEqual(busy_origin_wait.read_response().status, 200)
        self.assertEqual(proxy.stop(timeout=5), 0)

    def test_new_connections_are_refused_once_the_drain_starts(self):
        origin = self.start_origin(default=h.delay(1.5, h.respond(200, body=b"in flight")))
        proxy = self.proxy_for(origin, drain_timeout="5s")
        port = proxy.port()
        c = h.Conn(port)
        self.addCleanup(c.close)
        c.send(h.build_request("GET", "/in-flight"))
        origin.wait_for(1)
        proxy.signal(signal.SIGTERM)
        self.assertTrue(ops.wait_until(lambda: ops.connect_refused(port, timeout=0.5), timeout=1.0),
                        "a new connection was still served after SIGTERM")
        self.assertTrue(proxy.running())
        self.assertEqual(c.read_response().body, b"in flight")
        self.assertEqual(origin.count(), 1, "a connection made during the drain reached the origin")
        self.assertEqual(proxy.stop(timeout=5), 0)

    def test_drain_timeout_cuts_a_hanging_request_and_exits_3_on_time(self):
        origin = self.start_origin(default=h.hang())
        proxy = self.start_proxy(h.simple_config(origin.port, drain_timeout="1s", timeout="30s"),
                                 check_exit=False)
        c = h.Conn(proxy.port())
        self.addCleanup(c.close)
        c.send(h.build_request("GET", "/forever"))
        origin.wait_for(1)
        t0 = time.monotonic()
        proxy.signal(signal.SIGTERM)
        try:
            proxy.proc.wait(5)
        except Exception:
            self.fail("onelayer did not exit within 5 s of SIGTERM with drain_timeout 1s")
        elapsed = time.monotonic() - t0
        print("\ndrain_timeout 1s with a hanging request: exit %s after %.2fs" % (proxy.proc.returncode, elapsed))
        self.assertEqual(proxy.proc.returncode, 3)
        self.assertGreaterEqual(elapsed, 0.95, "exited before drain_timeout")
        self.assertLess(elapsed, 1.6, "exit lagged drain_timeout")
        self.assertTrue(c.closed_by_peer(1.0), "the cut request's connection stayed open")
        self.assertIn("drain_timeout", proxy.stderr())
        cut = [l for l in proxy.access_log() if "/forever" in l]
        self.assertEqual(len(cut), 1, proxy.stdout())
        self.assertIn("error=drain_timeout", cut[0])

    def test_idle_proxy_exits_0_at_once(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin, drain_timeout="10s")
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/").status, 200)
        t0 = time.monotonic()
        self.assertEqual(proxy.stop(timeout=5), 0)
        self.assertLess(time.monotonic() - t0, 1.0)

    def test_reload_during_drain_is_refused(self):
        origin = self.start_origin(default=h.delay(1.0, h.respond(200)))
        proxy = self.proxy_for(origin, drain_timeout="5s")
        c = h.Conn(proxy.port())
        self.addCleanup(c.close)
        c.send(h.build_request("GET", "/slow"))
        origin.wait_for(1)
        proxy.signal(signal.SIGTERM)
        self.assertTrue(ops.wait_until(lambda: ready_status(proxy) == 503, timeout=1))
        r = ops.admin(proxy, "POST", "/reload")
        self.assertEqual(r.status, 500, r)
        self.assertEqual(c.read_response().status, 200)
        self.assertEqual(proxy.stop(timeout=5), 0)


if __name__ == "__main__":
    unittest.main()
