"""What HTTP/2 translation carries besides heads and bodies, through the real
onelayer with real peers: trailers both ways between HTTP/1.1 and HTTP/2
(and their replay on a retry), the interim 100 for an HTTP/2 client that
expects one, the codec's own 431 counted and logged, Via naming the
protocol version, and upstream connections counted by protocol."""

import time

import harness as h
import ops_helpers as ops
from h2_origin import H2Origin
from harness import IntegrationTest
from test_h2_downstream import FAST_RETRY, H2Client

import h2.events  # noqa: E402  (test_h2_downstream has put python3-h2 on the path)

TRAILERS = [("x-checksum", "sha256:abc"), ("x-rows", "3")]
# What must never travel as a trailer (framing, hop-by-hop, routing).
FORBIDDEN = [("content-length", "99"), ("trailer", "x-other"), ("host", "evil.example")]
# An HTTP/2 client can send them all: onelayer drops a content-length
# among trailers like the rest (it frames nothing there).
FORBIDDEN_H2 = FORBIDDEN
# A body over buffer_limit streams upstream as it comes: its end (and the
# trailers) follow the head instead of going with it.
SMALL_BUFFER = {"buffer_limit": "1KiB"}
BIG = b"z" * 5000


def h2_request_with_trailers(c, method, path, body, trailers, headers=()):
    """HEADERS without END_STREAM, DATA, then a trailing HEADERS that ends
    the stream (no content-length: the length is unknown)."""
    sid = c.conn.get_next_available_stream_id()
    c.conn.send_headers(sid, [(":method", method), (":scheme", "http"), (":authority", "test.local"),
                              (":path", path)] + list(headers))
    c.streams[sid] = {"headers": None, "data": bytearray(), "trailers": None, "ended": False, "reset": None}
    c.conn.send_data(sid, body)
    c.conn.send_headers(sid, list(trailers), end_stream=True)
    c.flush()
    return sid


class TrailersTest(IntegrationTest):
    def client(self, proxy):
        c = H2Client(proxy.port())
        self.addCleanup(c.close)
        return c

    def h2c_origin(self, handler=None):
        up = H2Origin(handler)
        self.addCleanup(up.stop)
        return up

    # -- response trailers from an HTTP/1.1 origin --------------------------

    def test_chunked_response_trailers_from_an_http1_origin_reach_an_http2_client(self):
        origin = self.start_origin(default=h.respond(200, body=b"three rows", chunked=True,
                                                     trailers=TRAILERS + FORBIDDEN))
        proxy = self.proxy_for(origin)
        c = self.client(proxy)
        sid = c.request("GET", "/report")
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual(c.status(sid), 200)
        self.assertEqual(bytes(c.streams[sid]["data"]), b"three rows")
        self.assertEqual(c.streams[sid]["trailers"], TRAILERS)

    def test_chunked_response_trailers_from_an_http1_origin_reach_an_http1_client_in_the_last_chunk(self):
        origin = self.start_origin(default=h.respond(200, body=b"three rows", chunked=True,
                                                     trailers=TRAILERS + FORBIDDEN))
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            resp = c.request("GET", "/report")
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.header("transfer-encoding"), "chunked")
            self.assertEqual(resp.body, b"three rows")
            self.assertEqual([(k.lower(), v) for k, v in resp.trailers], TRAILERS)
            # The connection is still in step: the next request is answered.
            self.assertEqual(c.request("GET", "/again").status, 200)

    # -- request trailers from an HTTP/2 client ------------------------------

    def test_request_trailers_from_an_http2_client_reach_an_h2c_origin(self):
        up = self.h2c_origin()
        proxy = self.proxy_for(up, upstream={"protocol": "h2c"}, retry=SMALL_BUFFER)
        c = self.client(proxy)
        small = h2_request_with_trailers(c, "POST", "/small", b"payload", TRAILERS + FORBIDDEN_H2)
        big = h2_request_with_trailers(c, "POST", "/big", BIG, TRAILERS)
        self.assertTrue(c.pump(c.done(small, big)))
        self.assertEqual((c.status(small), c.status(big)), (200, 200))
        by_path = {r.path: r for r in up.snapshot()}
        self.assertEqual((by_path["/small"].body, by_path["/big"].body), (b"payload", BIG))
        self.assertEqual(by_path["/small"].trailers, TRAILERS)
        self.assertEqual(by_path["/big"].trailers, TRAILERS)

    def test_request_trailers_from_an_http2_client_reach_an_http1_origin_in_the_last_chunk(self):
        origin = self.start_origin(default=h.echo())
        proxy = self.proxy_for(origin, retry=SMALL_BUFFER)
        c = self.client(proxy)
        small = h2_request_with_trailers(c, "POST", "/small", b"payload", TRAILERS + FORBIDDEN_H2)
        big = h2_request_with_trailers(c, "POST", "/big", BIG, TRAILERS)
        self.assertTrue(c.pump(c.done(small, big)))
        self.assertEqual((c.status(small), c.status(big)), (200, 200))
        by_target = {a.target: a for a in origin.wait_for(2)}
        for target, body in (("/small", b"payload"), ("/big", BIG)):
            a = by_target[target]
            self.assertEqual(a.header("transfer-encoding"), "chunked")
            self.assertEqual(a.body, body)
            self.assertEqual([(k.lower(), v) for k, v in a.trailers], TRAILERS, target)

    def test_chunked_request_trailers_from_an_http1_client_reach_an_h2c_origin(self):
        up = self.h2c_origin()
        proxy = self.proxy_for(up, upstream={"protocol": "h2c"}, retry=SMALL_BUFFER)
        with h.Conn(proxy.port()) as c:
            for target, body in (("/small", b"payload"), ("/big", BIG)):
                resp = c.request("POST", target, body=body, chunked=True, chunk_size=1000,
                                 trailers=[("X-Checksum", "sha256:abc"), ("X-Rows", "3")] + FORBIDDEN)
                self.assertEqual(resp.status, 200)
        by_path = {r.path: r for r in up.snapshot()}
        self.assertEqual((by_path["/small"].body, by_path["/big"].body), (b"payload", BIG))
        self.assertEqual(by_path["/small"].trailers, TRAILERS)
        self.assertEqual(by_path["/big"].trailers, TRAILERS)

    def test_request_trailers_over_max_header_bytes_are_431_and_go_nowhere(self):
        origin = self.start_origin(default=h.echo())
        proxy = self.proxy_for(origin, limits={"max_header_bytes": "4KiB"})
        with h.Conn(proxy.port()) as c:
            r = c.request("POST", "/t", body=b"abc", chunked=True, trailers=[("X-Big", "a" * 6000)])
        self.assertProxyError(r, 431, "headers_too_large")
        self.assertNoArrivals(origin)

    def test_a_retried_request_carries_its_trailers_on_every_attempt(self):
        origin = self.start_origin(script=[h.respond(503), h.echo()])
        proxy = self.proxy_for(origin, retry=FAST_RETRY)
        c = self.client(proxy)
        sid = h2_request_with_trailers(c, "PUT", "/doc", b"version two", TRAILERS)
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual(c.status(sid), 200)
        first, second = origin.wait_for(2)
        self.assertEqual((first.header("x-retry-attempt"), second.header("x-retry-attempt")), ("1", "2"))
        for a in (first, second):
            self.assertEqual(a.body, b"version two")
            self.assertEqual([(k.lower(), v) for k, v in a.trailers], TRAILERS)

    def test_a_retried_request_to_an_h2c_origin_carries_its_trailers_on_every_attempt(self):
        seen = []

        def handler(r):
            seen.append(r)
            r.respond(503 if len(seen) == 1 else 200, [("content-type", "text/plain")], b"done")
        up = self.h2c_origin(handler)
        proxy = self.proxy_for(up, upstream={"protocol": "h2c"}, retry=FAST_RETRY)
        c = self.client(proxy)
        sid = h2_request_with_trailers(c, "PUT", "/doc", b"version two", TRAILERS)
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual(c.status(sid), 200)
        self.assertEqual(len(seen), 2)
        for r in seen:
            self.assertEqual((r.body, r.trailers), (b"version two", TRAILERS))



class InterimH2Client(H2Client):
    """Records the interim (1xx) response heads of each stream, in order."""

    def __init__(self, port):
        super().__init__(port)
        self.interim = {}

    def handle(self, ev):
        if isinstance(ev, h2.events.InformationalResponseReceived):
            self.interim.setdefault(ev.stream_id, []).append(dict(ev.headers)[":status"])
            return
        super().handle(ev)


class ExpectContinueTest(IntegrationTest):
    def start(self, origin_action):
        origin = self.start_origin(default=origin_action)
        proxy = self.proxy_for(origin)
        c = InterimH2Client(proxy.port())
        self.addCleanup(c.close)
        return origin, proxy, c

    def open_stream(self, c, headers):
        sid = c.conn.get_next_available_stream_id()
        c.conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":authority", "test.local"),
                                  (":path", "/upload"), ("content-length", "4")] + headers)
        c.streams[sid] = {"headers": None, "data": bytearray(), "trailers": None, "ended": False, "reset": None}
        c.flush()
        return sid

    def test_an_http2_client_that_expects_100_continue_gets_it_then_sends_its_body(self):
        origin, _, c = self.start(h.echo())
        sid = self.open_stream(c, [("expect", "100-continue")])
        self.assertTrue(c.pump(lambda: sid in c.interim, timeout=3), "no interim 100 within 3 s")
        self.assertEqual(c.interim[sid], ["100"])
        self.assertIsNone(c.streams[sid]["headers"], "the final head came before the body was sent")
        c.conn.send_data(sid, b"body", end_stream=True)
        c.flush()
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual((c.status(sid), bytes(c.streams[sid]["data"])), (200, b"body"))
        (a,) = origin.wait_for(1)
        self.assertEqual(a.body, b"body")
        self.assertIsNone(a.header("expect"), "the 100 was onelayer's: Expect goes no further")

    def test_without_expect_no_interim_head_is_sent(self):
        _, _, c = self.start(h.echo())
        sid = self.open_stream(c, [])
        c.conn.send_data(sid, b"body", end_stream=True)
        c.flush()
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual(c.status(sid), 200)
        self.assertNotIn(sid, c.interim)


class OversizedHeadTest(IntegrationTest):
    def test_the_431_for_an_oversized_header_list_is_counted_and_logged(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin, limits={"max_header_bytes": "4KiB"})
        c = H2Client(proxy.port())
        self.addCleanup(c.close)
        sid = c.request("GET", "/big", headers=[("x-big", "a" * 6000)])
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual(c.status(sid), 431)
        self.assertEqual(c.header(sid, "x-onelayer-error"), "headers_too_large")
        # Counted just after the answer left: wait for it.
        self.assertTrue(h.wait_until(lambda: ops.value(ops.metrics(self, proxy), "onelayer_requests_total",
                                                       code="431", protocol="h2") == 1, 3))
        (rec,) = ops.access_records(proxy, 1, lambda rec: rec.get("status") == "431")
        self.assertEqual((rec["path"], rec["method"], rec["error"], rec["protocol"]),
                         ("/big", "GET", "headers_too_large", "h2"))
        self.assertEqual(rec["stream"], str(sid))
        self.assertNoArrivals(origin)


class ViaVersionTest(IntegrationTest):
    def test_via_names_the_version_each_message_arrived_with(self):
        origin = self.start_origin(default=h.respond(200, body=b"ok"))
        proxy = self.proxy_for(origin)
        c = H2Client(proxy.port())
        self.addCleanup(c.close)
        sid = c.request("GET", "/from-h2", headers=[("via", "1.1 edge")])
        self.assertTrue(c.pump(c.done(sid)))
        (a,) = origin.wait_for(1)
        self.assertEqual(a.header_list("via"), ["1.1 edge", "2 onelayer"])
        self.assertEqual(c.header(sid, "via"), "1.1 onelayer")  # the origin answered in HTTP/1.1

        up = H2Origin(lambda r: r.respond(200, [("content-type", "text/plain")], b"ok"))
        self.addCleanup(up.stop)
        proxy2 = self.proxy_for(up, upstream={"protocol": "h2c"})
        c2 = H2Client(proxy2.port())
        self.addCleanup(c2.close)
        sid = c2.request("GET", "/h2-both")
        self.assertTrue(c2.pump(c2.done(sid)))
        self.assertEqual(c2.header(sid, "via"), "2 onelayer")
        with h.Conn(proxy2.port()) as c1:
            r = c1.request("GET", "/h1-to-h2")
        self.assertEqual(r.header_list("via"), ["2 onelayer"])
        by_path = {q.path: q for q in up.snapshot()}
        self.assertEqual(by_path["/h2-both"].field("via"), "2 onelayer")
        self.assertEqual(by_path["/h1-to-h2"].field("via"), "1.1 onelayer")


class ForwardedForOverHttp2Test(IntegrationTest):
    def test_x_forwarded_for_switch_holds_for_h2_clients_and_h2_upstreams(self):
        up = H2Origin(lambda r: r.respond(200, [("content-type", "text/plain")], b"ok"))
        self.addCleanup(up.stop)
        on = self.proxy_for(up, upstream={"protocol": "h2c"})
        off = self.proxy_for(up, upstream={"protocol": "h2c"}, listener={"x_forwarded_for": False})
        for proxy, tag in ((on, "on"), (off, "off")):
            c = H2Client(proxy.port())
            self.addCleanup(c.close)
            sid = c.request("GET", "/h2-" + tag, headers=[("x-forwarded-for", "203.0.113.9")])
            self.assertTrue(c.pump(c.done(sid)))
            with h.Conn(proxy.port()) as c1:
                c1.request("GET", "/h1-" + tag)
        by_path = {q.path: q for q in up.snapshot()}
        self.assertEqual(by_path["/h2-on"].field("x-forwarded-for"), "203.0.113.9, 127.0.0.1")
        self.assertEqual(by_path["/h1-on"].field("x-forwarded-for"), "127.0.0.1")
        self.assertEqual(by_path["/h2-off"].field("x-forwarded-for"), "203.0.113.9")
        self.assertIsNone(by_path["/h1-off"].field("x-forwarded-for"))


class UpstreamConnectionsByProtocolTest(IntegrationTest):
    def test_an_h2c_upstream_connection_is_counted_under_protocol_h2(self):
        up = H2Origin()
        self.addCleanup(up.stop)
        proxy = self.proxy_for(up, upstream={"protocol": "h2c"})
        origin = self.start_origin()
        proxy1 = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/one").status, 200)
            self.assertEqual(c.request("GET", "/two").status, 200)
        with h.Conn(proxy1.port()) as c:
            self.assertEqual(c.request("GET", "/plain").status, 200)
        text = ops.metrics(self, proxy)
        self.assertEqual(ops.value(text, "onelayer_upstream_connections_active", protocol="h2"), 1)
        self.assertEqual(ops.value(text, "onelayer_upstream_connections_total", protocol="h2"), 1)
        self.assertEqual(ops.value(text, "onelayer_upstream_connections_active", protocol="http1"), 0)
        self.assertEqual(ops.value(text, "onelayer_upstream_connections_total", protocol="http1"), 0)
        text1 = ops.metrics(self, proxy1)
        self.assertEqual(ops.value(text1, "onelayer_upstream_connections_total", protocol="http1"), 1)
        self.assertEqual(ops.value(text1, "onelayer_upstream_connections_total", protocol="h2"), 0)
