"""Making inner peers obey (docs/peer-haproxy.md, docs/peer-nginx.md), with
the real proxies inside a chain: client -> onelayer (owner, 3 attempts) ->
HAProxy or NGINX -> an origin that answers 503 to everything.

* HAProxy with `retry-on 503` and `retries 3`: without the rule every owner
  attempt becomes four at the origin; with
  `http-request disable-l7-retry if { req.hdr(x-retry-owner) -m found }` the
  owner's attempts are the only ones.
* NGINX with `proxy_next_upstream ... http_503` over three servers: every
  owner attempt becomes three, unless owned requests are rewritten to a
  location with `proxy_next_upstream off`.

Both are Debian packages that deploy/install-deps.sh installs for tests."""

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


class PeerProcess:
    """A proxy under test that binds a fixed port: ``command(dir, config_path)``
    and ``config(port)`` come from the subclass."""

    name = "peer"

    def __init__(self, test):
        self.dir = tempfile.mkdtemp(prefix="onelayer-%s-" % self.name)
        test.addCleanup(shutil.rmtree, self.dir, True)
        self.proc = None
        self.log = None
        test.addCleanup(self.stop)
        for _ in range(5):
            self.port = unused_port()
            path = os.path.join(self.dir, self.name + ".conf")
            with open(path, "w") as f:
                f.write(self.config(self.port))
            self.log = open(os.path.join(self.dir, "log"), "wb")
            self.proc = subprocess.Popen(self.command(path), stdin=subprocess.DEVNULL,
                                         stdout=self.log, stderr=subprocess.STDOUT)
            if self._wait_listening():
                return
            self.stop()
        raise AssertionError("%s did not start: %s" % (self.name, self.output()))

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
        if self.log:
            self.log.close()
            self.log = None
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class HAProxy(PeerProcess):
    name = "haproxy"

    def __init__(self, test, origin_port, with_rule):
        self.origin_port, self.with_rule = origin_port, with_rule
        super().__init__(test)

    def config(self, port):
        return haproxy_config(port, self.origin_port, self.with_rule)

    def command(self, path):
        return ["haproxy", "-db", "-f", path]


class NGINX(PeerProcess):
    """NGINX passing each request to the next of three servers (all the same
    origin) on 503, as docs/peer-nginx.md shows; with `owned_location`,
    requests carrying x-retry-owner go to a location without retries."""

    name = "nginx"

    def __init__(self, test, origin_port, owned_location):
        self.origin_port, self.owned_location = origin_port, owned_location
        super().__init__(test)

    def config(self, port):
        d = self.dir
        os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
        owned = ""
        redirect = ""
        if self.owned_location:
            redirect = """
      if ($http_x_retry_owner) {
        rewrite ^ /__owned$uri last;
      }"""
            owned = """
    location /__owned/ {
      internal;
      rewrite ^/__owned(/.*)$ $1 break;
      proxy_pass http://origin;
      proxy_next_upstream off;
    }"""
        return ("%s\ndaemon off;\nmaster_process on;\nworker_processes 1;\npid %s/nginx.pid;\n"
                "error_log %s/error.log warn;\nevents { worker_connections 256; }\nhttp {\n"
                "  client_body_temp_path %s/tmp/body;\n  proxy_temp_path %s/tmp/proxy;\n"
                "  fastcgi_temp_path %s/tmp/fastcgi;\n  uwsgi_temp_path %s/tmp/uwsgi;\n"
                "  scgi_temp_path %s/tmp/scgi;\n  access_log off;\n"
                "  upstream origin {\n%s  }\n"
                "  server {\n    listen 127.0.0.1:%d;\n    location / {%s\n      proxy_pass http://origin;\n"
                "      proxy_next_upstream error timeout http_503;\n    }%s\n  }\n}\n") % (
            "user root;" if os.geteuid() == 0 else "", d, d, d, d, d, d, d,
            "    server 127.0.0.1:%d max_fails=0;\n" % self.origin_port * 3, port, redirect, owned)

    def command(self, path):
        return ["nginx", "-p", self.dir + "/", "-c", path, "-e", os.path.join(self.dir, "error.log")]


class ChainTest(IntegrationTest):
    peer = None

    def setUp(self):
        if not shutil.which(self.peer):
            self.skipTest("%s is not installed (deploy/install-deps.sh test installs it)" % self.peer)

    def arrivals_per_request(self, make_inner, requests=4):
        """Origin arrivals per client request through owner -> inner -> origin."""
        origin = self.start_origin(default=h.respond(503, body=b"down"))
        inner = make_inner(origin.port)
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


class HAProxyChainTest(ChainTest):
    peer = "haproxy"

    def test_without_the_rule_haproxy_multiplies_the_owners_attempts(self):
        self.assertEqual(self.arrivals_per_request(lambda port: HAProxy(self, port, False)), 12.0)

    def test_with_the_rule_the_owner_is_the_only_layer_that_retries(self):
        self.assertEqual(self.arrivals_per_request(lambda port: HAProxy(self, port, True)), 3.0)

    def test_the_rule_leaves_requests_nobody_owns_to_haproxy(self):
        origin = self.start_origin(default=h.respond(503, body=b"down"))
        inner = HAProxy(self, origin.port, with_rule=True)
        with h.Conn(inner.port) as c:
            self.assertEqual(c.request("GET", "/").status, 503)
        self.assertEqual(len(origin.wait_for(4)), 4, "HAProxy still retries what no outer layer owns")


class NGINXChainTest(ChainTest):
    peer = "nginx"

    def test_without_an_owned_location_nginx_multiplies_the_owners_attempts(self):
        self.assertEqual(self.arrivals_per_request(lambda port: NGINX(self, port, False)), 9.0)

    def test_owned_requests_sent_to_a_location_without_retries_reach_the_origin_once(self):
        self.assertEqual(self.arrivals_per_request(lambda port: NGINX(self, port, True)), 3.0)

    def test_requests_nobody_owns_keep_nginx_retries_and_their_query(self):
        origin = self.start_origin(default=h.respond(503, body=b"down"))
        inner = NGINX(self, origin.port, True)
        with h.Conn(inner.port) as c:
            self.assertEqual(c.request("GET", "/a?b=1").status, 503)
        self.assertEqual(len(origin.wait_for(3)), 3)
        with h.Conn(inner.port) as c:
            self.assertEqual(c.request("GET", "/a?b=1", headers=[("x-retry-owner", "outer")]).status, 503)
        arrivals = origin.wait_for(4)
        self.assertEqual(len(arrivals), 4)
        self.assertEqual(arrivals[-1].target, "/a?b=1", "the owned location passes path and query unchanged")


if __name__ == "__main__":
    unittest.main()
