"""Round trips through the real onelayer: methods, bodies, framing, headers
(docs/proxying.md). Every route here has no retry block: one attempt per request."""

import json
import unittest

import harness as h
from harness import IntegrationTest


HOP_BY_HOP = ["connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade",
              "transfer-encoding"]


class RoundTripTest(IntegrationTest):
    def test_dns_name_endpoint_is_resolved_and_reused(self):
        # "localhost:<port>" goes through uv_getaddrinfo; later requests reuse
        # the cached answer and the pooled connection. Debian's /etc/hosts
        # answers ::1 and 127.0.0.1 for localhost; the origin listens on
        # 127.0.0.1 only and [::1]:<port> refuses (bound, not listening).
        origin = self.start_origin_with_refuser("127.0.0.1", "::1", default=h.respond(200, body=b"named"))
        proxy = self.start_proxy(h.simple_config(endpoints=["localhost:%d" % origin.port]),
                                 hosts=h.DEBIAN_HOSTS)
        with h.Conn(proxy.port()) as c:
            for _ in range(5):
                r = c.request("GET", "/dns")
                self.assertEqual((r.status, r.body), (200, b"named"))
        self.assertEqual(origin.count(), 5)
        self.assertEqual(origin.connections_accepted, 1)

    def test_a_dual_stack_name_falls_back_to_ipv6_within_the_attempt(self):
        # The reverse: a server on ::1 only, 127.0.0.1 refusing. No retry
        # block: each request has one attempt, whose connect to 127.0.0.1
        # fails and goes on to ::1 (no 502, however the balancer picks).
        origin = self.start_origin_with_refuser("::1", "127.0.0.1", default=h.respond(200, body=b"v6"))
        proxy = self.start_proxy(h.simple_config(endpoints=["dual.test:%d" % origin.port]),
                                 hosts="127.0.0.1 dual.test\n::1 dual.test\n")
        for _ in range(4):
            with h.Conn(proxy.port()) as c:
                r = c.request("GET", "/v6")
                self.assertEqual((r.status, r.body), (200, b"v6"))
        self.assertEqual(origin.count(), 4)

    def setUp(self):
        self.origin = self.start_origin()
        self.proxy = self.proxy_for(self.origin)
        self.port = self.proxy.port("main")

    def test_get_round_trip_keeps_headers_intact_in_both_directions(self):
        self.origin.push(h.respond(200, [("X-Resp-One", "a b  c"), ("Set-Cookie", "a=1; Path=/"),
                                         ("Set-Cookie", "b=2"), ("X-Empty", "")], b"hello world"))
        with h.Conn(self.port) as c:
            r = c.request("GET", "/some/path?x=1&y=%20z",
                          headers=[("X-Custom", "Value With  Spaces"), ("X-Multi", "one"),
                                   ("Accept", "*/*"), ("X-Multi", "two"), ("x-lower", "v")])
        self.assertEqual((r.status, r.body), (200, b"hello world"))
        self.assertEqual(r.header("x-resp-one"), "a b  c")
        self.assertEqual(r.header_all("set-cookie"), ["a=1; Path=/", "b=2"])
        self.assertEqual(r.header("x-empty"), "")
        a = self.origin.wait_for(1)[0]
        self.assertEqual((a.method, a.target, a.version), ("GET", "/some/path?x=1&y=%20z", "HTTP/1.1"))
        self.assertEqual(a.header("x-custom"), "Value With  Spaces")
        self.assertEqual(a.header_all("x-multi"), ["one", "two"], "repeated fields keep their order")
        self.assertEqual(a.header("x-lower"), "v")
        self.assertEqual(a.header("accept"), "*/*")
        self.assertEqual(a.body_len, 0)

    def test_post_body_arrives_intact_and_response_body_comes_back(self):
        body = bytes(range(256)) * 1000 + b"tail"
        self.origin.push(h.echo(201))
        with h.Conn(self.port) as c:
            r = c.request("POST", "/submit", headers=[("Content-Type", "application/octet-stream")],
                          body=body)
        self.assertEqual(r.status, 201)
        self.assertEqual(r.body, body)
        a = self.origin.wait_for(1)[0]
        self.assertEqual((a.method, a.body_len), ("POST", len(body)))
        self.assertEqual(a.body, body)
        self.assertEqual(a.header("content-type"), "application/octet-stream")

    def test_post_with_empty_body_and_put_round_trip(self):
        with h.Conn(self.port) as c:
            self.assertEqual(c.request("POST", "/empty", body=b"").status, 200)
            self.assertEqual(c.request("PUT", "/put", body=b"abc").status, 200)
        a, b = self.origin.wait_for(2)
        self.assertEqual((a.method, a.body), ("POST", b""))
        self.assertEqual((b.method, b.body), ("PUT", b"abc"))

    def test_head_response_has_no_body_and_connection_stays_usable(self):
        self.origin.push(h.respond(200, [("X-H", "1")], b"0123456789"))
        with h.Conn(self.port) as c:
            r = c.request("HEAD", "/thing")
            self.assertEqual((r.status, r.body, r.header("x-h")), (200, b"", "1"))
            self.assertEqual(r.header("content-length"), "10",
                             "HEAD keeps the Content-Length the GET would have")
            self.assertFalse(c.wait_for_data(0.3), "bytes after a HEAD response")
            self.assertEqual(c.request("GET", "/after").body, b"ok")
        self.assertEqual([a.method for a in self.origin.wait_for(2)], ["HEAD", "GET"])

    def check_bodiless(self, action, method="GET", headers=None):
        """The response to `action` has no body and the connection stays usable."""
        self.origin.push(action)
        with h.Conn(self.port, timeout=3) as c:
            r = c.request(method, "/x", headers=headers)
            self.assertFalse(c.wait_for_data(0.3), "bytes after a bodiless response")
            last = c.request("GET", "/after")
        self.assertEqual(r.body, b"")
        self.assertEqual(last.body, b"ok")
        return r

    def test_204_has_no_body_and_connection_stays_usable(self):
        r = self.check_bodiless(h.respond(204, [("X-A", "1")]), method="DELETE")
        self.assertEqual((r.status, r.header("x-a")), (204, "1"))
        self.assertIsNone(r.header("transfer-encoding"), "RFC 9112 6.1: no TE in a 204")

    def test_304_has_no_body_and_connection_stays_usable(self):
        r = self.check_bodiless(h.respond(304, [("ETag", '"v1"')]),
                                headers=[("If-None-Match", '"v1"')])
        self.assertEqual((r.status, r.header("etag")), (304, '"v1"'))

    def test_304_with_content_length_of_the_representation_has_no_body(self):
        # RFC 9110 8.6: a 304 may carry the Content-Length the 200 would have had.
        r = self.check_bodiless(h.respond(304, [("ETag", '"v1"'), ("Content-Length", "10")]),
                                headers=[("If-None-Match", '"v1"')])
        self.assertEqual(r.status, 304)

    def test_head_with_chunked_response_head_has_no_body(self):
        r = self.check_bodiless(h.respond(200, body=b"abc", chunked=True), method="HEAD")
        self.assertEqual(r.status, 200)

    def test_chunked_request_arrives_dechunked_and_correctly_reframed(self):
        body = b"".join(b"%05d-" % i for i in range(3000))
        self.origin.push(h.echo())
        with h.Conn(self.port) as c:
            c.send(h.build_request("POST", "/chunked", [("Transfer-Encoding", "chunked")]))
            # Odd chunk sizes, an upper-case hex size and a chunk extension.
            c.send(b"A;ext=1\r\n" + body[:10] + b"\r\n")
            rest = body[10:]
            c.send(h.encode_chunked(rest, 777)[:-5])  # all chunks, without "0\r\n\r\n"
            c.send(b"0\r\n\r\n")
            r = c.read_response("POST")
        self.assertEqual((r.status, r.body), (200, body))
        a = self.origin.wait_for(1)[0]
        self.assertTrue(a.body_complete)
        self.assertEqual(a.body, body)
        self.assertIn(a.framing, ("chunked", "length"))
        if a.framing == "length":
            self.assertEqual(a.header("content-length"), str(len(body)))

    def test_chunked_request_with_trailer_is_forwarded_without_breaking_framing(self):
        with h.Conn(self.port) as c:
            r = c.request("POST", "/t", body=b"abcdef", chunked=True, chunk_size=2,
                          trailers=[("X-Checksum", "123")])
            self.assertEqual(r.status, 200)
            self.assertEqual(c.request("GET", "/after").status, 200)
        a = self.origin.wait_for(2)[0]
        self.assertEqual(a.body, b"abcdef")

    def test_chunked_response_goes_out_chunked_with_body_intact(self):
        body = b"".join(b"line %d\n" % i for i in range(5000))
        self.origin.push(h.respond(200, [("X-R", "1")], body, chunked=True, chunk_size=1000))
        with h.Conn(self.port) as c:
            r = c.request("GET", "/stream")
            self.assertEqual((r.status, r.body), (200, body))
            self.assertEqual(r.framing, "chunked")
            self.assertEqual(c.request("GET", "/after").body, b"ok")

    def test_close_delimited_upstream_response_reaches_client_complete(self):
        body = b"close-delimited body " * 500
        self.origin.push(h.close_delimited(200, [("X-Kind", "eof")], body, pieces=5, pause=0.02))
        data = h.raw_request(self.port, h.build_request("GET", "/eof"), timeout=5, responses=1)
        resps = h.parse_responses(data)
        self.assertEqual(len(resps), 1)
        r = resps[0]
        self.assertEqual((r.status, r.body, r.header("x-kind")), (200, body, "eof"))

    def test_close_delimited_response_then_next_request_on_same_client_connection(self):
        self.origin.push(h.close_delimited(200, body=b"first"))
        with h.Conn(self.port) as c:
            r = c.request("GET", "/one")
            self.assertEqual(r.body, b"first")
            if r.framing == "close" or r.wants_close():
                self.assertTrue(c.closed_by_peer(3))
                return
            self.assertEqual(c.request("GET", "/two").body, b"ok")

    def test_expect_100_continue_gets_interim_and_body_arrives(self):
        self.origin.push(h.echo())
        with h.Conn(self.port) as c:
            c.send(h.build_request("POST", "/upload", [("Expect", "100-continue"),
                                                       ("Content-Length", "11")]))
            self.assertTrue(c.wait_for_data(3), "no 100 Continue within 3 s")
            interim = c.read_response("POST", include_interim=True)
            self.assertEqual(interim.status, 100)
            c.send(b"hello world")
            r = c.read_response("POST")
        self.assertEqual((r.status, r.body), (200, b"hello world"))
        a = self.origin.wait_for(1)[0]
        self.assertEqual(a.body, b"hello world")
        self.assertIsNone(a.header("expect"), "onelayer answered the 100 itself: Expect is not forwarded")

    def test_interim_1xx_from_upstream_does_not_break_the_exchange(self):
        self.origin.push(h.raw(b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
                               b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal", close=False))
        with h.Conn(self.port) as c:
            r = c.request("GET", "/hints")
            self.assertEqual((r.status, r.body), (200, b"final"))
            self.assertEqual(c.request("GET", "/after").body, b"ok")

    def test_hop_by_hop_request_headers_are_not_forwarded(self):
        with h.Conn(self.port) as c:
            r = c.request("GET", "/hop", headers=[
                ("Connection", "keep-alive, X-Conn-Listed"), ("X-Conn-Listed", "secret"),
                ("Keep-Alive", "timeout=5, max=100"), ("TE", "trailers"),
                ("Trailer", "X-Foo"), ("Upgrade", "h2c"), ("Proxy-Connection", "keep-alive"),
                ("X-Kept", "yes")])
        self.assertEqual(r.status, 200)
        a = self.origin.wait_for(1)[0]
        names = a.header_names()
        for name in ["x-conn-listed", "keep-alive", "te", "trailer", "upgrade", "proxy-connection"]:
            self.assertNotIn(name, names, "%s forwarded upstream: %r" % (name, a.headers))
        for token in a.header_list("connection"):
            self.assertNotIn(token.lower(), ("x-conn-listed", "keep-alive"))
        self.assertEqual(a.header("x-kept"), "yes")

    def test_hop_by_hop_response_headers_are_not_forwarded(self):
        self.origin.push(h.respond(200, [
            ("Connection", "X-Resp-Listed"), ("X-Resp-Listed", "secret"),
            ("Keep-Alive", "timeout=5, max=100"), ("Trailer", "X-Foo"), ("Upgrade", "foo"),
            ("Proxy-Connection", "keep-alive"), ("TE", "trailers"), ("X-Kept", "yes")], b"body"))
        with h.Conn(self.port) as c:
            r = c.request("GET", "/hop")
        self.assertEqual((r.status, r.body), (200, b"body"))
        names = r.header_names()
        for name in ["x-resp-listed", "keep-alive", "te", "trailer", "upgrade", "proxy-connection"]:
            self.assertNotIn(name, names, "%s forwarded downstream: %r" % (name, r.headers))
        for token in r.header_list("connection"):
            self.assertIn(token.lower(), ("keep-alive", "close"),
                          "upstream Connection tokens leaked: %r" % r.headers)
        self.assertEqual(r.header("x-kept"), "yes")

    def test_upstream_transfer_encoding_is_not_passed_on_raw(self):
        # The proxy re-frames: whatever it sends must be self-consistent (the
        # parser rejects TE + CL), and the body must survive.
        self.origin.push(h.respond(200, body=b"x" * 100, chunked=True, chunk_size=7))
        with h.Conn(self.port) as c:
            r = c.request("GET", "/")
        self.assertEqual(r.body, b"x" * 100)
        self.assertLessEqual(len(r.header_all("transfer-encoding")), 1)

    def test_via_and_forwarded_headers_are_added_and_host_kept(self):
        with h.Conn(self.port) as c:
            c.request("GET", "/fwd", host="api.example.test:8080")
            c.request("GET", "/fwd2", headers=[("Host", "api.example.test"),
                                               ("X-Forwarded-For", "203.0.113.9"),
                                               ("Via", "1.0 fred")])
        first, second = self.origin.wait_for(2)
        self.assertEqual(first.header_all("host"), ["api.example.test:8080"])
        self.assertEqual(first.header_list("x-forwarded-for"), ["127.0.0.1"])
        self.assertEqual(first.header_list("x-forwarded-proto"), ["http"])
        via = first.header_list("via")
        self.assertEqual(len(via), 1, "one Via entry added: %r" % via)
        self.assertRegex(via[0], r"^(HTTP/)?1\.1 \S+")
        self.assertEqual(second.header_all("host"), ["api.example.test"])
        self.assertEqual(second.header_list("x-forwarded-for"), ["203.0.113.9", "127.0.0.1"])
        via2 = second.header_list("via")
        self.assertEqual(len(via2), 2, "Via appended to the existing one: %r" % via2)
        self.assertEqual(via2[0], "1.0 fred")
        self.assertRegex(via2[1], r"^(HTTP/)?1\.1 \S+")

    def test_access_log_has_one_line_per_request(self):
        with h.Conn(self.port) as c:
            for i in range(3):
                c.request("GET", "/log/%d" % i)
        self.origin.wait_for(3)
        self.proxy.stop()
        lines = [line for line in self.proxy.access_log() if "/log/" in line]
        self.assertEqual(len(lines), 3, self.proxy.stdout())
        for i, line in enumerate(lines):
            self.assertIn("/log/%d" % i, line)
            self.assertIn("200", line)


class JsonLogTest(IntegrationTest):
    def test_json_log_format_gives_one_json_object_per_request(self):
        origin = self.start_origin()
        proxy = self.start_proxy(h.simple_config(origin.port), log_format="json")
        with h.Conn(proxy.port()) as c:
            c.request("GET", "/json/1")
            c.request("POST", "/json/2", body=b"abc")
        origin.wait_for(2)
        proxy.stop()
        records = [json.loads(line) for line in proxy.access_log()]
        mine = [r for r in records if "/json/" in json.dumps(r)]
        self.assertEqual(len(mine), 2, proxy.stdout())
        for record, (method, path) in zip(mine, [("GET", "/json/1"), ("POST", "/json/2")]):
            values = json.dumps(record)
            self.assertIn(method, values)
            self.assertIn(path, values)
            self.assertTrue(any(str(v) == "200" for v in record.values()), record)
        for line in proxy.stderr().splitlines():
            json.loads(line)  # logs are JSON too


class HostRoutingTest(IntegrationTest):
    def test_routes_match_by_host_path_and_method_first_match_wins(self):
        a = self.start_origin(name="a", default=h.respond(200, body=b"a"))
        b = self.start_origin(name="b", default=h.respond(200, body=b"b"))
        config = """\
layer_id: itest
admin: { listen: "127.0.0.1:0" }
drain_timeout: 2s
listeners:
  - name: main
    listen: "127.0.0.1:0"
    routes:
      - name: api-read
        match: { host: "*.example.test", path_prefix: /api, methods: [GET, HEAD] }
        upstream: b
      - name: rest
        upstream: a
upstreams:
  - name: a
    endpoints: ["127.0.0.1:${a}"]
  - name: b
    endpoints: ["127.0.0.1:${b}"]
"""
        proxy = self.start_proxy(config, {"a": a.port, "b": b.port})
        with h.Conn(proxy.port()) as c:
            got = [c.request(m, p, host=host, body=body).body for m, p, host, body in [
                ("GET", "/api/x", "svc.example.test:9000", b""),
                ("POST", "/api/x", "svc.example.test", b"p"),
                ("GET", "/other", "svc.example.test", b""),
                ("GET", "/api/x", "example.test", b""),
                ("GET", "/api/x", "SVC.Example.Test", b""),
            ]]
        self.assertEqual(got, [b"b", b"a", b"a", b"a", b"b"])


if __name__ == "__main__":
    unittest.main()
