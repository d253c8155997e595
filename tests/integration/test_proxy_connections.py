"""Connection handling through the real onelayer: upstream pooling,
downstream keep-alive and pipelining, Connection: close, max_connections."""

import signal
import time
import unittest

import harness as h
from harness import IntegrationTest


class ConnectionReuseTest(IntegrationTest):
    def test_1000_sequential_requests_on_one_client_connection_use_one_upstream_connection(self):
        origin = self.start_origin(handler=lambda a: h.respond(200, body=a.target.encode()))
        proxy = self.proxy_for(origin)
        t0 = time.monotonic()
        with h.Conn(proxy.port()) as c:
            for i in range(1000):
                r = c.request("GET", "/seq/%d" % i)
                self.assertEqual((r.status, r.body), (200, b"/seq/%d" % i))
        elapsed = time.monotonic() - t0
        print("\n1000 sequential requests in %.2fs; upstream connections accepted: %d"
              % (elapsed, origin.connections_accepted))
        self.assertEqual(origin.count(), 1000)
        self.assertEqual(origin.connections_accepted, 1)
        self.assertEqual(set(origin.conn_ids()), {1})

    def test_max_requests_per_connection_closes_an_upstream_connection_after_that_many(self):
        origin = self.start_origin(handler=lambda a: h.respond(200, body=a.target.encode()))
        proxy = self.proxy_for(origin, upstream={"pool": {"max_requests_per_connection": 3}})
        with h.Conn(proxy.port()) as c:
            for i in range(10):
                r = c.request("GET", "/seq/%d" % i)
                self.assertEqual((r.status, r.body), (200, b"/seq/%d" % i))
        # Three requests on each connection, then a new one: 1-3, 4-6, 7-9, 10.
        self.assertEqual(origin.conn_ids(), [1, 1, 1, 2, 2, 2, 3, 3, 3, 4])

    def test_pipelined_requests_are_answered_in_request_order(self):
        delays = {"/a": 0.3, "/b": 0.0, "/c": 0.15, "/d": 0.0}
        origin = self.start_origin(handler=lambda a: h.delay(
            delays.get(a.target, 0), h.respond(200, body=a.target.encode())))
        proxy = self.proxy_for(origin)
        reqs = (h.build_request("GET", "/a") + h.build_request("POST", "/b", body=b"bb")
                + h.build_request("HEAD", "/c") + h.build_request("GET", "/d"))
        data = h.raw_request(proxy.port(), reqs, timeout=5, responses=4,
                             methods=["GET", "POST", "HEAD", "GET"])
        resps = h.parse_responses(data, methods=["GET", "POST", "HEAD", "GET"])
        self.assertEqual([(r.status, r.body) for r in resps],
                         [(200, b"/a"), (200, b"/b"), (200, b""), (200, b"/d")])
        self.assertEqual(sorted(a.target for a in origin.snapshot()), ["/a", "/b", "/c", "/d"])

    def test_100_pipelined_requests_in_one_write_are_answered_in_order(self):
        origin = self.start_origin(handler=lambda a: h.respond(200, body=a.target.encode()))
        proxy = self.proxy_for(origin)
        reqs = b"".join(h.build_request("GET", "/n/%d" % i) for i in range(100))
        data = h.raw_request(proxy.port(), reqs, timeout=10, responses=100)
        self.assertEqual([r.body for r in h.parse_responses(data)],
                         [b"/n/%d" % i for i in range(100)])

    def test_client_vanishing_mid_response_leaves_the_proxy_healthy(self):
        origin = self.start_origin(script=[h.stream_response(50 * 1024 * 1024)], record_limit=0)
        proxy = self.proxy_for(origin)
        c = h.Conn(proxy.port())
        c.send(h.build_request("GET", "/big"))
        got = c.sock.recv(1024 * 1024)
        self.assertTrue(got.startswith(b"HTTP/1.1 200"))
        h._rst_close(c.sock)
        time.sleep(0.3)
        with h.Conn(proxy.port()) as c2:
            r = c2.request("GET", "/small")
        self.assertEqual((r.status, r.body), (200, b"ok"))
        self.assertTrue(proxy.running())

    def test_pipelined_requests_in_one_segment_with_bodies(self):
        origin = self.start_origin(default=h.echo())
        proxy = self.proxy_for(origin)
        bodies = [b"first", b"", b"x" * 5000, b"last"]
        reqs = b"".join(h.build_request("POST", "/p%d" % i, body=b) for i, b in enumerate(bodies))
        data = h.raw_request(proxy.port(), reqs, timeout=5, responses=4)
        self.assertEqual([r.body for r in h.parse_responses(data)], bodies)

    def test_upstream_closing_an_idle_pooled_connection_does_not_fail_the_next_request(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/1").status, 200)
            time.sleep(0.1)
            self.assertEqual(origin.close_idle(), 1, "the pooled connection was not idle")
            time.sleep(0.3)  # let the proxy see the FIN
            r = c.request("GET", "/2")
            self.assertEqual((r.status, r.body), (200, b"ok"), repr(r))
        self.assertEqual(origin.connections_accepted, 2)
        self.assertEqual([a.target for a in origin.snapshot()], ["/1", "/2"])

    def test_upstream_closing_right_after_a_response_does_not_fail_the_next_request(self):
        # The origin closes without announcing it (keep-alive race).
        origin = self.start_origin(script=[h.respond(200, body=b"one", close_after=True)])
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/1").body, b"one")
            time.sleep(0.3)
            self.assertEqual(c.request("GET", "/2").body, b"ok")
        self.assertEqual(origin.connections_accepted, 2)

    def test_client_connection_close_is_honoured(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/", headers=[("Connection", "close")])
            self.assertEqual(r.status, 200)
            self.assertTrue(c.closed_by_peer(3), "proxy kept the client connection open")
        self.assertIn("close", [t.lower() for t in r.header_list("connection")])

    def test_http10_client_without_keep_alive_is_closed_after_response(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin)
        data = h.raw_request(proxy.port(), b"GET /old HTTP/1.0\r\nHost: x\r\n\r\n", timeout=5)
        resps = h.parse_responses(data)
        self.assertEqual([r.status for r in resps], [200])
        self.assertEqual(resps[0].body, b"ok")

    def test_upstream_connection_close_is_honoured_and_client_connection_survives(self):
        origin = self.start_origin(script=[h.respond(200, body=b"one", close=True)])
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            r1 = c.request("GET", "/1")
            self.assertEqual(r1.body, b"one")
            if r1.wants_close():
                self.fail("upstream Connection: close leaked to the client: %r" % r1)
            r2 = c.request("GET", "/2")
            self.assertEqual(r2.body, b"ok")
        self.assertEqual(origin.connections_accepted, 2)
        ids = origin.conn_ids()
        self.assertNotEqual(ids[0], ids[1])

    def test_max_connections_limits_concurrent_client_connections(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin, limits={"max_connections": 2})
        port = proxy.port()
        c1, c2 = h.Conn(port), h.Conn(port)
        self.addCleanup(c1.close)
        self.addCleanup(c2.close)
        self.assertEqual(c1.request("GET", "/c1").status, 200)
        self.assertEqual(c2.request("GET", "/c2").status, 200)
        # A third connection must not be served while two are open: it is
        # refused, closed, left unaccepted or answered with an error.
        served = False
        c3 = None
        try:
            c3 = h.Conn(port, timeout=2)
            self.addCleanup(c3.close)
            c3.send(h.build_request("GET", "/c3"))
            if c3.wait_for_data(1.0):
                try:
                    r3 = c3.read_response()
                    served = r3.status == 200
                except (h.IncompleteMessage, OSError):
                    pass
        except OSError:
            pass
        self.assertFalse(served, "third connection served over max_connections: 2")
        self.assertEqual([a.target for a in origin.snapshot()], ["/c1", "/c2"])
        # Freeing slots lets a new client in (c3 may be accepted late: close it too).
        c1.close()
        if c3 is not None:
            c3.close()
        time.sleep(0.3)
        deadline = time.monotonic() + 5
        while True:
            try:
                with h.Conn(port, timeout=3) as c4:
                    r4 = c4.request("GET", "/c4")
                    break
            except (h.IncompleteMessage, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.assertEqual(r4.status, 200)

    def test_idle_client_connection_is_closed_after_idle_timeout(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin, limits={"idle_timeout": "500ms"})
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/").status, 200)
            t0 = time.monotonic()
            self.assertTrue(c.closed_by_peer(5), "idle connection still open after 5 s")
            self.assertGreaterEqual(time.monotonic() - t0, 0.3)

    def test_keep_alive_connection_outlives_the_shorter_header_timeout(self):
        # A connection's one timer goes header -> attempt -> idle; re-arming
        # to a later deadline is lazy (the libuv timer fires at the earlier
        # one and re-arms). Idle past header_timeout must not close it, and
        # idle_timeout must still close it on time.
        origin = self.start_origin()
        proxy = self.proxy_for(origin, limits={"header_timeout": "400ms", "idle_timeout": "1500ms"})
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/first").status, 200)
            time.sleep(0.9)  # past the header timeout, inside the idle timeout
            self.assertEqual(c.request("GET", "/second").status, 200)
            t0 = time.monotonic()
            self.assertTrue(c.closed_by_peer(5), "idle connection still open after 5 s")
            waited = time.monotonic() - t0
            self.assertGreaterEqual(waited, 1.2, "closed %.2f s after the response, before idle_timeout" % waited)
            self.assertLess(waited, 3.0, "closed %.2f s after the response, long after idle_timeout" % waited)


class DrainTest(IntegrationTest):
    """SIGTERM: stop accepting, let in-flight requests finish, exit 0."""

    def test_sigterm_lets_an_in_flight_request_finish_then_exits_0(self):
        origin = self.start_origin(script=[h.delay(0.5, h.respond(200, body=b"finished"))])
        proxy = self.proxy_for(origin)
        port = proxy.port()
        c = h.Conn(port)
        self.addCleanup(c.close)
        c.send(h.build_request("GET", "/slow"))
        origin.wait_for(1)
        proxy.signal(15)  # SIGTERM
        time.sleep(0.1)
        refused = False
        try:
            with h.Conn(port, timeout=1) as late:
                late.send(h.build_request("GET", "/late"))
                late.read_response()
        except (OSError, h.IncompleteMessage):
            refused = True
        self.assertTrue(refused, "a new connection was served after SIGTERM")
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"finished"))
        t0 = time.monotonic()
        self.assertEqual(proxy.stop(timeout=5), 0)  # SIGTERM was sent already: just waits
        self.assertLess(time.monotonic() - t0, 1.5, "exit lagged the last response")
        self.assertEqual([a.target for a in origin.snapshot()], ["/slow"])

    def test_sigterm_with_a_request_outlasting_drain_timeout_exits_3(self):
        # In-flight requests finish, bounded by drain_timeout; whatever is still
        # open then is closed and the exit code says so: 3, not 0.
        origin = self.start_origin(default=h.hang())
        proxy = self.start_proxy(h.simple_config(origin.port, drain_timeout="500ms"), check_exit=False)
        c = h.Conn(proxy.port())
        self.addCleanup(c.close)
        c.send(h.build_request("GET", "/forever"))
        origin.wait_for(1)
        t0 = time.monotonic()
        code = proxy.stop(expect_code=None, timeout=5)
        elapsed = time.monotonic() - t0
        self.assertLess(elapsed, 2.0, "drain took %.2fs with drain_timeout 500ms" % elapsed)
        self.assertEqual(code, 3, "exit code after a drain that had to cut a request")
        self.assertIn("error=drain_timeout", proxy.stdout())

    def test_every_event_loop_closes_clean_after_traffic_reload_and_drain(self):
        # Each worker loop and the main loop end with uv_loop_close(); a handle
        # left open would be logged as "closed with open handles".
        origin = self.start_origin(default=h.respond(200, body=b"ok"))
        proxy = self.start_proxy(h.simple_config(origin.port, workers=2))
        for _ in range(3):
            with h.Conn(proxy.port()) as c:
                for _ in range(20):
                    self.assertEqual(c.request("GET", "/").status, 200)
        proxy.signal(signal.SIGHUP)
        time.sleep(0.3)
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/").status, 200)
        self.assertEqual(proxy.stop(timeout=5), 0)
        self.assertNotIn("open handles", proxy.stderr())
        self.assertIn("stopped", proxy.stderr())

    def test_sigterm_on_an_idle_proxy_exits_0_promptly(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/").status, 200)
            t0 = time.monotonic()
            self.assertEqual(proxy.stop(timeout=5), 0)
        self.assertLess(time.monotonic() - t0, 1.5, "an idle keep-alive connection delayed exit")


if __name__ == "__main__":
    unittest.main()
