"""Making inner peers obey (docs/inner-peers-haproxy.md): a real HAProxy
inside a chain, client -> onelayer (owner, 3 attempts) -> HAProxy
(`retry-on 503`, `retries 3`) -> an origin that answers 503 to everything.
Without the rule every owner attempt becomes four at the origin; with
`http-request disable-l7-retry if { req.hdr(x-retry-owner) -m found }` the
owner's attempts are the only ones. HAProxy is a Debian package that
deploy/install-deps.sh installs for the test run."""

import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import harness as h
import ops_helpers as ops
from harness import IntegrationTest

RETRY = {"max_attempts": 3, "backoff": {"base": "1ms", "cap": "5ms", "jitter": "none"}}
AMPLE_BUDGET = {"retry_budget": {"ratio": 1.0, "min_per_second": 1000}}
RULE = "http-request disable-l7-retry if { req.hdr(x-retry-owner) -m found }"


def haproxy_config(port, origin_port, with_rule):
    return "\n".join([
        "global",
        "  maxconn 256",
        "defaults",
        "  mode http",
        "  timeout connect 1s",
        "  timeout client 10s",
        "  timeout server 10s",
        "  retries 3",
        "frontend fe",
        "  bind 127.0.0.1:%d" % port,
        "  default_backend be",
        "backend be",
        "  retry-on 503 conn-failure empty-response response-timeout",
        ("  " + RULE) if with_rule else "  # no rule: HAProxy retries owned requests too",
        "  server origin 127.0.0.1:%d" % origin_port,
        ""])


def unused_port():
    # HAProxy cannot report a port-0 bind: take one the kernel hands out and
    # let HAProxy bind it right after (start() retries if another took it).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HAProxy:
    def __init__(self, test, origin_port, with_rule):
        self.dir = tempfile.mkdtemp(prefix="onelayer-haproxy-")
        test.addCleanup(shutil.rmtree, self.dir, True)
        self.proc = None
        test.addCleanup(self.stop)
        for _ in range(5):
            self.port = unused_port()
            path = os.path.join(self.dir, "haproxy.cfg")
            with open(path, "w") as f:
                f.write(haproxy_config(self.port, origin_port, with_rule))
            self.log = open(os.path.join(self.dir, "log"), "wb")
            self.proc = subprocess.Popen(["haproxy", "-db", "-f", path], stdin=subprocess.DEVNULL,
                                         stdout=self.log, stderr=subprocess.STDOUT)
            if self._wait_listening():
                return
            self.stop()
        raise AssertionError("haproxy did not start: " + self.output())

    def _wait_listening(self, timeout=5.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return True
            except OSError:
                time.sleep(0.05)
        return False

    def output(self):
        with open(os.path.join(self.dir, "log"), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if getattr(self, "log", None):
            self.log.close()
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class HAProxyChainTest(IntegrationTest):
    def setUp(self):
        if not shutil.which("haproxy"):
            self.skipTest("haproxy is not installed (deploy/install-deps.sh test installs it)")

    def arrivals_per_request(self, with_rule, requests=4):
        origin = self.start_origin(default=h.respond(503, body=b"down"))
        inner = HAProxy(self, origin.port, with_rule)
        owner = self.start_proxy(h.simple_config(inner.port, retry=RETRY, timeout="10s",
                                                 upstream=AMPLE_BUDGET, layer_id="outer"))
        for _ in range(requests):
            with h.Conn(owner.port()) as c:
                r = c.request("GET", "/")
            self.assertEqual(r.status, 503)
            self.assertEqual(r.header("x-retry-exhausted"), "3")
        time.sleep(0.2)
        text = ops.metrics(self, owner)
        self.assertEqual(ops.value(text, "onelayer_upstream_attempts_total", route="default",
                                   upstream="origin"), 3 * requests)
        arrivals = origin.snapshot()
        self.assertTrue(all(a.header("x-retry-owner") == "outer" for a in arrivals))
        return len(arrivals) / requests

    def test_without_the_rule_haproxy_multiplies_the_owners_attempts(self):
        self.assertEqual(self.arrivals_per_request(with_rule=False), 12.0)

    def test_with_the_rule_the_owner_is_the_only_layer_that_retries(self):
        self.assertEqual(self.arrivals_per_request(with_rule=True), 3.0)

    def test_the_rule_leaves_requests_nobody_owns_to_haproxy(self):
        origin = self.start_origin(default=h.respond(503, body=b"down"))
        inner = HAProxy(self, origin.port, with_rule=True)
        with h.Conn(inner.port) as c:
            self.assertEqual(c.request("GET", "/").status, 503)
        self.assertEqual(len(origin.wait_for(4)), 4, "HAProxy still retries what no outer layer owns")


if __name__ == "__main__":
    unittest.main()
