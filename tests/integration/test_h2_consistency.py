"""HTTP/2 held to the same rules as HTTP/1.1 (docs/http2.md, docs/security.md):
an h2c upstream's RST_STREAM NO_ERROR before its response is complete is a
reset, its :status outside 100-599 a broken response; the HTTP/2 front
refuses the methods, absolute :path values and header field counts the
HTTP/1.1 front refuses."""

import time
import unittest

import harness as h
from harness import IntegrationTest
import h2_origin
from h2_origin import H2Origin
import ops_helpers as ops
from test_h2_downstream import H2Client

NO_ERROR = 0


class H2UpstreamConsistencyTest(IntegrationTest):
    def h2origin(self, handler, **kw):
        o = H2Origin(handler, **kw)
        self.addCleanup(o.stop)
        self.addCleanup(lambda: self.assertEqual(o.errors, [], "the h2 origin failed"))
        return o

    def proxy_to(self, port, retry=None):
        return self.start_proxy(h.simple_config(port, upstream={"protocol": "h2c"}, retry=retry, workers=1))

    def test_rst_stream_no_error_before_the_head_is_a_reset_at_once_and_retried(self):
        # First request of each path: RST_STREAM NO_ERROR before any head.
        seen = set()

        def handler(r):
            if r.path in seen:
                r.respond(200, [], b"second")
            else:
                seen.add(r.path)
                r.reset(NO_ERROR)
        o = self.h2origin(handler)
        proxy = self.proxy_to(o.port, retry={"max_attempts": 2, "backoff": {"base": "1ms", "cap": "1ms"}})
        t0 = time.monotonic()
        r = h.Conn(proxy.port()).request("GET", "/retried", host="svc.test")
        self.assertEqual((r.status, r.body), (200, b"second"))
        self.assertLess(time.monotonic() - t0, 2.0, "the reset must end the attempt at once")
        # Without a retry block: the client hears of the reset at once.
        plain = self.start_proxy(h.simple_config(o.port, upstream={"protocol": "h2c"}, workers=1))
        t0 = time.monotonic()
        with h.Conn(plain.port()) as c:
            r = c.request("GET", "/plain", host="svc.test")
        self.assertEqual((r.status, r.header("x-onelayer-error")), (502, "upstream_reset"))
        self.assertLess(time.monotonic() - t0, 2.0, "the reset must end the attempt at once")

    def test_rst_stream_no_error_after_part_of_the_body_aborts_the_client_response_promptly(self):
        o = self.h2origin(lambda r: r.respond_then_reset(200, [("content-length", "100000")], b"p" * 1000,
                                                         code=NO_ERROR))
        proxy = self.proxy_to(o.port)
        t0 = time.monotonic()
        raw, closed = h.raw_exchange(proxy.port(), h.build_request("GET", "/cut", host="svc.test"), timeout=5.0)
        self.assertTrue(closed, "the client connection must end: the body cannot be completed")
        self.assertLess(time.monotonic() - t0, 2.0, "not held until idle_timeout")
        self.assertTrue(raw.startswith(b"HTTP/1.1 200"), raw[:100])
        self.assertEqual(raw[raw.index(b"\r\n\r\n") + 4:], b"p" * 1000)
        recs = ops.access_records(proxy, 1)
        self.assertEqual((recs[0]["status"], recs[0]["error"]), ("200", "upstream_reset"))

    def test_a_complete_response_then_rst_stream_no_error_stops_the_upload_and_succeeds(self):
        # RFC 9113 8.1: a server that answered in full may end the rest of
        # the request with RST_STREAM NO_ERROR.
        def handler(r):
            # Both frames in one write: the RST_STREAM arrives before
            # onelayer could end the stream itself.
            r.respond(200, [("content-length", "5")], b"early")
            r._conn.reset(r.stream_id, NO_ERROR)
        o = self.h2origin(handler, answers_at_head=True, reads_bodies=False)
        proxy = self.proxy_to(o.port)
        body = b"u" * (512 * 1024)  # far more than one window: the upload is under way
        with h.Conn(proxy.port(), timeout=10) as c:
            r = c.request("POST", "/upload", host="svc.test", body=body)
        self.assertEqual((r.status, r.body), (200, b"early"))
        self.assertIsNone(r.header("x-onelayer-error"))
        recs = ops.access_records(proxy, 1)
        self.assertEqual(recs[0]["status"], "200")
        self.assertIn(recs[0]["error"], ("", None, "-"))

    def test_a_status_from_600_up_is_a_bad_upstream_response(self):
        o = self.h2origin(lambda r: r.respond(int(r.path[1:]), [], b"x"))
        proxy = self.proxy_to(o.port)
        with h.Conn(proxy.port()) as c:
            for status in (600, 999):
                r = c.request("GET", "/%d" % status, host="svc.test")
                self.assertEqual((r.status, r.header("x-onelayer-error")), (502, "bad_upstream_response"))
            r = c.request("GET", "/599", host="svc.test")
            self.assertEqual(r.status, 599)


class H2FrontConsistencyTest(IntegrationTest):
    """The HTTP/2 front refuses what the HTTP/1.1 front refuses."""

    def setUp(self):
        self.origin = self.start_origin()
        self.proxy = self.start_proxy(h.simple_config(self.origin.port, workers=1))

    def client(self):
        c = H2Client(self.proxy.port())
        c.conn.config.validate_outbound_headers = False  # the point is to send what is wrong
        c.conn.config.normalize_outbound_headers = False
        self.addCleanup(c.close)
        return c

    def h2_send(self, fields):
        c = self.client()
        sid = c.conn.get_next_available_stream_id()
        c.conn.send_headers(sid, fields, end_stream=True)
        c.streams[sid] = {"headers": None, "data": bytearray(), "trailers": None, "ended": False, "reset": None}
        c.flush()
        self.assertTrue(c.pump(c.done(sid), timeout=5.0))
        return c, sid

    def http1_status(self, method):
        raw, _ = h.raw_exchange(self.proxy.port(), b"%s /m HTTP/1.1\r\nHost: a.test\r\n\r\n" % method, timeout=5.0)
        resp = h.parse_responses(raw)[0]
        return resp.status, resp.header("x-onelayer-error")

    def test_methods_the_http1_front_refuses_are_refused_on_http2(self):
        for method in ("get", "FROB"):
            want = self.http1_status(method.encode())
            self.assertEqual(want, (400, "bad_request"), method)
            c, sid = self.h2_send([(":method", method), (":scheme", "http"), (":authority", "a.test"),
                                   (":path", "/m")])
            self.assertEqual((c.status(sid), c.header(sid, "x-onelayer-error")), want, method)
        # A method HTTP/1.1 knows still goes through.
        c, sid = self.h2_send([(":method", "PATCH"), (":scheme", "http"), (":authority", "a.test"),
                               (":path", "/m")])
        self.assertEqual(c.status(sid), 200)
        self.assertEqual([a.method for a in self.origin.snapshot()], ["PATCH"])

    def test_an_absolute_path_with_a_foreign_scheme_is_refused_not_routed_by_it(self):
        c, sid = self.h2_send([(":method", "GET"), (":scheme", "foo"), (":authority", "a.test"),
                               (":path", "http://admin.test/x")])
        self.assertEqual((c.status(sid), c.header(sid, "x-onelayer-error")), (400, "bad_request"))
        # With :scheme http the message is malformed (RFC 9113 8.3.1): the
        # stream is reset PROTOCOL_ERROR, as before.
        c, sid = self.h2_send([(":method", "GET"), (":scheme", "http"), (":authority", "a.test"),
                               (":path", "http://admin.test/x")])
        self.assertEqual(c.streams[sid]["reset"], h2_origin.PROTOCOL_ERROR)
        self.assertEqual(self.origin.snapshot(), [])
        # A foreign scheme with a path in origin form goes to :authority's route.
        c, sid = self.h2_send([(":method", "GET"), (":scheme", "foo"), (":authority", "a.test"), (":path", "/x")])
        self.assertEqual(c.status(sid), 200)
        self.assertEqual([a.header("host") for a in self.origin.snapshot()], ["a.test"])

    def test_the_header_field_limit_is_the_http1_fronts(self):
        many = [("x-f%d" % i, "v") for i in range(700)]
        raw, _ = h.raw_exchange(self.proxy.port(), h.build_request("GET", "/m", host="a.test", headers=many),
                                timeout=5.0)
        want = h.parse_responses(raw)[0]
        self.assertEqual((want.status, want.header("x-onelayer-error")), (431, "headers_too_large"))
        c, sid = self.h2_send([(":method", "GET"), (":scheme", "http"), (":authority", "a.test"),
                               (":path", "/m")] + many)
        self.assertEqual((c.status(sid), c.header(sid, "x-onelayer-error")), (431, "headers_too_large"))
        # 127 fields and Host are 128: within the limit on both fronts.
        c, sid = self.h2_send([(":method", "GET"), (":scheme", "http"), (":authority", "a.test"),
                               (":path", "/m")] + many[:127])
        self.assertEqual(c.status(sid), 200)
        raw, _ = h.raw_exchange(self.proxy.port(), h.build_request("GET", "/m", host="a.test", headers=many[:127]),
                                timeout=5.0)
        self.assertEqual(h.parse_responses(raw)[0].status, 200)
        self.assertEqual(len(self.origin.snapshot()), 2)


if __name__ == "__main__":
    unittest.main()
