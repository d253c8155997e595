"""HTTP/1.x as clients send it, through the real onelayer: HTTP/1.0
keep-alive (ab -k), OPTIONS * on a catch-all route, the Via switch, and
CONNECT refused with a hint that says what to configure instead."""

import unittest

import harness as h
from harness import IntegrationTest


def http10_get(target, keep_alive=True):
    extra = "Connection: keep-alive\r\n" if keep_alive else ""
    return ("GET %s HTTP/1.0\r\nHost: x\r\n%s\r\n" % (target, extra)).encode()


class Http10KeepAliveTest(IntegrationTest):
    def test_http10_keep_alive_client_gets_content_length_and_keeps_its_connection(self):
        origin = self.start_origin(handler=lambda a: h.respond(200, body=a.target.encode()))
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            for i in range(5):
                c.send(http10_get("/ka/%d" % i))
                r = c.read_response()
                self.assertEqual((r.status, r.body), (200, b"/ka/%d" % i))
                self.assertEqual(r.framing, "length", r)
                self.assertEqual(r.header_list("connection"), ["keep-alive"], r)
                self.assertFalse(r.wants_close(), r)
            self.assertFalse(c.closed_by_peer(0.3), "the proxy closed an HTTP/1.0 keep-alive connection")
        self.assertEqual(origin.count(), 5)

    def test_http10_keep_alive_with_a_chunked_origin_answer_is_close_delimited(self):
        # No length to give an HTTP/1.0 client: the body ends with the connection.
        origin = self.start_origin(script=[h.respond(200, body=b"x" * 3000, chunked=True, chunk_size=1000)])
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            c.send(http10_get("/chunked"))
            r = c.read_response()
            self.assertEqual((r.status, r.body, r.framing), (200, b"x" * 3000, "close"))
            self.assertIn("close", [t.lower() for t in r.header_list("connection")])

    def test_http10_keep_alive_errors_onelayer_makes_keep_the_connection_too(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin, route={"match": {"path_prefix": "/only"}})
        with h.Conn(proxy.port()) as c:
            c.send(http10_get("/elsewhere"))
            r = c.read_response()
            self.assertProxyError(r, 404, "no_route")
            self.assertEqual(r.header_list("connection"), ["keep-alive"], r)
            c.send(http10_get("/only/x"))
            self.assertEqual(c.read_response().status, 200)

    def test_http10_without_keep_alive_still_closes(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            c.send(http10_get("/once", keep_alive=False))
            r = c.read_response()
            self.assertEqual(r.status, 200)
            self.assertTrue(c.closed_by_peer(2), "HTTP/1.0 without keep-alive stayed open")


class OptionsStarTest(IntegrationTest):
    def test_options_star_is_forwarded_on_a_catch_all_route(self):
        origin = self.start_origin(handler=lambda a: h.respond(204, headers=[("Allow", "GET, OPTIONS")]))
        proxy = self.start_proxy(h.simple_config(origin.port, routes=[
            {"name": "items", "upstream": "origin", "match": {"path_prefix": "/items"}},
            {"name": "all", "upstream": "origin"}]))
        with h.Conn(proxy.port()) as c:
            r = c.request("OPTIONS", "*")
        self.assertEqual((r.status, r.header("allow")), (204, "GET, OPTIONS"))
        (a,) = origin.wait_for(1)
        self.assertEqual((a.method, a.target), ("OPTIONS", "*"))
        log = h.wait_until(lambda: [l for l in proxy.access_log() if "OPTIONS" in l])
        self.assertIn("route=all", log[0])

    def test_options_star_without_a_catch_all_route_is_no_route(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin, route={"match": {"path_prefix": "/items"}})
        with h.Conn(proxy.port()) as c:
            self.assertProxyError(c.request("OPTIONS", "*"), 404, "no_route")
        self.assertNoArrivals(origin)


class ViaSwitchTest(IntegrationTest):
    def via_seen(self, **overrides):
        origin = self.start_origin(handler=lambda a: h.respond(200, body=b"ok"))
        proxy = self.proxy_for(origin, **overrides)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/v", headers=[("Via", "1.1 edge")])
        (a,) = origin.wait_for(1)
        return a.header_list("via"), r.header_list("via")

    def test_via_is_added_both_ways_by_default(self):
        up, down = self.via_seen()
        self.assertEqual(up, ["1.1 edge", "1.1 onelayer"])
        self.assertEqual(down, ["1.1 onelayer"])

    def test_top_level_via_false_adds_none_and_keeps_the_clients(self):
        up, down = self.via_seen(via=False)
        self.assertEqual(up, ["1.1 edge"])
        self.assertEqual(down, [])

    def test_listener_via_overrides_the_top_level(self):
        up, down = self.via_seen(via=False, listener={"via": True})
        self.assertEqual(up, ["1.1 edge", "1.1 onelayer"])
        up, down = self.via_seen(listener={"via": False})
        self.assertEqual((up, down), (["1.1 edge"], []))


class ForwardedForSwitchTest(IntegrationTest):
    def forwarded_for_seen(self, **overrides):
        origin = self.start_origin(handler=lambda a: h.respond(200, body=b"ok"))
        proxy = self.proxy_for(origin, **overrides)
        with h.Conn(proxy.port()) as c:
            c.request("GET", "/plain")
            c.request("GET", "/relayed", headers=[("X-Forwarded-For", "203.0.113.9")])
        plain, relayed = origin.wait_for(2)
        return plain.header_list("x-forwarded-for"), relayed.header_list("x-forwarded-for")

    def test_the_clients_address_is_appended_by_default(self):
        self.assertEqual(self.forwarded_for_seen(), (["127.0.0.1"], ["203.0.113.9", "127.0.0.1"]))

    def test_top_level_off_appends_nothing_and_keeps_the_clients(self):
        self.assertEqual(self.forwarded_for_seen(x_forwarded_for=False), ([], ["203.0.113.9"]))

    def test_listener_overrides_the_top_level(self):
        self.assertEqual(self.forwarded_for_seen(x_forwarded_for=False, listener={"x_forwarded_for": True}),
                         (["127.0.0.1"], ["203.0.113.9", "127.0.0.1"]))
        self.assertEqual(self.forwarded_for_seen(listener={"x_forwarded_for": False}), ([], ["203.0.113.9"]))


class ConnectRefusedTest(IntegrationTest):
    def test_connect_is_refused_with_a_hint_to_configure_tls_on_the_upstream(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin)
        data = h.raw_request(proxy.port(), b"CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n")
        (r,) = h.parse_responses(data)
        self.assertProxyError(r, 400, "bad_request")
        self.assertIn(b"originates TLS to upstreams itself", r.body)
        self.assertIn(b"upstreams[].tls: {}", r.body)
        self.assertEqual(int(r.header("content-length")), len(r.body))
        self.assertNoArrivals(origin)
        self.assertIn("CONNECT is not supported: onelayer originates TLS itself", proxy.stderr())


if __name__ == "__main__":
    unittest.main()
