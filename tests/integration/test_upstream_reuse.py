"""`upstreams[].reuse` (docs/security.md, docs/configuration.md): an upstream
that writes a second response after a complete one. With `safe` (the
default) an idle HTTP/1.1 upstream connection carries only later requests
of the client connection it served, so the stray response reaches no other
client; with `always` the next request on that connection, another
client's, takes it as its answer."""

import threading
import unittest

import harness as h
from harness import IntegrationTest
import ops_helpers as ops


class StrayAfter(h.Action):
    """A complete response, then, once the next request on this connection
    has arrived (or after a bound), a second response nobody asked for."""

    def __init__(self, next_request):
        self.next_request = next_request

    def run(self, ctx):
        ctx.send(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
        self.next_request.wait(1.0)
        ctx.send(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\npoisoned")
        return True


class UpstreamReuseTest(IntegrationTest):
    def run_two_clients(self, reuse):
        """Client A's request gets the stray-writing answer; then client B,
        on a connection of its own, asks for /clean. Returns B's body."""
        arrived = threading.Event()

        def handler(arrival):
            if arrival.target == "/stray":
                return StrayAfter(arrived)
            arrived.set()
            return h.respond(200, body=b"clean")
        origin = self.start_origin(handler=handler)
        upstream = {"reuse": reuse} if reuse else None
        proxy = self.start_proxy(h.simple_config(origin.port, upstream=upstream, workers=1))
        with h.Conn(proxy.port()) as a:
            r = a.request("GET", "/stray")
            self.assertEqual((r.status, r.body), (200, b"first"))
            with h.Conn(proxy.port()) as b:
                r = b.request("GET", "/clean")
        return r.body, origin

    def test_safe_by_default_keeps_a_stray_response_from_another_client(self):
        body, origin = self.run_two_clients(None)
        self.assertEqual(body, b"clean")
        conns = [a.conn_id for a in origin.snapshot()]
        self.assertEqual(len(set(conns)), 2, "client B must not get client A's upstream connection")

    def test_safe_written_out_keeps_a_stray_response_from_another_client(self):
        body, _ = self.run_two_clients("safe")
        self.assertEqual(body, b"clean")

    def test_always_hands_the_stray_response_to_the_next_client(self):
        # What `safe` prevents: the pooled connection goes to client B, whose
        # request is answered by the bytes client A's request caused.
        body, origin = self.run_two_clients("always")
        self.assertEqual(body, b"poisoned")
        conns = [a.conn_id for a in origin.snapshot()]
        self.assertEqual(len(set(conns)), 1)

    def test_safe_reuses_a_connection_for_the_same_client(self):
        origin = self.start_origin()
        proxy = self.start_proxy(h.simple_config(origin.port, workers=1))
        with h.Conn(proxy.port()) as c:
            for _ in range(5):
                self.assertEqual(c.request("GET", "/again").status, 200)
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/other-client").status, 200)
        self.assertEqual(origin.connections_accepted, 2)

    def test_get_config_shows_reuse(self):
        origin = self.start_origin()
        proxy = self.start_proxy(h.simple_config(origin.port, upstream={"reuse": "always"}))
        r = ops.admin(proxy, "GET", "/config")
        self.assertEqual(r.status, 200)
        self.assertIn(b"reuse: always", r.body)


if __name__ == "__main__":
    unittest.main()
