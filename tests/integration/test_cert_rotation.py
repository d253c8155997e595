"""Certificates rotate without a restart (docs/tls.md "Rotating
certificates"): the files of a TLS listener and of a TLS upstream are
replaced under a running proxy the way cert-manager and editors do it (a
new file renamed over the old); new handshakes see the new set within a
second, connections already open keep working, and a broken replacement
keeps the old set and says why, on a file change and on SIGHUP alike."""

import os
import shutil
import signal
import socket
import ssl
import tempfile
import time
import unittest

import harness as h
import tls_helpers as th

ROTATION_BOUND_S = 1.0


class RotationPki(th.Pki):
    """The test PKI plus a second certificate for proxy.test (CN
    rotated.test), so a handshake tells which one it got."""

    def __init__(self):
        super().__init__()
        self._leaf("rotated", "rotated.test", "ca", "subjectAltName=DNS:proxy.test,IP:127.0.0.1\n"
                   "extendedKeyUsage=serverAuth\n")


def replace(path, data):
    """Writes `data` next to `path` and renames it over `path` (atomic)."""
    tmp = os.path.join(os.path.dirname(path), ".new-" + os.path.basename(path))
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, path)


def read(path):
    with open(path, "rb") as f:
        return f.read()


class ListenerRotationTest(th.PkiTest):
    @classmethod
    def setUpClass(cls):
        cls.pki = RotationPki()

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="onelayer-rotation-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.cert = os.path.join(self.dir, "server.pem")
        self.key = os.path.join(self.dir, "server.key")
        shutil.copy(self.pki.path("proxy.pem"), self.cert)
        shutil.copy(self.pki.path("proxy.key"), self.key)
        self.origin = self.start_origin()
        self.proxy = self.start_proxy(h.simple_config(self.origin.port, listener={"tls": {
            "cert_file": self.cert, "key_file": self.key}}))

    def connect(self):
        ctx = ssl.create_default_context(cafile=self.pki.path("ca.pem"))
        ctx.set_alpn_protocols(["http/1.1"])
        raw = socket.create_connection(("127.0.0.1", self.proxy.port()), timeout=5)
        s = ctx.wrap_socket(raw, server_hostname="proxy.test")
        self.addCleanup(s.close)
        return s

    def served_cn(self):
        s = self.connect()
        subject = dict(x[0] for x in s.getpeercert()["subject"])
        s.close()
        return subject["commonName"]

    def get_on(self, s, target="/x"):
        s.sendall(h.build_request("GET", target))
        return h.read_response(h._Reader(s.recv))

    def rotate_and_time(self, name):
        """Replaces key then certificate with `name`'s; seconds until a new
        handshake presents it (None: not within the bound)."""
        replace(self.key, read(self.pki.path(name + ".key")))
        replace(self.cert, read(self.pki.path(name + ".pem")))
        start = time.monotonic()
        while time.monotonic() - start < ROTATION_BOUND_S + 1.0:
            if self.served_cn() == name + ".test":
                return time.monotonic() - start
            time.sleep(0.02)
        return None

    def test_replaced_files_are_used_for_new_handshakes_within_a_second(self):
        self.assertEqual(self.served_cn(), "proxy.test")
        before = self.connect()
        self.assertEqual(self.get_on(before).status, 200)
        took = self.rotate_and_time("rotated")
        self.assertIsNotNone(took, "the new certificate was not served\n" + self.proxy.stderr())
        self.assertLess(took, ROTATION_BOUND_S)
        self.assertIn("certificate files changed; new handshakes use them", self.proxy.stderr())
        # A connection made before goes on with the certificate it had.
        self.assertEqual(self.get_on(before).status, 200)
        subject = dict(x[0] for x in before.getpeercert()["subject"])
        self.assertEqual(subject["commonName"], "proxy.test")

    def test_a_broken_replacement_keeps_the_old_certificate_and_logs_why(self):
        took = self.rotate_and_time("rotated")
        self.assertIsNotNone(took)
        # A certificate whose key is another one's, then a truncated file.
        replace(self.cert, read(self.pki.path("proxy.pem")))
        self.assertTrue(h.wait_until(lambda: "changed certificate files not used" in self.proxy.stderr(),
                                     timeout=2), self.proxy.stderr())
        self.assertIn("is not the key of", self.proxy.stderr())
        self.assertEqual(self.served_cn(), "rotated.test")
        replace(self.cert, read(self.pki.path("rotated.pem"))[:100])
        self.assertTrue(h.wait_until(lambda: self.proxy.stderr().count("changed certificate files not used") >= 2,
                                     timeout=2), self.proxy.stderr())
        self.assertEqual(self.served_cn(), "rotated.test")
        r = self.get_on(self.connect())
        self.assertEqual(r.status, 200)
        # SIGHUP with the broken file: the reload is rejected, the set stays.
        self.proxy.signal(signal.SIGHUP)
        self.assertTrue(h.wait_until(lambda: "reload rejected" in self.proxy.stderr(), timeout=3))
        self.assertEqual(self.served_cn(), "rotated.test")
        # Mended: used again.
        replace(self.cert, read(self.pki.path("proxy.pem")))
        replace(self.key, read(self.pki.path("proxy.key")))
        self.assertTrue(h.wait_until(lambda: self.served_cn() == "proxy.test", timeout=2))

    def test_a_kubernetes_style_data_link_swap_is_seen(self):
        # A secret volume: server.pem -> ..data/server.pem, ..data -> a dated
        # directory; an update renames a new ..data link over the old one.
        vol = os.path.join(self.dir, "vol")
        os.mkdir(vol)
        first = os.path.join(vol, "..2026_1")
        os.mkdir(first)
        shutil.copy(self.pki.path("proxy.pem"), os.path.join(first, "server.pem"))
        shutil.copy(self.pki.path("proxy.key"), os.path.join(first, "server.key"))
        os.symlink("..2026_1", os.path.join(vol, "..data"))
        for name in ("server.pem", "server.key"):
            os.symlink(os.path.join("..data", name), os.path.join(vol, name))
        proxy = self.start_proxy(h.simple_config(self.origin.port, listener={"tls": {
            "cert_file": os.path.join(vol, "server.pem"), "key_file": os.path.join(vol, "server.key")}}))
        self.proxy = proxy
        self.assertEqual(self.served_cn(), "proxy.test")
        second = os.path.join(vol, "..2026_2")
        os.mkdir(second)
        shutil.copy(self.pki.path("rotated.pem"), os.path.join(second, "server.pem"))
        shutil.copy(self.pki.path("rotated.key"), os.path.join(second, "server.key"))
        os.symlink("..2026_2", os.path.join(vol, "..data_tmp"))
        os.rename(os.path.join(vol, "..data_tmp"), os.path.join(vol, "..data"))
        start = time.monotonic()
        self.assertTrue(h.wait_until(lambda: self.served_cn() == "rotated.test", timeout=2), proxy.stderr())
        self.assertLess(time.monotonic() - start, ROTATION_BOUND_S)


class UpstreamRotationTest(th.PkiTest):
    def test_a_replaced_upstream_ca_file_is_used_for_new_connections(self):
        n = th.Nginx(self.pki)
        self.addCleanup(n.stop)
        d = tempfile.mkdtemp(prefix="onelayer-rotation-")
        self.addCleanup(shutil.rmtree, d, True)
        ca = os.path.join(d, "upstream-ca.pem")
        shutil.copy(self.pki.path("other-ca.pem"), ca)
        proxy = self.start_proxy(h.simple_config(n.port, upstream={
            "tls": {"sni": "origin.test", "ca_file": ca}, "pool": {"max_idle": 0}}))

        def status():
            with h.Conn(proxy.port()) as c:
                return c.request("GET", "/x").status

        self.assertEqual(status(), 502)  # the wrong CA: upstream_tls
        replace(ca, read(self.pki.path("ca.pem")))
        start = time.monotonic()
        self.assertTrue(h.wait_until(lambda: status() == 200, timeout=2), proxy.stderr())
        self.assertLess(time.monotonic() - start, ROTATION_BOUND_S)
        self.assertIn("upstream origin: certificate files changed", proxy.stderr())


if __name__ == "__main__":
    unittest.main()
