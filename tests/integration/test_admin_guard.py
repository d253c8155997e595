"""The admin port's state-changing endpoints (docs/security.md "The admin
port"): POST /reload and POST/DELETE /fault need the bearer token of
admin.token_file when one is set (401 without it, nothing changes) and
answer 403 to peers other than loopback unless admin.allow_remote_mutations;
read-only endpoints stay open. The remote peer is real: two network
namespaces joined by a veth pair, made and removed by the test."""

import os
import shutil
import subprocess
import tempfile
import unittest

import harness as h
import ops_helpers as ops
from harness import IntegrationTest

TOKEN = "t0k3n-Qm9uZWxheWVy-7f3a"


def write_token(directory, text):
    path = os.path.join(directory, "admin-token")
    with open(path, "w") as f:
        f.write(text)
    return path


def admin(proxy, method, path, token=None, auth=None):
    headers = [("Connection", "close")]
    if token is not None:
        headers.append(("Authorization", "Bearer " + token))
    if auth is not None:
        headers.append(("Authorization", auth))
    with h.Conn(proxy.admin_port, timeout=5.0) as c:
        return c.request(method, path, headers=headers, host="127.0.0.1")


class AdminTokenTest(IntegrationTest):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="onelayer-admin-guard-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.token_file = write_token(self.dir, TOKEN + "\n")
        self.origin = self.start_origin()
        self.proxy = self.start_proxy(h.simple_config(
            self.origin.port, admin={"listen": "127.0.0.1:0", "token_file": self.token_file}))

    def drills(self):
        r = admin(self.proxy, "GET", "/fault")
        self.assertEqual(r.status, 200, r)
        return r.body.decode()

    def proxied_status(self):
        with h.Conn(self.proxy.port()) as c:
            return c.request("GET", "/item", host="test.local").status

    def test_post_fault_without_the_token_is_401_and_starts_no_drill(self):
        for kw in ({}, {"token": TOKEN[:-1]}, {"token": TOKEN + "x"}, {"auth": "Basic " + TOKEN},
                   {"auth": TOKEN}, {"token": ""}):
            r = admin(self.proxy, "POST", "/fault?upstream=origin&status=503&for=30s", **kw)
            self.assertEqual(r.status, 401, "%s -> %r" % (kw, r))
            self.assertIn("Bearer", r.header("WWW-Authenticate", ""))
        self.assertEqual(self.drills(), "no drill running\n")
        self.assertEqual(self.proxied_status(), 200)

    def test_post_fault_with_the_token_starts_the_drill_and_delete_needs_it_too(self):
        r = admin(self.proxy, "POST", "/fault?upstream=origin&status=503&for=30s", token=TOKEN)
        self.assertEqual(r.status, 200, r)
        self.assertIn("upstream=origin", self.drills())
        self.assertEqual(self.proxied_status(), 503)
        r = admin(self.proxy, "DELETE", "/fault")
        self.assertEqual(r.status, 401, r)
        self.assertIn("upstream=origin", self.drills())
        r = admin(self.proxy, "DELETE", "/fault", auth="bearer   " + TOKEN + "  ")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.drills(), "no drill running\n")

    def test_reload_needs_the_token(self):
        before = ops.value(ops.metrics(self, self.proxy), "onelayer_config_reloads_total", result="ok")
        r = admin(self.proxy, "POST", "/reload")
        self.assertEqual(r.status, 401, r)
        r = admin(self.proxy, "POST", "/reload", token=TOKEN)
        self.assertEqual(r.status, 200, r)
        after = ops.value(ops.metrics(self, self.proxy), "onelayer_config_reloads_total", result="ok")
        self.assertEqual(after, before + 1)

    def test_read_only_endpoints_stay_open_and_never_show_the_token(self):
        for path in ("/healthz", "/ready", "/metrics", "/config", "/fault"):
            r = admin(self.proxy, "GET", path)
            self.assertEqual(r.status, 200, "%s -> %r" % (path, r))
            self.assertNotIn(TOKEN.encode(), r.body, path)
        self.assertIn(b"token_file", admin(self.proxy, "GET", "/config").body)
        admin(self.proxy, "POST", "/fault?upstream=origin&status=503&for=1s", token=TOKEN + "x")
        admin(self.proxy, "POST", "/reload", auth="Bearer " + TOKEN[:5])
        self.assertNotIn(TOKEN[:5], self.proxy.stderr())
        self.assertNotIn(TOKEN[:5], self.proxy.stdout())
        self.assertIn("bearer token does not match", self.proxy.stderr())

    def test_a_new_token_file_takes_effect_on_reload_and_an_unreadable_one_is_refused(self):
        write_token(self.dir, "second-token\n")
        r = admin(self.proxy, "POST", "/reload", token=TOKEN)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(admin(self.proxy, "POST", "/reload", token=TOKEN).status, 401)
        os.remove(self.token_file)
        r = admin(self.proxy, "POST", "/reload", token="second-token")
        self.assertEqual(r.status, 500, r)
        self.assertIn(b"admin.token_file", r.body)
        # The old token still guards the port.
        self.assertEqual(admin(self.proxy, "POST", "/reload", token=TOKEN).status, 401)
        self.assertEqual(admin(self.proxy, "DELETE", "/fault", token="second-token").status, 200)


class AdminTokenConfigTest(IntegrationTest):
    def test_a_missing_or_empty_token_file_is_a_config_error(self):
        d = tempfile.mkdtemp(prefix="onelayer-admin-guard-")
        self.addCleanup(shutil.rmtree, d, True)
        for path, why in ((os.path.join(d, "absent"), "cannot read"), (write_token(d, " \n"), "holds no token")):
            cfg = os.path.join(d, "onelayer.yaml")
            with open(cfg, "w") as f:
                f.write(h.simple_config(9, admin={"listen": "127.0.0.1:0", "token_file": path}))
            code, _, err = h.run_onelayer(["--config", cfg, "--check"])
            self.assertEqual(code, 1, err)
            self.assertIn("admin.token_file", err)
            self.assertIn(why, err)


class Namespaces:
    """Two network namespaces, `server` and `client`, joined by a veth
    pair: 10.77.0.1/24 in `server`, 10.77.0.2/24 in `client`. No address
    is added outside them."""

    def __init__(self):
        tag = "%d" % os.getpid()
        self.server = "ol-srv-" + tag
        self.client = "ol-cli-" + tag
        self.made = []
        veth_a, veth_b = "olva" + tag[-8:], "olvb" + tag[-8:]
        steps = [
            ["ip", "netns", "add", self.server],
            ["ip", "netns", "add", self.client],
            ["ip", "link", "add", veth_a, "netns", self.server, "type", "veth", "peer", "name", veth_b,
             "netns", self.client],
            ["ip", "-n", self.server, "addr", "add", "10.77.0.1/24", "dev", veth_a],
            ["ip", "-n", self.client, "addr", "add", "10.77.0.2/24", "dev", veth_b],
            ["ip", "-n", self.server, "link", "set", veth_a, "up"],
            ["ip", "-n", self.client, "link", "set", veth_b, "up"],
            ["ip", "-n", self.server, "link", "set", "lo", "up"],
            ["ip", "-n", self.client, "link", "set", "lo", "up"],
        ]
        for step in steps:
            r = subprocess.run(step, capture_output=True, text=True)
            if r.returncode != 0:
                self.remove()
                raise OSError("%s: %s" % (" ".join(step), r.stderr.strip()))
            if step[1:3] == ["netns", "add"]:
                self.made.append(step[3])

    def remove(self):
        for ns in self.made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.made = []


class NamespacedProxy(h.Proxy):
    def __init__(self, netns, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.netns = netns

    def command(self):
        return ["ip", "netns", "exec", self.netns] + super().command()


class AdminRemotePeerTest(IntegrationTest):
    """A proxy in the `server` namespace with its admin port on 0.0.0.0,
    called from the `client` namespace (a non-loopback peer) and from
    loopback inside its own namespace."""

    def setUp(self):
        if not shutil.which("ip") or not shutil.which("curl"):
            self.fail_or_skip("ip (iproute2) and curl are needed")
        try:
            self.ns = Namespaces()
        except OSError as e:
            self.fail_or_skip("cannot build the network namespaces: %s" % e)
        self.addCleanup(self.ns.remove)
        self.dir = tempfile.mkdtemp(prefix="onelayer-admin-guard-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.token_file = write_token(self.dir, TOKEN)

    def fail_or_skip(self, why):
        if os.environ.get("CI") == "true":
            self.fail(why + " (CI=true: this test must run)")
        self.skipTest(why)

    def start_namespaced(self, allow_remote):
        cfg = h.simple_config(9, admin={"listen": "0.0.0.0:0", "token_file": self.token_file,
                                        "allow_remote_mutations": allow_remote})
        proxy = NamespacedProxy(self.ns.server, cfg)
        self.addCleanup(proxy.cleanup)
        self.addCleanup(self._print_diagnostics_on_failure, proxy)
        self.addCleanup(self._stop_proxy, proxy, True)
        return proxy.start()

    def curl(self, netns, method, url, token=None):
        cmd = ["ip", "netns", "exec", netns, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
               "--max-time", "5", "-X", method]
        if token:
            cmd += ["-H", "Authorization: Bearer " + token]
        r = subprocess.run(cmd + [url], capture_output=True, text=True, timeout=10)
        return int(r.stdout or 0)

    def test_mutations_from_a_remote_peer_are_403_even_with_the_token(self):
        proxy = self.start_namespaced(False)
        remote = "http://10.77.0.1:%d" % proxy.admin_port
        local = "http://127.0.0.1:%d" % proxy.admin_port
        self.assertEqual(self.curl(self.ns.client, "POST", remote + "/fault?upstream=origin&status=503&for=30s",
                                   TOKEN), 403)
        self.assertEqual(self.curl(self.ns.client, "POST", remote + "/reload", TOKEN), 403)
        self.assertEqual(self.curl(self.ns.client, "DELETE", remote + "/fault", TOKEN), 403)
        # Read-only endpoints answer the remote peer.
        self.assertEqual(self.curl(self.ns.client, "GET", remote + "/healthz"), 200)
        self.assertEqual(self.curl(self.ns.client, "GET", remote + "/fault"), 200)
        self.assertIn("refused: state-changing endpoints answer loopback peers only", proxy.stderr())
        self.assertIn("10.77.0.2", proxy.stderr())
        # No drill was started; from loopback, with the token, one is.
        r = subprocess.run(["ip", "netns", "exec", self.ns.server, "curl", "-s", "--max-time", "5",
                            local + "/fault"], capture_output=True, text=True, timeout=10)
        self.assertEqual(r.stdout, "no drill running\n")
        self.assertEqual(self.curl(self.ns.server, "POST", local + "/fault?upstream=origin&status=503&for=30s"),
                         401)
        self.assertEqual(self.curl(self.ns.server, "POST", local + "/fault?upstream=origin&status=503&for=30s",
                                   TOKEN), 200)

    def test_allow_remote_mutations_lets_a_remote_peer_with_the_token_in(self):
        proxy = self.start_namespaced(True)
        remote = "http://10.77.0.1:%d" % proxy.admin_port
        self.assertEqual(self.curl(self.ns.client, "POST", remote + "/fault?upstream=origin&status=503&for=30s"),
                         401)
        self.assertEqual(self.curl(self.ns.client, "POST", remote + "/fault?upstream=origin&status=503&for=30s",
                                   TOKEN), 200)


if __name__ == "__main__":
    unittest.main()
