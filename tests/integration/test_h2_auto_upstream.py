"""``protocol: auto`` with ``tls`` through the real onelayer: the handshake
offers ALPN h2 and http/1.1 (HTTP/2 preferred) and the server's choice
decides. NGINX (nginx-light) with a certificate made by the openssl CLI at
test time is the origin, once with ``listen ... ssl http2`` (the connection
turns HTTP/2, many requests share it) and once with ``ssl`` alone (it stays
HTTP/1.1); HTTP/1.1 clients and an HTTP/2 client (nghttp) in front. The
endpoint remembers what its server chose: later connections need no
handshake to learn it again."""

import subprocess
import time
import unittest

import harness as h
import ops_helpers as ops
import tls_helpers as tls


def get(port, target):
    with h.Conn(port) as c:
        return c.request("GET", target, host="svc.test")


class AutoUpstreamTest(tls.PkiTest):

    def nginx(self, **kw):
        n = tls.Nginx(self.pki, **kw)
        self.addCleanup(n.stop)
        return n

    def proxy_to(self, nginx, *, upstream=None, retry=None):
        # reuse: always: these tests follow one kept-alive upstream connection
        # from one client connection to the next.
        up = {"protocol": "auto", "tls": {"sni": "origin.test", "ca_file": self.pki.path("ca.pem")},
              "reuse": "always"}
        up.update(upstream or {})
        return self.start_proxy(h.simple_config(nginx.port, upstream=up, retry=retry, workers=1))

    def connections_total(self, proxy):
        return ops.total(ops.metrics(self, proxy), "onelayer_upstream_connections_total")

    def first_request_then_idle_out(self, nginx, **kw):
        """A proxy whose pooled connections close after 200 ms, after one
        request (the endpoint has chosen) and once its connection is gone."""
        proxy = self.proxy_to(nginx, upstream={"pool": {"idle_timeout": "200ms"}}, **kw)
        self.assertEqual(get(proxy.port(), "/first").status, 200)
        self.assertTrue(h.wait_until(
            lambda: ops.total(ops.metrics(self, proxy), "onelayer_upstream_connections_active") == 0, 5))
        return proxy

    def test_an_h2_origin_gets_http2_and_every_request_shares_one_connection(self):
        n = self.nginx(http2=True)
        proxy = self.proxy_to(n)
        r = get(proxy.port(), "/first")
        self.assertEqual((r.status, r.body), (200, b"ok sni=origin.test alpn=h2\n"))
        # The first attempt went as a stream on the connection its handshake
        # opened: one connection, and no second request for it.
        self.assertEqual(self.connections_total(proxy), 1)
        results = h.concurrent_gets(proxy.port(), 60, concurrency=20, target="/many")
        self.assertEqual([status for _, status, _ in results], [200] * 60)
        lines = n.wait_lines(61)
        self.assertEqual(len(lines), 61, lines)
        self.assertEqual({(tls.field(l, "alpn"), tls.field(l, "http")) for l in lines}, {("h2", "HTTP/2.0")})
        self.assertEqual(len({tls.field(l, "conn") for l in lines}), 1, "one HTTP/2 connection for all")
        self.assertEqual(self.connections_total(proxy), 1)
        self.assertEqual(proxy.stderr().count("ALPN chose h2"), 1, proxy.stderr())

    def test_an_http2_client_and_an_http11_client_both_reach_an_h2_origin(self):
        n = self.nginx(http2=True)
        proxy = self.proxy_to(n)
        self.assertEqual(get(proxy.port(), "/h1").status, 200)
        base = "http://127.0.0.1:%d" % proxy.port()
        r = subprocess.run(["nghttp", "-n", "-m", "10", base + "/h2"], capture_output=True, text=True,
                           errors="replace", timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = n.wait_lines(11)
        self.assertEqual(sorted(l.split()[1] for l in lines), ["/h1"] + ["/h2"] * 10)
        self.assertEqual({tls.field(l, "http") for l in lines}, {"HTTP/2.0"})
        self.assertEqual(len({tls.field(l, "conn") for l in lines}), 1)

    def test_an_origin_without_http2_gets_http11_on_keep_alive_connections(self):
        n = self.nginx(http2=False)
        proxy = self.proxy_to(n)
        r = get(proxy.port(), "/one")
        self.assertEqual((r.status, r.body), (200, b"ok sni=origin.test alpn=http/1.1\n"))
        with h.Conn(proxy.port()) as c:
            for i in range(10):
                self.assertEqual(c.request("GET", "/k%d" % i, host="svc.test").status, 200)
        base = "http://127.0.0.1:%d" % proxy.port()
        r = subprocess.run(["nghttp", "-n", base + "/from-h2"], capture_output=True, text=True,
                           errors="replace", timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = n.wait_lines(12)
        self.assertEqual({(tls.field(l, "alpn"), tls.field(l, "http")) for l in lines}, {("http/1.1", "HTTP/1.1")})
        self.assertEqual(len({tls.field(l, "conn") for l in lines}), 1, "the keep-alive connection served all")
        self.assertEqual(proxy.stderr().count("ALPN chose http/1.1"), 1, proxy.stderr())

    def test_a_later_connection_goes_straight_to_http2_without_learning_again(self):
        # The pooled connection idles out; then 20 requests at once. The
        # endpoint remembered h2, so the first opens an HTTP/2 connection
        # straight away and the others join it as streams while it connects
        # (had each to learn the protocol by a handshake of its own, each
        # would open its own connection).
        n = self.nginx(http2=True)
        proxy = self.first_request_then_idle_out(n)
        results = h.concurrent_gets(proxy.port(), 20, concurrency=20, target="/later")
        self.assertEqual([status for _, status, _ in results], [200] * 20)
        lines = n.wait_lines(21)
        self.assertEqual({tls.field(l, "http") for l in lines}, {"HTTP/2.0"})
        later = [l for l in lines if l.split()[1] == "/later"]
        self.assertEqual(len({tls.field(l, "conn") for l in later}), 1, "one new connection for all 20: %r" % later)
        self.assertEqual({tls.field(l, "reused") for l in later}, {"r"}, "it resumed the TLS session")
        self.assertEqual(self.connections_total(proxy), 2)
        log = proxy.stderr()
        self.assertEqual(log.count("ALPN chose"), 1, log)

    def test_an_endpoint_that_chose_h2_and_now_chooses_http11_is_served_over_http11(self):
        # The origin loses http2 while onelayer remembers h2: the new HTTP/2
        # connection hears http/1.1 and becomes an HTTP/1.1 one, its waiting
        # attempt (nothing sent) goes over it (no retry: max_attempts is 1),
        # and the endpoint learns it.
        before = self.nginx(http2=True)
        proxy = self.first_request_then_idle_out(before, retry={"max_attempts": 1})
        self.assertEqual([tls.field(l, "http") for l in h.wait_for_lines(before.access_lines, 1)], ["HTTP/2.0"])
        before.stop()
        after = self.nginx(http2=False, port=before.port)
        for target in ("/now", "/then"):
            r = get(proxy.port(), target)
            self.assertEqual((r.status, r.body), (200, b"ok sni=origin.test alpn=http/1.1\n"))
        lines = after.wait_lines(2)
        self.assertEqual([(l.split()[1], tls.field(l, "http")) for l in lines],
                         [("/now", "HTTP/1.1"), ("/then", "HTTP/1.1")])
        self.assertEqual(len({tls.field(l, "conn") for l in lines}), 1, "the handed-over connection kept alive")
        self.assertEqual(self.connections_total(proxy), 2)
        now = h.wait_until(lambda: [l for l in proxy.access_log() if "path=/now " in l])
        self.assertEqual(len(now), 1, proxy.access_log())
        self.assertIn(" attempts=1 ", now[0])
        self.assertIn(" status=200 ", now[0])
        self.assertIn("ALPN chose http/1.1 (protocol auto), not what it chose before", proxy.stderr())

    def test_attempts_waiting_on_an_http2_connection_that_hears_http11_all_go_over_http11(self):
        # As above with 8 requests at once: they all wait on one new HTTP/2
        # connection; when its server chooses http/1.1, the first attempt
        # takes that connection, the others open (or take) HTTP/1.1 ones,
        # and none is retried.
        before = self.nginx(http2=True)
        proxy = self.first_request_then_idle_out(before, retry={"max_attempts": 1})
        before.stop()
        after = self.nginx(http2=False, port=before.port)
        results = h.concurrent_gets(proxy.port(), 8, concurrency=8, target="/burst")
        self.assertEqual([status for _, status, _ in results], [200] * 8)
        lines = after.wait_lines(8)
        self.assertEqual({tls.field(l, "http") for l in lines}, {"HTTP/1.1"})
        burst = h.wait_until(lambda: (lambda ls: ls if len(ls) == 8 else None)(
            [l for l in proxy.access_log() if "path=/burst " in l]))
        self.assertEqual(len(burst), 8, proxy.access_log())
        self.assertTrue(all(" attempts=1 " in l and " status=200 " in l for l in burst), burst)
        self.assertRegex(proxy.stderr(), r"a new HTTP/2 connection negotiated http/1.1: \d+ waiting attempt")

    def test_an_upgrade_request_goes_over_http11_to_an_endpoint_that_chose_h2(self):
        n = self.nginx(http2=True)
        proxy = self.proxy_to(n)
        self.assertEqual(get(proxy.port(), "/learn").status, 200)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/ws", host="svc.test",
                          headers=[("Connection", "Upgrade"), ("Upgrade", "websocket")])
        self.assertEqual(r.status, 200, r)  # nginx does not switch; it answers over HTTP/1.1
        lines = n.wait_lines(2)
        seen = {l.split()[1]: (tls.field(l, "alpn"), tls.field(l, "http")) for l in lines}
        self.assertEqual(seen, {"/learn": ("h2", "HTTP/2.0"), "/ws": ("http/1.1", "HTTP/1.1")})

    def test_a_grpc_call_goes_over_http2_to_an_h2_origin_and_is_unavailable_over_http11(self):
        # nginx answers the POST itself (return 200): what matters is which
        # protocol carried it, and the answer onelayer gives where HTTP/2 is
        # not to be had.
        h2_origin = self.nginx(http2=True)
        h1_origin = self.nginx(http2=False)
        grpc = ["-H", "content-type: application/grpc", "-H", "te: trailers", "-d", "/dev/null"]
        for origin, expect_http in ((h2_origin, "HTTP/2.0"), (h1_origin, None)):
            proxy = self.proxy_to(origin)
            base = "http://127.0.0.1:%d" % proxy.port()
            for i in range(2):  # the second time the endpoint's protocol is known
                r = subprocess.run(["nghttp", "-v"] + grpc + [base + "/pkg.Svc/M%d" % i], capture_output=True,
                                   text=True, errors="replace", timeout=30)
                self.assertEqual(r.returncode, 0, r.stderr)
                if expect_http:
                    self.assertNotIn("grpc-status", r.stdout)
                else:
                    self.assertIn("grpc-status: 14", r.stdout, r.stdout)
                    self.assertIn("x-onelayer-error: bad_upstream_response", r.stdout, r.stdout)
            if expect_http:
                lines = origin.wait_lines(2)
                self.assertEqual({tls.field(l, "http") for l in lines}, {expect_http})
            else:
                time.sleep(0.2)
                self.assertEqual(origin.access_lines(), [], "no gRPC call went over HTTP/1.1")


if __name__ == "__main__":
    unittest.main()
