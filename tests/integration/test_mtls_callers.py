"""Mutual TLS on listeners and caller identities (docs/tls.md "Callers"):
a listener with client_ca_file asks for a client certificate (requires it
with require_client_cert), takes the verified certificate's first URI SAN,
else first DNS SAN, else subject CN as the caller, refuses callers that
allowed_callers or the matching routes' callers leave out with 403
caller_not_allowed (gRPC: PERMISSION_DENIED) before any upstream is called,
and sends the identity upstream in caller_header, never a client's copy.
Every certificate is made at test time with the openssl CLI; the clients
are curl, Python's ssl module and python3-grpcio."""

import os
import socket
import ssl
import subprocess
import unittest

import grpc_peers as gp
import harness as h
import ops_helpers as ops
import tls_helpers as th

WEB = "spiffe://cluster/ns/web/sa/frontend"
ORDERS = "spiffe://cluster/ns/orders/sa/api"
OUTSIDER = "spiffe://elsewhere/ns/web/sa/frontend"
HEADER = "x-onelayer-caller"


class CallerPki(th.Pki):
    """The test PKI plus client certificates: SPIFFE URI SANs (with a DNS
    SAN after them), a DNS SAN alone, a subject CN alone, an outsider, an
    expired one and one from the other CA."""

    def __init__(self):
        super().__init__()
        client = "extendedKeyUsage=clientAuth\n"
        self._leaf("web", "web-cn.test", "ca", "subjectAltName=URI:%s,DNS:web.test\n%s" % (WEB, client))
        self._leaf("orders", "orders-cn.test", "ca", "subjectAltName=URI:%s\n%s" % (ORDERS, client))
        self._leaf("outsider", "outsider.test", "ca", "subjectAltName=URI:%s\n%s" % (OUTSIDER, client))
        self._leaf("billing", "billing-cn.test", "ca", "subjectAltName=DNS:billing.test\n%s" % client)
        self._leaf("cnonly", "cn-only.test", "ca", client)
        self._leaf("stranger", "stranger.test", "other-ca", "subjectAltName=URI:%s\n%s" % (WEB, client))
        self._expired("expired", "ca", "subjectAltName=URI:%s\n%s" % (WEB, client))

    def _expired(self, name, ca, ext):
        with open(os.path.join(self.dir, name + ".ext"), "w") as f:
            f.write(ext)
        th._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name, cwd=self.dir)
        # Not after one day before not before: expired since it was made.
        th._openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
                    "-CAcreateserial", "-out", name + ".pem", "-days", "-1", "-extfile", name + ".ext",
                    cwd=self.dir)


def listener_tls(pki, require=False):
    return {"cert_file": pki.path("proxy.pem"), "key_file": pki.path("proxy.key"),
            "client_ca_file": pki.path("ca.pem"), "require_client_cert": require}


class CallerTest(h.IntegrationTest):
    @classmethod
    def setUpClass(cls):
        cls.pki = CallerPki()

    @classmethod
    def tearDownClass(cls):
        cls.pki.cleanup()

    def curl(self, proxy, path="/", cert=None, method="GET", headers=(), http2=False):
        """(curl exit code, HTTP status, x-onelayer-error)."""
        cmd = [th.need("curl"), "-s", "-o", "/dev/null", "-D", "-", "--max-time", "5",
               "--cacert", self.pki.path("ca.pem"), "--resolve", "proxy.test:%d:127.0.0.1" % proxy.port(),
               "-X", method, "--http2" if http2 else "--http1.1"]
        if cert:
            cmd += ["--cert", self.pki.path(cert + ".pem"), "--key", self.pki.path(cert + ".key")]
        for name, value in headers:
            cmd += ["-H", "%s: %s" % (name, value)]
        r = subprocess.run(cmd + ["https://proxy.test:%d%s" % (proxy.port(), path)], capture_output=True,
                           text=True, timeout=15)
        status, error = 0, None
        for line in r.stdout.splitlines():
            if line.startswith("HTTP/"):
                status = int(line.split()[1])
            elif line.lower().startswith("x-onelayer-error:"):
                error = line.split(":", 1)[1].strip()
        return r.returncode, status, error

    def python_request(self, proxy, cert, path="/", headers=(), method="GET", **kw):
        ctx = ssl.create_default_context(cafile=self.pki.path("ca.pem"))
        ctx.set_alpn_protocols(["http/1.1"])
        if cert:
            ctx.load_cert_chain(self.pki.path(cert + ".pem"), self.pki.path(cert + ".key"))
        raw = socket.create_connection(("127.0.0.1", proxy.port()), timeout=10)
        with ctx.wrap_socket(raw, server_hostname="proxy.test") as s:
            s.sendall(h.build_request(method, path, headers=list(headers) + [("Connection", "close")], **kw))
            return h.read_response(h._Reader(s.recv), method=method)


class AllowedCallersTest(CallerTest):
    """allowed_callers on the listener, callers on a route, caller_header."""

    def setUp(self):
        self.origin = self.start_origin()
        routes = [ops.route("orders-write", match={"path_prefix": "/orders", "methods": ["POST"],
                                                   "callers": [WEB]}),
                  ops.route("read", match={"methods": ["GET"]})]
        self.proxy = self.start_proxy(ops.config(
            [ops.listener("main", routes, tls=listener_tls(self.pki),
                          allowed_callers=["spiffe://cluster/ns/*", "billing.test", "cn-only.test"],
                          caller_header=HEADER)],
            [ops.upstream("origin", [self.origin.endpoint])]))

    def test_identity_from_uri_dns_or_cn_goes_upstream_and_a_forged_copy_never_does(self):
        cases = [("web", WEB), ("orders", ORDERS), ("billing", "billing.test"), ("cnonly", "cn-only.test")]
        for cert, identity in cases:
            code, status, _ = self.curl(self.proxy, "/x", cert, headers=[(HEADER, "spiffe://cluster/ns/root")])
            self.assertEqual((code, status), (0, 200), cert)
        arrivals = self.origin.wait_for(len(cases))
        self.assertEqual([a.header_list(HEADER) for a in arrivals], [[i] for _, i in cases])
        r = self.python_request(self.proxy, "web", headers=[("X-OneLayer-Caller", "forged")])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.origin.wait_for(len(cases) + 1)[-1].header_list(HEADER), [WEB])
        records = ops.access_records(self.proxy, len(cases) + 1)
        self.assertEqual(records[0].get("caller"), WEB, records[0])

    def test_a_caller_outside_allowed_callers_gets_403_and_reaches_no_upstream(self):
        code, status, error = self.curl(self.proxy, "/x", "outsider")
        self.assertEqual((code, status, error), (0, 403, "caller_not_allowed"))
        r = self.python_request(self.proxy, None, "/x", headers=[(HEADER, WEB)])
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.header("x-onelayer-error"), "caller_not_allowed")
        self.assertNoArrivals(self.origin)

    def test_route_callers_refuse_other_callers_with_403(self):
        code, status, error = self.curl(self.proxy, "/orders/1", "orders", method="POST")
        self.assertEqual((code, status, error), (0, 403, "caller_not_allowed"))
        self.assertEqual(self.origin.count(), 0)
        code, status, _ = self.curl(self.proxy, "/orders/1", "web", method="POST")
        self.assertEqual((code, status), (0, 200))
        self.assertEqual(self.origin.wait_for(1)[0].header(HEADER), WEB)
        # A request no route would take stays a 404.
        code, status, error = self.curl(self.proxy, "/x", "web", method="PUT")
        self.assertEqual((status, error), (404, "no_route"))

    def test_http2_clients_are_held_to_the_same_rules(self):
        code, status, _ = self.curl(self.proxy, "/x", "web", http2=True, headers=[(HEADER, "forged")])
        self.assertEqual((code, status), (0, 200))
        self.assertEqual(self.origin.wait_for(1)[0].header_list(HEADER), [WEB])
        code, status, error = self.curl(self.proxy, "/x", "outsider", http2=True)
        self.assertEqual((code, status, error), (0, 403, "caller_not_allowed"))
        self.assertEqual(self.origin.count(), 1)

    def test_expired_and_other_ca_certificates_end_the_handshake(self):
        for cert, why in (("expired", "certificate has expired"), ("stranger", "unable to get local issuer")):
            code, status, _ = self.curl(self.proxy, "/x", cert)
            self.assertNotEqual(code, 0, cert)
            self.assertEqual(status, 0, cert)
            with self.assertRaises((OSError, h.IncompleteMessage, h.ProtocolError)):
                self.python_request(self.proxy, cert, "/x")
            h.wait_until(lambda: why in self.proxy.stderr(), timeout=5)
            self.assertIn(why, self.proxy.stderr())
        self.assertEqual(self.origin.count(), 0)


class OptionalAndRequiredTest(CallerTest):
    def proxy_with(self, origin, require, **listener):
        return self.start_proxy(ops.config(
            [ops.listener("main", [ops.route("all")], tls=listener_tls(self.pki, require), **listener)],
            [ops.upstream("origin", [origin.endpoint])]))

    def test_optional_certificate_lets_a_client_without_one_in_without_an_identity(self):
        origin = self.start_origin()
        proxy = self.proxy_with(origin, False, caller_header=HEADER)
        code, status, _ = self.curl(proxy, "/x", None, headers=[(HEADER, WEB)])
        self.assertEqual((code, status), (0, 200))
        code, status, _ = self.curl(proxy, "/x", "orders")
        self.assertEqual((code, status), (0, 200))
        a = origin.wait_for(2)
        self.assertEqual([x.header_list(HEADER) for x in a], [[], [ORDERS]])

    def test_a_caller_header_sent_as_a_trailer_is_removed_too(self):
        origin = self.start_origin()
        proxy = self.proxy_with(origin, False, caller_header=HEADER)
        r = self.python_request(proxy, "web", "/up", method="POST", body=b"abc", chunked=True,
                                trailers=[(HEADER, "forged"), ("x-kept", "1")])
        self.assertEqual(r.status, 200, r)
        (a,) = origin.wait_for(1)
        self.assertEqual(a.header_list(HEADER), [WEB])
        self.assertEqual([n.lower() for n, _ in a.trailers], ["x-kept"])

    def test_a_resumed_session_keeps_its_identity(self):
        origin = self.start_origin()
        proxy = self.proxy_with(origin, False, caller_header=HEADER)
        ctx = ssl.create_default_context(cafile=self.pki.path("ca.pem"))
        ctx.set_alpn_protocols(["http/1.1"])
        ctx.load_cert_chain(self.pki.path("orders.pem"), self.pki.path("orders.key"))
        session = None
        reused = []
        for _ in range(2):
            raw = socket.create_connection(("127.0.0.1", proxy.port()), timeout=10)
            with ctx.wrap_socket(raw, server_hostname="proxy.test", session=session) as s:
                s.sendall(h.build_request("GET", "/r", headers=[("Connection", "close")]))
                self.assertEqual(h.read_response(h._Reader(s.recv)).status, 200)
                reused.append(s.session_reused)
                session = s.session
        self.assertEqual(reused, [False, True])
        self.assertEqual([a.header_list(HEADER) for a in origin.wait_for(2)], [[ORDERS], [ORDERS]])

    def test_required_certificate_ends_a_handshake_without_one(self):
        origin = self.start_origin()
        proxy = self.proxy_with(origin, True)
        code, status, _ = self.curl(proxy, "/x", None)
        self.assertNotEqual(code, 0)
        self.assertEqual(status, 0)
        code, status, _ = self.curl(proxy, "/x", "web")
        self.assertEqual((code, status), (0, 200))
        self.assertEqual(origin.count(), 1)

    def test_callers_without_client_ca_file_are_a_config_error(self):
        cfg = ops.config([ops.listener("main", [ops.route("all", match={"callers": [WEB]})],
                                       tls={"cert_file": self.pki.path("proxy.pem"),
                                            "key_file": self.pki.path("proxy.key")},
                                       allowed_callers=["spiffe://a/*"])],
                         [ops.upstream("origin", ["127.0.0.1:9"])])
        path = os.path.join(self.pki.dir, "no-ca.yaml")
        with open(path, "w") as f:
            f.write(cfg)
        code, _, err = h.run_onelayer(["--config", path, "--check"])
        self.assertEqual(code, 1, err)
        self.assertIn("allowed_callers needs tls.client_ca_file", err)
        self.assertIn("match.callers needs tls.client_ca_file", err)


class GrpcCallerTest(CallerTest):
    def test_a_grpc_caller_not_allowed_gets_permission_denied(self):
        server = gp.GrpcServer()
        self.addCleanup(server.stop)
        proxy = self.start_proxy(ops.config(
            [ops.listener("main", [ops.route("grpc")], protocols=["http1", "h2c"], tls=listener_tls(self.pki),
                          allowed_callers=[WEB], caller_header=HEADER)],
            [ops.upstream("origin", ["127.0.0.1:%d" % server.port], protocol="h2c")]))

        def call(cert):
            with open(self.pki.path("ca.pem"), "rb") as f:
                root = f.read()
            with open(self.pki.path(cert + ".pem"), "rb") as f:
                chain = f.read()
            with open(self.pki.path(cert + ".key"), "rb") as f:
                key = f.read()
            creds = gp.grpc.ssl_channel_credentials(root_certificates=root, private_key=key,
                                                    certificate_chain=chain)
            channel = gp.grpc.secure_channel("127.0.0.1:%d" % proxy.port(), creds, options=[
                ("grpc.ssl_target_name_override", "proxy.test"), ("grpc.enable_retries", 0)])
            self.addCleanup(channel.close)
            try:
                channel.unary_unary(gp.UNARY).with_call(b"req", timeout=5)
                return gp.grpc.StatusCode.OK
            except gp.grpc.RpcError as e:
                return e.code()

        self.assertEqual(call("orders"), gp.grpc.StatusCode.PERMISSION_DENIED)
        self.assertEqual(server.count(), 0)
        self.assertEqual(call("web"), gp.grpc.StatusCode.OK)
        self.assertEqual(server.count(), 1)


if __name__ == "__main__":
    unittest.main()
