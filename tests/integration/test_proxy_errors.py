"""Proxy-made error responses (docs/proxying.md): each case answers with its status and
its `x-onelayer-error` reason, and malformed or smuggling-shaped requests
never reach the upstream."""

import socket
import time
import unittest

import harness as h
from harness import IntegrationTest


def one_response(port, data, timeout=5.0, method="GET"):
    """Send raw bytes, return the single response the proxy gives (or fail)."""
    raw = h.raw_request(port, data, timeout=timeout, responses=1, methods=[method])
    resps = h.parse_responses(raw, methods=[method])
    if not resps:
        raise AssertionError("no response at all; got %r" % raw[:300])
    return resps[0]


class RequestErrorTest(IntegrationTest):
    def setUp(self):
        self.origin = self.start_origin()
        self.proxy = self.proxy_for(self.origin, limits={
            "max_header_bytes": "4KiB", "max_body_bytes": "1KiB", "header_timeout": "300ms"},
            route={"match": {"path_prefix": "/api"}})
        self.port = self.proxy.port()

    def test_no_matching_route_gives_404_no_route(self):
        r = one_response(self.port, h.build_request("GET", "/elsewhere"))
        self.assertProxyError(r, 404, "no_route")
        self.assertNoArrivals(self.origin)

    def test_no_route_keeps_the_connection_usable(self):
        with h.Conn(self.port) as c:
            self.assertProxyError(c.request("GET", "/nope"), 404, "no_route")
            self.assertEqual(c.request("GET", "/api/yes").status, 200)

    def test_malformed_request_line_gives_400_bad_request(self):
        r = one_response(self.port, b"THIS IS NOT HTTP\r\n\r\n")
        self.assertProxyError(r, 400, "bad_request")
        self.assertNoArrivals(self.origin)

    def test_malformed_header_line_gives_400_bad_request(self):
        r = one_response(self.port, b"GET /api HTTP/1.1\r\nHost: a\r\nNo colon here\r\n\r\n")
        self.assertProxyError(r, 400, "bad_request")
        self.assertNoArrivals(self.origin)

    def test_headers_over_max_header_bytes_give_431(self):
        req = h.build_request("GET", "/api/big", [("X-Big", "v" * 8000)])
        r = one_response(self.port, req)
        self.assertProxyError(r, 431, "headers_too_large")
        self.assertNoArrivals(self.origin)

    def test_many_small_headers_over_the_limit_give_431(self):
        req = h.build_request("GET", "/api/many", [("X-H%d" % i, "x" * 40) for i in range(200)])
        self.assertProxyError(one_response(self.port, req), 431, "headers_too_large")
        self.assertNoArrivals(self.origin)

    def test_headers_under_the_limit_pass(self):
        with h.Conn(self.port) as c:
            r = c.request("GET", "/api/ok", headers=[("X-Medium", "v" * 2000)])
        self.assertEqual(r.status, 200)
        self.assertEqual(self.origin.wait_for(1)[0].header("x-medium"), "v" * 2000)

    def test_content_length_over_max_body_bytes_gives_413(self):
        req = h.build_request("POST", "/api/upload", body=b"b" * 4096)
        r = one_response(self.port, req, method="POST")
        self.assertProxyError(r, 413, "body_too_large")
        self.assertNoArrivals(self.origin)

    def test_chunked_body_over_max_body_bytes_gives_413(self):
        req = h.build_request("POST", "/api/upload", body=b"c" * 4096, chunked=True,
                              chunk_size=512)
        r = one_response(self.port, req, method="POST")
        self.assertProxyError(r, 413, "body_too_large")

    def test_body_at_the_limit_passes(self):
        with h.Conn(self.port) as c:
            r = c.request("POST", "/api/upload", body=b"b" * 1024)
        self.assertEqual(r.status, 200)

    def test_slow_header_gives_408_header_timeout(self):
        with h.Conn(self.port) as c:
            t0 = time.monotonic()
            c.send(b"GET /api/slow HTTP/1.1\r\nHost: a\r\n")  # never finished
            self.assertTrue(c.wait_for_data(3), "no answer within 3 s to a 300 ms header timeout")
            r = c.read_response()
            elapsed = time.monotonic() - t0
        self.assertProxyError(r, 408, "header_timeout")
        self.assertGreaterEqual(elapsed, 0.25)
        self.assertNoArrivals(self.origin)


class SmugglingTest(IntegrationTest):
    """Ambiguous framing is rejected with 400 and nothing reaches the upstream."""

    def setUp(self):
        self.origin = self.start_origin()
        self.proxy = self.proxy_for(self.origin)
        self.port = self.proxy.port()

    def check_rejected(self, data):
        r = one_response(self.port, data, method="POST")
        self.assertProxyError(r, 400, "bad_request")
        self.assertNoArrivals(self.origin, settle=0.3)

    def test_content_length_and_transfer_encoding_together(self):
        self.check_rejected(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
                            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n"
                            b"Host: a\r\n\r\n")

    def test_transfer_encoding_before_content_length(self):
        self.check_rejected(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                            b"Content-Length: 40\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n"
                            b"Host: a\r\n\r\n")

    def test_two_different_content_lengths(self):
        self.check_rejected(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
                            b"Content-Length: 6\r\n\r\nhello!")

    def test_content_length_list_with_different_values(self):
        self.check_rejected(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\nhello!")

    def test_bad_chunk_size(self):
        self.check_rejected(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                            b"zz\r\nhello\r\n0\r\n\r\n")

    def test_negative_or_overflowing_chunk_size(self):
        self.check_rejected(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                            b"fffffffffffffffffff\r\nhello\r\n0\r\n\r\n")

    def test_bad_content_length_value(self):
        self.check_rejected(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5x\r\n\r\nhello")

    def test_transfer_encoding_not_ending_in_chunked(self):
        self.check_rejected(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n"
                            b"\r\n0\r\n\r\n")


class UpstreamErrorTest(IntegrationTest):
    def test_connection_refused_gives_502_connect_failure(self):
        port, sock = h.closed_port()
        self.addCleanup(sock.close)
        proxy = self.start_proxy(h.simple_config(port))
        with h.Conn(proxy.port()) as c:
            t0 = time.monotonic()
            r = c.request("GET", "/")
        self.assertProxyError(r, 502, "connect_failure")
        self.assertLess(time.monotonic() - t0, 2)

    def test_unparseable_upstream_response_gives_502_bad_upstream_response(self):
        origin = self.start_origin(script=[h.raw(b"HTTP/1.1 abc garbage\r\n\x00\x01\r\n\r\n")])
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/")
        self.assertProxyError(r, 502, "bad_upstream_response")
        self.assertEqual(origin.count(), 1)

    def test_body_that_keeps_progressing_outlives_idle_timeout(self):
        # The stall guard measures silence, not the whole transfer: every
        # chunk pushes it back. 8 pieces 150 ms apart take ~1.2 s, three
        # times idle_timeout, with no gap as long as it.
        body = bytes(range(256)) * 8
        origin = self.start_origin(script=[h.close_delimited(200, body=body, pieces=8, pause=0.15)])
        proxy = self.proxy_for(origin, limits={"idle_timeout": "400ms"})
        t0 = time.monotonic()
        with h.Conn(proxy.port(), timeout=5) as c:
            r = c.request("GET", "/trickle")
        self.assertGreaterEqual(time.monotonic() - t0, 0.8, "the body did not trickle")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, body)
        time.sleep(0.3)  # the access log is flushed every 200 ms
        self.assertNotIn("error=stream_stalled", proxy.stdout())

    def test_upstream_stalling_mid_body_is_cut_after_idle_timeout(self):
        # Head and part of the body, then silence: the client must not hang
        # forever; after the listener's idle_timeout the connection closes.
        origin = self.start_origin(script=[h.raw(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10, close=False)])
        proxy = self.proxy_for(origin, limits={"idle_timeout": "400ms"})
        c = h.Conn(proxy.port())
        self.addCleanup(c.close)
        t0 = time.monotonic()
        c.send(h.build_request("GET", "/stall"))
        got, closed = b"", False
        c.sock.settimeout(5.0)
        while not closed:
            try:
                data = c.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                data = b""
            except socket.timeout:
                break
            got += data
            closed = not data
        self.assertTrue(closed, "connection still open after a stalled body")
        self.assertTrue(got.startswith(b"HTTP/1.1 200"), got[:80])
        self.assertLess(len(got.split(b"\r\n\r\n", 1)[1]), 1000, "the truncated body looked complete")
        elapsed = time.monotonic() - t0
        self.assertGreaterEqual(elapsed, 0.35)
        self.assertLess(elapsed, 3.0)
        deadline = time.monotonic() + 2
        while "error=stream_stalled" not in proxy.stdout() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertIn("error=stream_stalled", proxy.stdout())

    def test_upstream_response_with_conflicting_framing_gives_502(self):
        origin = self.start_origin(script=[h.raw(
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd")])
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/")
        self.assertProxyError(r, 502, "bad_upstream_response")

    def test_upstream_closing_before_response_head_gives_502_upstream_reset(self):
        origin = self.start_origin(script=[h.close_without_response()])
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/")
        self.assertProxyError(r, 502, "upstream_reset")
        self.assertEqual(origin.count(), 1, "one attempt only: the route has no retry")

    def test_upstream_rst_before_response_head_gives_502_upstream_reset(self):
        origin = self.start_origin(script=[h.close_without_response(rst=True)])
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/")
        self.assertProxyError(r, 502, "upstream_reset")
        self.assertEqual(origin.count(), 1)

    def test_upstream_closing_mid_head_gives_502_upstream_reset(self):
        origin = self.start_origin(script=[h.raw(b"HTTP/1.1 200 OK\r\nContent-Le")])
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/")
        self.assertEqual(r.status, 502)
        self.assertIn(r.header("x-onelayer-error"), ("upstream_reset", "bad_upstream_response"))

    def test_error_response_keeps_client_connection_usable_or_announces_close(self):
        origin = self.start_origin(script=[h.close_without_response()])
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/1")
            self.assertEqual(r.status, 502)
            if r.wants_close():
                self.assertTrue(c.closed_by_peer(3), "announced close but stayed open")
                return
            self.assertEqual(c.request("GET", "/2").body, b"ok")


if __name__ == "__main__":
    unittest.main()
