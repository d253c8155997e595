"""TLS to upstreams through the real onelayer, with NGINX (nginx-light) as
the TLS origin and a CA and certificates made by the openssl CLI at test
time: verification, names, SNI, ALPN, client certificates, resumption, and
what a failure looks like to the client."""

import os
import subprocess
import unittest

import harness as h
import ops_helpers as ops
import tls_helpers as tls


PkiTest = tls.PkiTest


class TlsUpstreamTest(PkiTest):

    def nginx(self, **kw):
        n = tls.Nginx(self.pki, **kw)
        self.addCleanup(n.stop)
        return n

    def proxy_to(self, nginx, tls_block, *, retry=None, upstream=None, **kw):
        up = {"tls": tls_block}
        up.update(upstream or {})
        cfg = h.simple_config(nginx.port, upstream=up, retry=retry, **kw)
        return self.start_proxy(cfg)

    def get(self, proxy, target="/x", **kw):
        with h.Conn(proxy.port()) as c:
            return c.request("GET", target, **kw)

    def test_verified_upstream_answers_and_sees_sni_and_the_request(self):
        n = self.nginx()
        proxy = self.proxy_to(n, {"sni": "origin.test", "ca_file": self.pki.path("ca.pem")})
        r = self.get(proxy, "/verified")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, b"ok sni=origin.test alpn=http/1.1\n")
        (line,) = n.wait_lines(1)
        self.assertTrue(line.startswith("GET /verified "), line)
        self.assertEqual(tls.field(line, "sni"), "origin.test")
        self.assertEqual(tls.field(line, "proto"), "TLSv1.3")

    def test_ip_endpoint_without_sni_is_checked_against_the_ip_san(self):
        n = self.nginx()
        proxy = self.proxy_to(n, {"ca_file": self.pki.path("ca.pem")})
        r = self.get(proxy)
        self.assertEqual(r.status, 200, r)
        (line,) = n.wait_lines(1)
        self.assertEqual(tls.field(line, "sni"), "-", "no SNI is sent for an IP address")

    def test_wrong_ca_is_refused_with_upstream_tls_and_not_retried(self):
        n = self.nginx()
        proxy = self.proxy_to(n, {"sni": "origin.test", "ca_file": self.pki.path("other-ca.pem")},
                              retry={"max_attempts": 3})
        r = self.get(proxy)
        self.assertProxyError(r, 502, "upstream_tls")
        self.assertIsNone(r.header("x-retry-exhausted"), "a verdict, not exhausted retries")
        self.assertEqual(n.access_lines(), [], "no request reached the origin")
        err = h.wait_until(lambda: "certificate verify failed" in proxy.stderr() and proxy.stderr())
        self.assertIn("unable to get local issuer certificate", err)
        metrics = proxy.admin_get("/metrics").body.decode()
        self.assertIn('onelayer_upstream_attempts_total{route="default",upstream="origin"} 1', metrics)

    def test_system_store_does_not_trust_a_private_ca(self):
        n = self.nginx()
        proxy = self.proxy_to(n, {"sni": "origin.test"})
        self.assertProxyError(self.get(proxy), 502, "upstream_tls")

    def test_wrong_name_is_refused(self):
        n = self.nginx()
        proxy = self.proxy_to(n, {"sni": "other.test", "ca_file": self.pki.path("ca.pem")})
        r = self.get(proxy)
        self.assertProxyError(r, 502, "upstream_tls")
        err = h.wait_until(lambda: "hostname mismatch" in proxy.stderr() and proxy.stderr())
        self.assertTrue(err, proxy.stderr())

    def test_verify_false_must_be_written_and_warns(self):
        n = self.nginx()
        proxy = self.proxy_to(n, {"sni": "other.test", "verify": False})
        self.assertEqual(self.get(proxy).status, 200)
        self.assertIn("tls.verify is false", proxy.stderr())

    def test_protocol_auto_with_alpn_http11_alone_speaks_http11_to_an_h2_capable_origin(self):
        # (What `auto` does by default, h2 preferred: test_h2_auto_upstream.py.)
        n = self.nginx(http2=True)
        proxy = self.proxy_to(n, {"sni": "origin.test", "ca_file": self.pki.path("ca.pem"), "alpn": ["http/1.1"]},
                              upstream={"protocol": "auto"})
        r = self.get(proxy)
        self.assertEqual(r.status, 200, r)
        (line,) = n.wait_lines(1)
        self.assertEqual((tls.field(line, "alpn"), tls.field(line, "http")), ("http/1.1", "HTTP/1.1"))

    def test_mtls_origin_refuses_without_a_client_certificate_and_serves_with_one(self):
        n = self.nginx(client_ca=self.pki.path("ca.pem"))
        ca = self.pki.path("ca.pem")
        without = self.proxy_to(n, {"sni": "origin.test", "ca_file": ca})
        r = self.get(without)
        self.assertEqual(r.status, 400, "nginx answers 400 to a missing client certificate: %r" % r)
        with_cert = self.proxy_to(n, {"sni": "origin.test", "ca_file": ca,
                                      "cert_file": self.pki.path("client.pem"),
                                      "key_file": self.pki.path("client.key")})
        r = self.get(with_cert, "/mtls")
        self.assertEqual(r.status, 200, r)
        line = [l for l in n.wait_lines(2) if "/mtls" in l][0]
        self.assertEqual(tls.field(line, "client"), "SUCCESS")

    def test_second_connection_resumes_the_session(self):
        n = self.nginx()
        proxy = self.proxy_to(n, {"sni": "origin.test", "ca_file": self.pki.path("ca.pem")},
                              upstream={"pool": {"max_idle": 0}})
        for i in range(3):
            self.assertEqual(self.get(proxy, "/r%d" % i).status, 200)
        lines = n.wait_lines(3)
        conns = [tls.field(l, "conn") for l in lines]
        self.assertEqual(len(set(conns)), 3, "each request had its own connection: %r" % lines)
        self.assertEqual([tls.field(l, "reused") for l in lines], [".", "r", "r"], lines)

    def test_health_checks_of_a_tls_upstream_speak_tls_and_keep_it_in(self):
        n = self.nginx(locations='location = /healthz { return 200 "healthy\\n"; }')
        proxy = self.proxy_to(n, {"sni": "origin.test", "ca_file": self.pki.path("ca.pem")},
                              upstream={"health_check": {"interval": "100ms", "timeout": "90ms", "unhealthy": 1}})
        checks = n.wait_lines(3)
        self.assertTrue(all(l.startswith("GET /healthz ") and tls.field(l, "sni") == "origin.test" for l in checks),
                        checks)
        metrics = proxy.admin_get("/metrics").body.decode()
        self.assertIn('onelayer_endpoint_ejected{upstream="origin",endpoint="127.0.0.1:%d"} 0' % n.port, metrics)
        self.assertEqual(self.get(proxy).status, 200)

    def test_health_checks_fail_against_a_certificate_that_does_not_verify(self):
        # Two endpoints, both with a certificate the configured CA did not sign:
        # one is ejected by its checks (the last one never is).
        a, b = self.nginx(), self.nginx()
        cfg = h.simple_config(a.port, endpoints=["127.0.0.1:%d" % a.port, "127.0.0.1:%d" % b.port], upstream={
            "tls": {"sni": "origin.test", "ca_file": self.pki.path("other-ca.pem")},
            "health_check": {"interval": "100ms", "timeout": "90ms", "unhealthy": 1},
            "outlier_detection": {"max_ejected_percent": 100}})
        proxy = self.start_proxy(cfg)

        def ejected():
            text = proxy.admin_get("/metrics").body.decode()
            return [p for p in (a.port, b.port)
                    if 'onelayer_endpoint_ejected{upstream="origin",endpoint="127.0.0.1:%d"} 1' % p in text]
        self.assertEqual(len(h.wait_until(ejected, 5)), 1)
        self.assertEqual(a.access_lines() + b.access_lines(), [], "no check got past the handshake")

    def test_keep_alive_reuses_one_tls_connection(self):
        n = self.nginx()
        proxy = self.proxy_to(n, {"sni": "origin.test", "ca_file": self.pki.path("ca.pem")})
        with h.Conn(proxy.port()) as c:
            for i in range(50):
                self.assertEqual(c.request("GET", "/k%d" % i).status, 200)
        lines = n.wait_lines(50)
        self.assertEqual(len({tls.field(l, "conn") for l in lines}), 1)

    def test_plain_http_endpoint_fails_the_handshake_as_a_connect_failure(self):
        import socket, threading
        plain = socket.socket()
        plain.bind(("127.0.0.1", 0))
        plain.listen(16)
        self.addCleanup(plain.close)

        def serve():  # a cleartext HTTP server: answers any bytes with a 400
            while True:
                try:
                    s, _ = plain.accept()
                except OSError:
                    return
                s.recv(4096)
                s.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                s.close()
        threading.Thread(target=serve, daemon=True).start()
        cfg = h.simple_config(plain.getsockname()[1], upstream={"tls": {"verify": False}}, retry={"max_attempts": 2})
        proxy = self.start_proxy(cfg)
        r = self.get(proxy)
        self.assertProxyError(r, 502, "connect_failure")
        self.assertEqual(r.header("x-retry-exhausted"), "2", "a failed handshake is retried as connect-failure")
        self.assertIn("TLS handshake failed", proxy.stderr())

    def test_handshake_that_never_answers_is_cut_at_connect_timeout(self):
        import socket, time
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        self.addCleanup(silent.close)
        cfg = h.simple_config(silent.getsockname()[1], upstream={"tls": {"verify": False}, "connect_timeout": "300ms"})
        proxy = self.start_proxy(cfg)
        t0 = time.monotonic()
        r = self.get(proxy)
        took = time.monotonic() - t0
        self.assertProxyError(r, 502, "connect_failure")
        self.assertLess(took, 2.0)
        self.assertGreaterEqual(took, 0.25)

    def test_reload_with_a_bad_certificate_file_is_refused_and_the_old_tls_serves(self):
        n = self.nginx()
        good = {"sni": "origin.test", "ca_file": self.pki.path("ca.pem")}
        proxy = self.proxy_to(n, good)
        self.assertEqual(self.get(proxy).status, 200)
        ops.rewrite_config(proxy, h.simple_config(n.port, upstream={"tls": {"ca_file": "/nonexistent.pem"}}))
        r = ops.admin(proxy, "POST", "/reload")
        self.assertEqual(r.status, 500, r)
        self.assertIn(b"upstreams[0].tls.ca_file: cannot load", r.body)
        self.assertEqual(self.get(proxy).status, 200)
        # A reload to a wrong CA takes effect: pooled connections from before are not reused.
        ops.rewrite_config(proxy, h.simple_config(n.port, upstream={"tls": dict(good, ca_file=self.pki.path("other-ca.pem"))}))
        self.assertEqual(ops.admin(proxy, "POST", "/reload").status, 200)
        self.assertProxyError(self.get(proxy), 502, "upstream_tls")

    def test_a_missing_ca_file_is_a_config_error_at_check(self):
        cfg = h.simple_config(1, upstream={"tls": {"ca_file": "/nonexistent/ca.pem"}})
        path = os.path.join(self.pki.dir, "bad.yaml")
        with open(path, "w") as f:
            f.write(cfg)
        out = subprocess.run([h.onelayer_bin(), "--check", "--config", path], capture_output=True, text=True)
        self.assertEqual(out.returncode, 1, out)
        self.assertIn('upstreams[0].tls.ca_file: cannot load "/nonexistent/ca.pem": No such file or directory',
                      out.stderr)
        with open(path, "w") as f:
            f.write(h.simple_config(1, upstream={"tls": {"cert_file": self.pki.path("client.pem"),
                                                         "key_file": self.pki.path("origin.key")}}))
        out = subprocess.run([h.onelayer_bin(), "--check", "--config", path], capture_output=True, text=True)
        self.assertEqual(out.returncode, 1, out)
        self.assertIn("is not the key of", out.stderr)


class TlsListenerTest(PkiTest):

    def tls_proxy(self, origin):
        return self.start_proxy(h.simple_config(origin.port, listener={"tls": {
            "cert_file": self.pki.path("proxy.pem"), "key_file": self.pki.path("proxy.key")}}))

    def client(self, proxy):
        import socket, ssl
        ctx = ssl.create_default_context(cafile=self.pki.path("ca.pem"))
        ctx.set_alpn_protocols(["http/1.1"])  # h2 would be chosen: test_h2_downstream covers it
        raw = socket.create_connection(("127.0.0.1", proxy.port()), timeout=10)
        s = ctx.wrap_socket(raw, server_hostname="proxy.test")
        self.addCleanup(s.close)
        return s

    def test_tls_listener_serves_keep_alive_requests_marked_https(self):
        origin = self.start_origin(handler=lambda a: h.respond(200, body=a.target.encode()))
        proxy = self.tls_proxy(origin)
        s = self.client(proxy)
        self.assertEqual(s.selected_alpn_protocol(), "http/1.1")
        reader = h._Reader(s.recv)
        for i in range(3):
            s.sendall(h.build_request("GET", "/s%d" % i))
            r = h.read_response(reader)
            self.assertEqual((r.status, r.body), (200, b"/s%d" % i))
        arrivals = origin.wait_for(3)
        self.assertEqual([a.header_list("x-forwarded-proto") for a in arrivals], [["https"]] * 3)
        self.assertEqual(len({a.conn_id for a in arrivals}), 1)

    def test_close_delimited_answer_to_a_tls_client_ends_with_close_notify(self):
        origin = self.start_origin(script=[h.respond(200, body=b"y" * 5000, chunked=True, chunk_size=1000)])
        proxy = self.tls_proxy(origin)
        s = self.client(proxy)
        s.sendall(b"GET /old HTTP/1.0\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)  # ssl raises SSLEOFError on an EOF without close_notify
            if not chunk:
                break
            data += chunk
        self.assertTrue(data.startswith(b"HTTP/1.1 200"), data[:100])
        self.assertTrue(data.endswith(b"y" * 5000))

    def test_cleartext_client_on_a_tls_listener_is_closed_and_logged(self):
        import socket
        origin = self.start_origin()
        proxy = self.tls_proxy(origin)
        with socket.create_connection(("127.0.0.1", proxy.port()), timeout=5) as s:
            s.sendall(h.build_request("GET", "/plain"))
            got = s.recv(4096)
        self.assertFalse(got.startswith(b"HTTP/"), got)
        self.assertTrue(h.wait_until(lambda: "TLS handshake with 127.0.0.1 failed" in proxy.stderr()))
        self.assertNoArrivals(origin)

    def test_listener_certificate_problems_fail_the_check(self):
        cfg = h.simple_config(1, listener={"tls": {"cert_file": self.pki.path("ca.key"),
                                                   "key_file": self.pki.path("proxy.key")}})
        path = os.path.join(self.pki.dir, "bad-listener.yaml")
        with open(path, "w") as f:
            f.write(cfg)
        out = subprocess.run([h.onelayer_bin(), "--check", "--config", path], capture_output=True, text=True)
        self.assertEqual(out.returncode, 1, out)
        self.assertIn("listeners[0].tls.cert_file: cannot load", out.stderr)


def openssl_mappings(proxy):
    """The OpenSSL libraries mapped into the running proxy, by file name."""
    with open("/proc/%d/maps" % proxy.proc.pid) as f:
        paths = {line.split()[-1] for line in f if len(line.split()) >= 6}
    return sorted({os.path.basename(p) for p in paths if "libssl" in p or "libcrypto" in p})


class OpenSslLoadingTest(PkiTest):
    """OpenSSL is opened by the first config with a `tls` block, not before."""

    def test_a_config_without_tls_never_maps_openssl_and_a_reload_to_tls_opens_it(self):
        plain = self.start_origin(handler=lambda a: h.respond(200, body=b"plain"))
        proxy = self.start_proxy(h.simple_config(plain.port))
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/p").body, b"plain")
        self.assertEqual(openssl_mappings(proxy), [], "no TLS configured: OpenSSL is not loaded")
        n = tls.Nginx(self.pki)
        self.addCleanup(n.stop)
        ops.rewrite_config(proxy, h.simple_config(n.port, upstream={"tls": {"sni": "origin.test",
                                                                            "ca_file": self.pki.path("ca.pem")}}))
        self.assertEqual(ops.admin(proxy, "POST", "/reload").status, 200)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/after-reload")
        self.assertEqual((r.status, r.body), (200, b"ok sni=origin.test alpn=http/1.1\n"))
        self.assertEqual(openssl_mappings(proxy), ["libcrypto.so.3", "libssl.so.3"])

    def test_an_openssl_that_cannot_be_used_fails_only_configs_with_tls(self):
        plain_path = os.path.join(self.pki.dir, "plain.yaml")
        with open(plain_path, "w") as f:
            f.write(h.simple_config(1))
        tls_path = os.path.join(self.pki.dir, "with-tls.yaml")
        with open(tls_path, "w") as f:
            f.write(h.simple_config(1, upstream={"tls": {"ca_file": self.pki.path("ca.pem")}},
                                    listener={"tls": {"cert_file": self.pki.path("proxy.pem"),
                                                      "key_file": self.pki.path("proxy.key")}}))
        cases = [
            ("/nonexistent/libssl.so.3", "cannot open /nonexistent/libssl.so.3 (OpenSSL 3): "),
            ("libz.so.1", "libz.so.1 is not OpenSSL 3.0 or later"),          # a library, but not OpenSSL
            ("libcrypto.so.3", "libcrypto.so.3 has no SSL_CTX_check_private_key"),  # OpenSSL without libssl
        ]
        for library, why in cases:
            env = dict(os.environ, ONELAYER_OPENSSL_LIBRARY=library)
            out = subprocess.run([h.onelayer_bin(), "--check", "--config", plain_path], capture_output=True,
                                 text=True, env=env)
            self.assertEqual(out.returncode, 0, (library, out))
            out = subprocess.run([h.onelayer_bin(), "--check", "--config", tls_path], capture_output=True,
                                 text=True, env=env)
            self.assertEqual(out.returncode, 1, (library, out))
            self.assertIn("upstreams[0].tls: TLS needs OpenSSL: " + why, out.stderr)
            self.assertIn("listeners[0].tls: TLS needs OpenSSL: " + why, out.stderr)
        # A running proxy whose OpenSSL cannot be opened refuses a reload to TLS and serves on.
        plain = self.start_origin(handler=lambda a: h.respond(200, body=b"plain"))
        os.environ["ONELAYER_OPENSSL_LIBRARY"] = "/nonexistent/libssl.so.3"
        try:
            proxy = self.start_proxy(h.simple_config(plain.port))
        finally:
            del os.environ["ONELAYER_OPENSSL_LIBRARY"]
        ops.rewrite_config(proxy, h.simple_config(plain.port, upstream={"tls": {"ca_file": self.pki.path("ca.pem")}}))
        r = ops.admin(proxy, "POST", "/reload")
        self.assertEqual(r.status, 500, r)
        self.assertIn(b"upstreams[0].tls: TLS needs OpenSSL: cannot open /nonexistent/libssl.so.3", r.body)
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/still").body, b"plain")
        self.assertEqual(openssl_mappings(proxy), [])
        # Named explicitly, the system's libssl serves.
        env = dict(os.environ, ONELAYER_OPENSSL_LIBRARY="libssl.so.3")
        out = subprocess.run([h.onelayer_bin(), "--check", "--config", tls_path], capture_output=True, text=True,
                             env=env)
        self.assertEqual(out.returncode, 0, out)


if __name__ == "__main__":
    unittest.main()
