"""Self-test of harness.py: the Origin and the raw client against each other,
and the Proxy wrapper against a stand-in binary. No onelayer involved."""

import os
import socket
import stat
import sys
import tempfile
import textwrap
import time
import unittest

import harness as h


class OriginAndClientTest(unittest.TestCase):
    def origin(self, *args, **kwargs):
        o = h.Origin(*args, **kwargs)
        self.addCleanup(o.stop)
        return o

    def test_get_round_trip_records_headers_in_order(self):
        o = self.origin(script=[h.respond(201, [("X-A", "1"), ("Set-Cookie", "a=1"),
                                               ("Set-Cookie", "b=2")], b"hello")])
        with h.Conn(o.port) as c:
            r = c.request("GET", "/p?q=1", headers=[("X-One", "a"), ("x-two", "b c"),
                                                    ("X-One", "z")])
        status, headers, body = r
        self.assertEqual((status, body), (201, b"hello"))
        self.assertEqual(r.header_all("set-cookie"), ["a=1", "b=2"])
        a = o.wait_for(1)[0]
        self.assertEqual((a.method, a.target), ("GET", "/p?q=1"))
        self.assertEqual(a.headers, [("Host", "test.local"), ("X-One", "a"), ("x-two", "b c"),
                                     ("X-One", "z")])
        self.assertEqual(o.errors, [])

    def test_keep_alive_reuses_one_connection_and_counts_it(self):
        o = self.origin()
        with h.Conn(o.port) as c:
            for i in range(50):
                self.assertEqual(c.request("GET", "/%d" % i).status, 200)
        self.assertEqual(o.connections_accepted, 1)
        self.assertEqual(set(o.conn_ids()), {1})

    def test_chunked_request_is_decoded_with_trailers(self):
        o = self.origin(default=h.echo())
        body = bytes(range(256)) * 40
        with h.Conn(o.port) as c:
            r = c.request("POST", "/c", body=body, chunked=True, chunk_size=1000,
                          trailers=[("X-T", "v")])
        self.assertEqual(r.body, body)
        a = o.wait_for(1)[0]
        self.assertEqual((a.framing, a.body, a.trailers), ("chunked", body, [("X-T", "v")]))

    def test_pipelined_requests_answered_in_order_from_one_write(self):
        o = self.origin(handler=lambda a: h.respond(200, body=a.target.encode()))
        reqs = b"".join(h.build_request("GET", "/%d" % i) for i in range(5))
        data = h.raw_request(o.port, reqs, timeout=3, responses=5)
        self.assertEqual([r.body for r in h.parse_responses(data)],
                         [b"/%d" % i for i in range(5)])

    def test_parse_responses_handles_head_chunked_and_close_delimited(self):
        data = (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"          # HEAD: no body
                b"HTTP/1.1 100 Continue\r\n\r\n"
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n0\r\n\r\n"
                b"HTTP/1.1 204 No Content\r\n\r\n"
                b"HTTP/1.1 200 OK\r\n\r\nto the end")
        rs = h.parse_responses(data, methods=["HEAD", "GET", "GET", "GET"])
        self.assertEqual([(r.status, r.body, r.framing) for r in rs],
                         [(200, b"", "none"), (200, b"abc", "chunked"), (204, b"", "none"),
                          (200, b"to the end", "close")])
        with_interim = h.parse_responses(data, methods=["HEAD", "GET", "GET", "GET"],
                                         include_interim=True)
        self.assertEqual([r.status for r in with_interim], [200, 100, 200, 204, 200])

    def test_parse_responses_reports_truncation_and_bad_framing(self):
        with self.assertRaises(h.IncompleteMessage) as cm:
            h.parse_responses(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        self.assertEqual(cm.exception.partial.body, b"abc")
        with self.assertRaises(h.ProtocolError):
            h.parse_responses(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"
                              b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        with self.assertRaises(h.ProtocolError):
            h.parse_responses(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")

    def test_head_then_close_gives_a_truncated_response(self):
        o = self.origin(script=[h.head_then_close(200, content_length=100, partial=b"x" * 10)])
        with h.Conn(o.port) as c:
            with self.assertRaises(h.IncompleteMessage) as cm:
                c.request("GET", "/")
        self.assertEqual(cm.exception.partial.body, b"x" * 10)

    def test_close_without_response_fin_and_rst(self):
        o = self.origin(script=[h.close_without_response(), h.close_without_response(rst=True)])
        for _ in range(2):
            data = h.raw_request(o.port, h.build_request("GET", "/"), timeout=3)
            self.assertEqual(data, b"")
        self.assertEqual(o.connections_accepted, 2)

    def test_close_delimited_and_raw(self):
        o = self.origin(script=[h.close_delimited(200, body=b"abcdef", pieces=3, pause=0.01),
                                h.raw(b"NOT HTTP\r\n\r\n")])
        rs = h.parse_responses(h.raw_request(o.port, h.build_request("GET", "/"), timeout=3))
        self.assertEqual([(r.status, r.body, r.framing) for r in rs], [(200, b"abcdef", "close")])
        with self.assertRaises(h.ProtocolError):
            h.parse_responses(h.raw_request(o.port, h.build_request("GET", "/"), timeout=3))

    def test_hang_and_delay(self):
        o = self.origin(script=[h.hang(), h.delay(0.3, h.retry_after(2))])
        data = h.raw_request(o.port, h.build_request("GET", "/"), timeout=0.5)
        self.assertEqual(data, b"")
        t0 = time.monotonic()
        with h.Conn(o.port) as c:
            r = c.request("GET", "/")
        self.assertGreaterEqual(time.monotonic() - t0, 0.3)
        self.assertEqual((r.status, r.header("retry-after")), (503, "2"))

    def test_hang_is_released_by_stop(self):
        o = h.Origin(default=h.hang())
        c = h.Conn(o.port)
        c.send(h.build_request("GET", "/"))
        o.wait_for(1)
        t0 = time.monotonic()
        o.stop()
        self.assertLess(time.monotonic() - t0, 2)
        self.assertTrue(c.closed_by_peer(2))
        c.close()

    def test_expect_100_continue_gets_interim_response(self):
        o = self.origin(default=h.echo())
        with h.Conn(o.port) as c:
            c.send(h.build_request("POST", "/", [("Expect", "100-continue"),
                                                 ("Content-Length", "5")]))
            interim = c.read_response(include_interim=True)
            self.assertEqual(interim.status, 100)
            c.send(b"hello")
            self.assertEqual(c.read_response().body, b"hello")

    def test_stream_response_and_streaming_sinks(self):
        total = 5 * 1024 * 1024 + 17
        o = self.origin(script=[h.stream_response(total), h.stream_response(total, chunked=True)],
                        record_limit=0, default=h.respond(200))
        import hashlib
        with h.Conn(o.port) as c:
            for _ in range(2):
                d = hashlib.sha256()
                r = c.request("GET", "/", sink=d.update)
                self.assertEqual((r.body_len, d.hexdigest()), (total, h.pattern_digest(total)))
            block = h.pattern_block()
            c.send(h.build_request("POST", "/", [("Content-Length", str(len(block) * 3))]))
            for _ in range(3):
                c.send(block)
            self.assertEqual(c.read_response().status, 200)
        a = o.wait_for(3)[2]
        self.assertEqual((a.body_len, a.body, a.body_sha256),
                         (len(block) * 3, b"", h.pattern_digest(len(block) * 3)))

    def test_close_idle_closes_only_idle_connections(self):
        o = self.origin()
        c = h.Conn(o.port)
        self.addCleanup(c.close)
        self.assertEqual(c.request("GET", "/").status, 200)
        time.sleep(0.1)
        self.assertEqual(o.close_idle(), 1)
        self.assertTrue(c.closed_by_peer(2))

    def test_connection_close_is_honoured(self):
        o = self.origin()
        with h.Conn(o.port) as c:
            r = c.request("GET", "/", headers=[("Connection", "close")])
            self.assertEqual(r.header("connection"), "close")
            self.assertTrue(c.closed_by_peer(2))

    def test_origin_flags_malformed_framing_from_its_client(self):
        o = self.origin()
        h.raw_request(o.port, b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
                              b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", timeout=2)
        self.assertEqual(len(o.errors), 1)

    def test_closed_port_refuses(self):
        port, s = h.closed_port()
        self.addCleanup(s.close)
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2)


FAKE_PROXY = r'''
import signal, socket, sys, os, time
args = sys.argv[1:]
ports_file = args[args.index("--ports-file") + 1]
assert "--config" in args
a = socket.socket(); a.bind(("127.0.0.1", 0)); a.listen()
b = socket.socket(); b.bind(("127.0.0.1", 0)); b.listen()
tmp = ports_file + ".tmp"
with open(tmp, "w") as f:
    f.write("main %d\nadmin %d\n" % (a.getsockname()[1], b.getsockname()[1]))
os.rename(tmp, ports_file)
print("started", flush=True)
print("some log line", file=sys.stderr, flush=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(int(os.environ.get("FAKE_EXIT", "0"))))
while True:
    time.sleep(1)
'''


class ProxyWrapperTest(h.IntegrationTest):
    def setUp(self):
        d = tempfile.mkdtemp(prefix="fake-onelayer-")
        self.addCleanup(__import__("shutil").rmtree, d, True)
        self.fake = os.path.join(d, "onelayer")
        with open(self.fake, "w") as f:
            f.write("#!%s\n%s" % (sys.executable, FAKE_PROXY))
        os.chmod(self.fake, os.stat(self.fake).st_mode | stat.S_IEXEC)

    def test_ports_file_rss_and_clean_stop(self):
        p = self.start_proxy(h.simple_config(1234), binary=self.fake)
        self.assertGreater(p.port("main"), 0)
        self.assertGreater(p.admin_port, 0)
        self.assertGreater(p.rss_kb(), 0)
        self.assertGreaterEqual(p.peak_rss_kb(), p.rss_kb())
        self.assertEqual(p.stop(), 0)
        self.assertIn("started", p.stdout())
        self.assertIn("some log line", p.stderr())

    def test_stop_reports_a_bad_exit_code(self):
        os.environ["FAKE_EXIT"] = "3"
        self.addCleanup(os.environ.pop, "FAKE_EXIT")
        p = h.Proxy(h.simple_config(1234), binary=self.fake)
        self.addCleanup(p.cleanup)
        p.start()
        with self.assertRaises(AssertionError) as cm:
            p.stop()
        self.assertIn("exited with 3", str(cm.exception))

    def test_start_fails_fast_when_the_binary_exits(self):
        p = h.Proxy("x: 1\n", binary="/bin/false")
        self.addCleanup(p.cleanup)
        t0 = time.monotonic()
        with self.assertRaises(h.ProxyStartError):
            p.start()
        self.assertLess(time.monotonic() - t0, 5)

    def test_placeholders_are_substituted(self):
        p = h.Proxy("port: ${origin_port}\n", {"origin_port": 42}, binary=self.fake)
        self.addCleanup(p.cleanup)
        self.assertEqual(p.config_text, "port: 42\n")


class ConfigHelperTest(unittest.TestCase):
    def test_simple_config_shape(self):
        text = h.simple_config(8080, limits={"max_body_bytes": "1KiB"},
                               retry={"max_attempts": 3, "retry_on": ["reset", 503]},
                               upstream={"retry_budget": {"ratio": 0.1, "min_per_second": 5}},
                               route={"match": {"host": "*.example.com"}})
        expected = textwrap.dedent('''\
            layer_id: itest
            admin:
              listen: "127.0.0.1:0"
            drain_timeout: 2s
            listeners:
              - name: main
                listen: "127.0.0.1:0"
                limits:
                  max_body_bytes: 1KiB
                routes:
                  - name: default
                    upstream: origin
                    retry:
                      max_attempts: 3
                      retry_on: [reset, 503]
                    match:
                      host: "*.example.com"
            upstreams:
              - name: origin
                endpoints: ["127.0.0.1:8080"]
                connect_timeout: 1s
                retry_budget:
                  ratio: 0.1
                  min_per_second: 5
            ''')
        self.assertEqual(text, expected)


if __name__ == "__main__":
    unittest.main()
