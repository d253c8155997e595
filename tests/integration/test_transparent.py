"""Transparent sidecar mode, end to end, with real iptables in network
namespaces the test creates (and deletes, even on failure).

Topology (addresses only inside the two namespaces, on a veth pair the test
creates in them):

    app netns                                   remote netns
    10.201.2.1 ------------- veth ------------- 10.201.2.2 (+ 10.201.16.0/20 AnyIP)
    fd01:201:2::1                               fd01:201:2::2
    app (curl, python3, grpcio)                 transparent_peers.py: HTTP/1.1 :8080,
    onelayer as `nobody` on 127.0.0.1:15001     gRPC :8082, TLS echo :8443,
      and [::1]:15001                           server-speaks-first :2525 (both families)
    deploy/iptables.sh --proxy-uid 65534 --ipv6

The app calls the remote by its real address with no proxy settings; the
redirect installed by deploy/iptables.sh sends its TCP to onelayer, which
reads each connection's original destination. Checked: HTTP/1.1, h2c and
gRPC go through onelayer (access log, metrics), a 503 is retried and a
key-less POST is not, the remote sees the single-layer headers, TLS and a
server-speaks-first protocol pass through byte for byte and are counted as
passthrough, the loop guard, onelayer's own upstream connections are not
redirected, `--undo` leaves iptables-save as it was, and 2,000 distinct
destinations keep the destination table at its cap. Over IPv6 (ip6tables,
IP6T_SO_ORIGINAL_DST): an HTTP/1.1 call by address is proxied and retried,
a TLS connection passes through.

Needs root, `ip` (iproute2), `iptables` (Debian's, nft backend), curl and
python3-grpcio. Without them the test is skipped, and under CI=true it
fails instead: a green run must have run it.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"
APP_IP, REMOTE_IP = "10.201.2.1", "10.201.2.2"
APP_IP6, REMOTE_IP6 = "fd01:201:2::1", "fd01:201:2::2"  # unique local addresses, inside the namespaces only
MANY_NET = "10.201.16.0/20"  # the remote answers on every address of it (AnyIP)
PROXY_UID = 65534  # nobody
LAYER = "app-layer"

CONFIG = """
layer_id: %(layer)s
admin: {listen: "127.0.0.1:9901"}
listeners:
  - name: outbound
    listen: 127.0.0.1:15001
    mode: transparent
    detect_timeout: 200ms
    routes:
      - name: remote-http
        match: {destination: 10.201.2.0/24, destination_port: 8080, methods: [GET, POST]}
        upstream: original
        retry:
          max_attempts: 3
          retry_on: [503]
          backoff: {base: 10ms, cap: 50ms}
  - name: outbound6
    listen: "[::1]:15001"
    mode: transparent
    detect_timeout: 200ms
    routes:
      - name: remote-http6
        match: {destination: "fd01:201:2::/64", destination_port: 8080, methods: [GET]}
        upstream: original
        retry:
          max_attempts: 3
          retry_on: [503]
          backoff: {base: 10ms, cap: 50ms}
upstreams:
  - name: original
    original_destination: true
"""


def ns_name(role):
    return "ol-%s-%d" % (role, os.getpid())


def run(cmd, *, check=True, timeout=30, input=None):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input)
    if check and p.returncode != 0:
        raise AssertionError("%s failed (%d): %s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p


def missing_prerequisites():
    if os.geteuid() != 0:
        return "not root"
    for tool in ("ip", "iptables", "iptables-save", "ip6tables", "ip6tables-save", "curl", "openssl", "setpriv"):
        if not shutil.which(tool):
            return "%s not installed" % tool
    if not os.path.exists(PY):
        return "no /usr/bin/python3"
    if run([PY, "-c", "import grpc"], check=False).returncode != 0:
        return "python3-grpcio not installed"
    probe = "ol-probe-%d" % os.getpid()
    if run(["ip", "netns", "add", probe], check=False).returncode != 0:
        return "cannot create network namespaces"
    try:
        for tool in ("iptables", "ip6tables"):
            if run(["ip", "netns", "exec", probe, tool, "-w", "-t", "nat", "-S"], check=False).returncode != 0:
                return tool + " cannot use the nat table"
    finally:
        run(["ip", "netns", "del", probe], check=False)
    return None


def onelayer_bin():
    b = os.environ.get("ONELAYER_BIN") or os.path.join(SOURCE_DIR, "build", "onelayer")
    return b if os.path.exists(b) else None


def normalized_rules(text):
    """iptables-save without its comments and packet counters."""
    return [re.sub(r"\[\d+:\d+\]", "", line) for line in text.splitlines() if not line.startswith("#")]


class TransparentSidecar(unittest.TestCase):
    app = ns_name("app")
    remote = ns_name("remote")

    @classmethod
    def setUpClass(cls):
        why = missing_prerequisites() or (None if onelayer_bin() else "onelayer binary not built")
        if why:
            if os.environ.get("CI") == "true":
                raise AssertionError("transparent tests cannot run under CI: " + why)
            raise unittest.SkipTest(why)
        cls.procs = []
        cls.tmp = tempfile.mkdtemp(prefix="onelayer-transparent-")
        os.chmod(cls.tmp, 0o755)
        try:
            cls.build()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def build(cls):
        app, remote = cls.app, cls.remote
        run(["ip", "netns", "add", app])
        run(["ip", "netns", "add", remote])
        run(["ip", "link", "add", "ol-app", "netns", app, "type", "veth", "peer", "name", "ol-remote",
             "netns", remote])
        for ns, dev, ip, ip6 in ((app, "ol-app", APP_IP, APP_IP6), (remote, "ol-remote", REMOTE_IP, REMOTE_IP6)):
            cls.ns(ns, "ip", "link", "set", "lo", "up")
            cls.ns(ns, "ip", "addr", "add", ip + "/24", "dev", dev)
            cls.ns(ns, "ip", "-6", "addr", "add", ip6 + "/64", "dev", dev, "nodad")
            cls.ns(ns, "ip", "link", "set", dev, "up")
        cls.ns(remote, "ip", "route", "add", "local", MANY_NET, "dev", "lo")
        cls.ns(app, "ip", "route", "add", MANY_NET, "via", REMOTE_IP)
        # A rule of the app's own, there before onelayer's: --undo must keep it.
        cls.ns(app, "iptables", "-w", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "--dport", "9", "-j", "RETURN")
        cls.ns(app, "ip6tables", "-w", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "--dport", "9", "-j", "RETURN")
        cls.rules_before = cls.ns(app, "iptables-save").stdout
        cls.rules_before6 = cls.ns(app, "ip6tables-save").stdout

        # The remote's servers (a certificate for its TLS echo first).
        cls.cert, cls.key = os.path.join(cls.tmp, "remote.pem"), os.path.join(cls.tmp, "remote.key")
        run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=remote",
             "-addext", "subjectAltName=IP:%s,IP:%s" % (REMOTE_IP, REMOTE_IP6), "-keyout", cls.key, "-out", cls.cert])
        peers = subprocess.Popen(["ip", "netns", "exec", remote, PY, os.path.join(HERE, "transparent_peers.py"),
                                  "0.0.0.0," + REMOTE_IP6, cls.cert, cls.key], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True)
        cls.procs.append(peers)
        line = peers.stdout.readline()
        if line.strip() != "ready":
            raise AssertionError("remote peers did not start: %r" % line)

        # onelayer in the app's namespace as the excluded user id.
        cls.config_path = os.path.join(cls.tmp, "onelayer.yaml")
        with open(cls.config_path, "w") as f:
            f.write(CONFIG % {"layer": LAYER})
        os.chmod(cls.config_path, 0o644)
        cls.stdout_path = os.path.join(cls.tmp, "stdout")
        cls.stderr_path = os.path.join(cls.tmp, "stderr")
        with open(cls.stdout_path, "wb") as out, open(cls.stderr_path, "wb") as err:
            proxy = subprocess.Popen(
                ["ip", "netns", "exec", app, "setpriv", "--reuid", str(PROXY_UID), "--regid", str(PROXY_UID),
                 "--clear-groups", "--pdeathsig", "KILL", "--", onelayer_bin(), "--config", cls.config_path,
                 "--log-format", "json"], stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        cls.procs.append(proxy)
        deadline = time.monotonic() + 10
        while cls.app_run("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                          "http://127.0.0.1:9901/ready", check=False).stdout != "200":
            if proxy.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("onelayer did not become ready: %s" % open(cls.stderr_path).read())
            time.sleep(0.05)
        cls.install_redirect()

    @classmethod
    def install_redirect(cls):
        return cls.ns(cls.app, "bash", os.path.join(SOURCE_DIR, "deploy", "iptables.sh"), "--proxy-uid",
                      str(PROXY_UID), "--listener-port", "15001", "--exclude-ports", "9901", "--ipv6")

    @classmethod
    def tearDownClass(cls):
        procs = getattr(cls, "procs", [])
        if len(procs) > 1 and procs[1].poll() is None:
            # onelayer drains and exits on SIGTERM: a sanitized build reports leaks then.
            procs[1].send_signal(signal.SIGTERM)
            try:
                procs[1].wait(15)
            except subprocess.TimeoutExpired:
                pass
        exit_code = procs[1].returncode if len(procs) > 1 else 0
        sanitizer = ""
        if getattr(cls, "stderr_path", None) and os.path.exists(cls.stderr_path):
            with open(cls.stderr_path, errors="replace") as f:
                text = f.read()
            if "Sanitizer" in text:
                sanitizer = text[text.index("Sanitizer") - 200:][:4000]
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
            for stream in (p.stdin, p.stdout):
                if stream:
                    stream.close()
        for ns in (cls.app, cls.remote):
            run(["ip", "netns", "del", ns], check=False)  # its veth end and rules go with it
        if getattr(cls, "tmp", None):
            shutil.rmtree(cls.tmp, ignore_errors=True)
        if sanitizer:
            raise AssertionError("onelayer's sanitizer report:\n" + sanitizer)
        if exit_code not in (0, 3):  # 3: drain_timeout cut a connection short
            raise AssertionError("onelayer did not drain and exit on SIGTERM (exit code %s)" % exit_code)

    @classmethod
    def ns(cls, ns, *cmd, check=True, timeout=30, input=None):
        return run(["ip", "netns", "exec", ns] + list(cmd), check=check, timeout=timeout, input=input)

    @classmethod
    def app_run(cls, *cmd, check=True, timeout=30, input=None):
        return cls.ns(cls.app, *cmd, check=check, timeout=timeout, input=input)

    def app_python(self, code, *args, timeout=60):
        return self.app_run(PY, "-c", code, *args, timeout=timeout).stdout

    # -- what onelayer and the remote saw ---------------------------------
    def access_log(self):
        out = []
        with open(self.stdout_path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if "route" in rec:
                    out.append(rec)
        return out

    def log_for(self, path, count=1, timeout=5):
        deadline = time.monotonic() + timeout
        while True:
            recs = [r for r in self.access_log() if r.get("path") == path]
            if len(recs) >= count or time.monotonic() > deadline:
                return recs
            time.sleep(0.05)

    def remote_seen(self):
        # Asked from the remote's own namespace: this call must not be logged by onelayer.
        out = self.ns(self.remote, "curl", "-s", "http://%s:8080/seen" % REMOTE_IP).stdout
        return json.loads(out)

    def metric(self, name, **labels):
        text = self.app_run("curl", "-s", "http://127.0.0.1:9901/metrics").stdout
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            if all('%s="%s"' % (k, v) in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def passthrough(self, reason, code, *args):
        """What the app's script printed; the script's one connection must be counted as passed through for `reason`."""
        before = self.metric("onelayer_passthrough_connections_total", listener="outbound", reason=reason)
        out = self.app_python(code, *args).strip()
        after = self.metric("onelayer_passthrough_connections_total", listener="outbound", reason=reason)
        self.assertEqual(after - before, 1, "passthrough_connections_total{reason=%s}" % reason)
        return out

    def curl(self, *args):
        return self.app_run("curl", "-s", "-S", "--max-time", "10", "-o", "-", "-w", "\n%{http_code}", *args)

    # -- HTTP through onelayer ------------------------------------------
    def test_http1_call_by_real_address_goes_through_onelayer_with_single_layer_headers(self):
        out = self.curl("http://%s:8080/hello-http1" % REMOTE_IP).stdout
        self.assertTrue(out.endswith("\n200"), out)
        self.assertIn("hello from remote /hello-http1", out)
        (rec,) = self.log_for("/hello-http1")
        self.assertEqual(rec["route"], "remote-http")
        self.assertEqual(rec["protocol"], "http1")
        self.assertEqual(rec["upstream"], "%s:8080" % REMOTE_IP)
        seen = [s for s in self.remote_seen()["seen"] if s["path"] == "/hello-http1"]
        self.assertEqual(len(seen), 1)
        headers = dict(seen[0]["headers"])
        self.assertEqual(headers.get("x-retry-owner"), LAYER)
        self.assertIn("x-request-timeout-ms", headers)
        self.assertEqual(headers.get("host"), "%s:8080" % REMOTE_IP)

    def test_h2c_prior_knowledge_goes_through_onelayer(self):
        out = self.curl("--http2-prior-knowledge", "http://%s:8080/hello-h2c" % REMOTE_IP).stdout
        self.assertTrue(out.endswith("\n200"), out)
        (rec,) = self.log_for("/hello-h2c")
        self.assertEqual(rec["protocol"], "h2")
        self.assertEqual(rec["route"], "remote-http")

    def test_ipv6_call_by_real_address_goes_through_onelayer_and_a_503_is_retried(self):
        # ip6tables' REDIRECT sends it to [::1]:15001; onelayer reads the
        # destination with IP6T_SO_ORIGINAL_DST and routes on it.
        out = self.curl("-g", "http://[%s]:8080/hello-v6" % REMOTE_IP6).stdout
        self.assertTrue(out.endswith("\n200"), out)
        self.assertIn("hello from remote /hello-v6", out)
        (rec,) = self.log_for("/hello-v6")
        self.assertEqual(rec["route"], "remote-http6")
        self.assertEqual(rec["upstream"], "[%s]:8080" % REMOTE_IP6)
        seen = [s for s in self.remote_seen()["seen"] if s["path"] == "/hello-v6"]
        self.assertEqual(len(seen), 1)
        self.assertEqual(dict(seen[0]["headers"]).get("x-retry-owner"), LAYER)
        out = self.curl("-g", "http://[%s]:8080/flaky/v6" % REMOTE_IP6).stdout
        self.assertTrue(out.endswith("\n200"), out)
        (flaky,) = self.log_for("/flaky/v6")
        self.assertEqual(flaky["attempts"], 2)
        self.assertEqual(self.remote_seen()["arrivals"].get("/flaky/v6"), 2)

    def test_ipv6_tls_passes_through_byte_for_byte(self):
        code = (
            "import socket, ssl, sys\n"
            "ctx = ssl.create_default_context(cafile=sys.argv[2])\n"
            "with socket.create_connection((sys.argv[1], 8443), timeout=10) as raw:\n"
            "    with ctx.wrap_socket(raw, server_hostname=sys.argv[1]) as s:\n"
            "        s.sendall(b'over six')\n"
            "        print(s.recv(100).decode())\n")
        before = self.metric("onelayer_passthrough_connections_total", listener="outbound6", reason="tls")
        out = self.app_python(code, REMOTE_IP6, self.cert).strip()
        self.assertEqual(out, "over six")
        after = self.metric("onelayer_passthrough_connections_total", listener="outbound6", reason="tls")
        self.assertEqual(after - before, 1)

    def test_grpc_call_goes_through_the_h2c_fallback_once(self):
        code = (
            "import sys; sys.path.append('/usr/lib/python3/dist-packages'); import grpc\n"
            "ch = grpc.insecure_channel('%s:8082', options=[('grpc.enable_retries', 0)])\n"
            "print(ch.unary_unary('/onelayer.test.Echo/Get')(b'ping', timeout=10).decode())\n" % REMOTE_IP)
        self.assertEqual(self.app_python(code).strip(), "echo:ping")
        (rec,) = self.log_for("/onelayer.test.Echo/Get")
        self.assertEqual(rec["route"], "transparent-fallback-h2c")
        self.assertEqual(rec["protocol"], "h2")
        self.assertEqual(rec.get("grpc_status"), 0)
        self.assertEqual(rec["attempts"], 1)
        calls = [s for s in self.remote_seen()["seen"] if s["method"] == "grpc"]
        self.assertTrue(calls)
        headers = dict(calls[-1]["headers"])
        self.assertIn("onelayer", headers.get("via", ""))
        self.assertIn("x-request-timeout-ms", headers)
        # One attempt: the fallback owns no retries, so it claims none.
        self.assertNotIn("x-retry-owner", headers)

    def test_a_503_is_retried_and_a_keyless_post_is_not(self):
        out = self.curl("http://%s:8080/flaky/get" % REMOTE_IP).stdout
        self.assertTrue(out.endswith("\n200"), out)
        out = self.curl("-X", "POST", "--data", "x=1", "http://%s:8080/post/503" % REMOTE_IP).stdout
        self.assertTrue(out.endswith("\n503"), out)
        (flaky,) = self.log_for("/flaky/get")
        self.assertEqual(flaky["attempts"], 2)
        (post,) = self.log_for("/post/503")
        self.assertEqual(post["attempts"], 1)
        arrivals = self.remote_seen()["arrivals"]
        self.assertEqual(arrivals["/flaky/get"], 2)
        self.assertEqual(arrivals["/post/503"], 1)

    def test_a_request_no_route_matches_goes_to_its_destination_once(self):
        # remote-http takes GET and POST: a DELETE falls back, and is not
        # retried on its 503 although DELETE is idempotent.
        out = self.curl("-X", "DELETE", "http://%s:8080/fallback/503" % REMOTE_IP).stdout
        self.assertTrue(out.endswith("\n503"), out)
        (rec,) = self.log_for("/fallback/503")
        self.assertEqual(rec["route"], "transparent-fallback")
        self.assertEqual(rec["attempts"], 1)
        self.assertEqual(self.remote_seen()["arrivals"]["/fallback/503"], 1)

    # -- passthrough ------------------------------------------------------
    def test_tls_from_the_app_passes_through_byte_for_byte(self):
        code = (
            "import os, socket, ssl, sys\n"
            "ctx = ssl.create_default_context(cafile=sys.argv[1])\n"
            "data = os.urandom(300000)\n"
            "with socket.create_connection(('%s', 8443), timeout=10) as raw:\n"
            "    with ctx.wrap_socket(raw, server_hostname='%s') as s:\n"
            "        s.sendall(data)\n"
            "        got = b''\n"
            "        while len(got) < len(data):\n"
            "            chunk = s.recv(65536)\n"
            "            if not chunk: break\n"
            "            got += chunk\n"
            "print('same' if got == data else 'differ %%d' %% len(got))\n" % (REMOTE_IP, REMOTE_IP))
        self.assertEqual(self.passthrough("tls", code, self.cert), "same")

    def test_a_server_that_speaks_first_passes_through(self):
        code = (
            "import socket\n"
            "s = socket.create_connection(('%s', 2525), timeout=10)\n"
            "f = s.makefile('rb')\n"
            "greeting = f.readline()\n"
            "s.sendall(b'HELO app\\r\\n')\n"
            "reply = f.readline()\n"
            "print(repr(greeting + reply))\n" % REMOTE_IP)
        self.assertEqual(self.passthrough("server_first", code), repr(b"220 remote ready\r\n250 HELO app\r\n"))

    def test_another_protocol_from_the_client_passes_through_as_unknown(self):
        code = (
            "import socket\n"
            "s = socket.create_connection(('%s', 2525), timeout=10)\n"
            "s.sendall(b'SSH-2.0-app\\r\\n')\n"
            "f = s.makefile('rb')\n"
            "print(repr(f.readline() + f.readline()))\n" % REMOTE_IP)
        self.assertEqual(self.passthrough("unknown", code), repr(b"220 remote ready\r\n250 SSH-2.0-app\r\n"))

    # -- loops and the rules ----------------------------------------------
    def test_a_connection_to_the_listener_itself_is_refused_by_the_loop_guard(self):
        before = self.metric("onelayer_transparent_refused_total", listener="outbound", reason="loop")
        code = (
            "import socket\n"
            "try:\n"
            "    s = socket.create_connection(('127.0.0.1', 15001), timeout=5)\n"
            "    s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
            "    print(repr(s.recv(100)))\n"
            "except ConnectionResetError:\n"
            "    print('reset')\n")
        self.assertIn(self.app_python(code).strip(), ("reset", "b''"))
        after = self.metric("onelayer_transparent_refused_total", listener="outbound", reason="loop")
        self.assertEqual(after - before, 1)

    def test_onelayers_own_upstream_connections_are_not_redirected(self):
        # Were they, each request would come back to onelayer as a second
        # accepted connection and a second access-log line.
        accepted = self.metric("onelayer_downstream_connections_total")
        lines = len(self.access_log())
        for i in range(5):
            self.curl("http://%s:8080/no-loop/%d" % (REMOTE_IP, i))
        self.assertEqual(len(self.log_for("/no-loop/4")), 1)
        self.assertEqual(self.metric("onelayer_downstream_connections_total") - accepted, 5)
        self.assertEqual(len(self.access_log()) - lines, 5)
        # The owner match is what keeps them out: its rule is there and counts.
        rules = self.app_run("iptables", "-w", "-t", "nat", "-S", "ONELAYER_OUTPUT").stdout
        self.assertIn("-m owner --uid-owner %d -j RETURN" % PROXY_UID, rules)

    def test_install_is_idempotent_and_undo_restores_iptables_save(self):
        once = normalized_rules(self.app_run("iptables-save").stdout)
        once6 = normalized_rules(self.app_run("ip6tables-save").stdout)
        self.assertTrue(any("ONELAYER_OUTPUT" in line for line in once6), "the IPv6 redirect is installed")
        self.install_redirect()
        self.assertEqual(normalized_rules(self.app_run("iptables-save").stdout), once)
        self.assertEqual(normalized_rules(self.app_run("ip6tables-save").stdout), once6)
        try:
            self.ns(self.app, "bash", os.path.join(SOURCE_DIR, "deploy", "iptables.sh"), "--undo", "--ipv6")
            after = self.app_run("iptables-save").stdout
            self.assertEqual(normalized_rules(after), normalized_rules(self.rules_before))
            self.assertEqual(normalized_rules(self.app_run("ip6tables-save").stdout),
                             normalized_rules(self.rules_before6))
            self.assertIn("--dport 9 -j RETURN", after)  # the app's own rule stayed
        finally:
            self.install_redirect()

    def test_iptables_sh_says_what_is_missing(self):
        out = run(["bash", os.path.join(SOURCE_DIR, "deploy", "iptables.sh"), "--listener-port", "15001"],
                  check=False)
        self.assertEqual(out.returncode, 2)
        self.assertIn("--proxy-uid", out.stderr)
        # Without CAP_NET_ADMIN (as nobody) it says so instead of iptables' own words.
        out = self.app_run("setpriv", "--reuid", str(PROXY_UID), "--regid", str(PROXY_UID), "--clear-groups",
                           "--inh-caps=-all", "bash", os.path.join(SOURCE_DIR, "deploy", "iptables.sh"),
                           "--proxy-uid", "1", check=False)
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertIn("NET_ADMIN", out.stderr)
        # Without iptables on the PATH.
        out = run(["env", "PATH=/nonexistent", "/bin/bash", os.path.join(SOURCE_DIR, "deploy", "iptables.sh"),
                   "--proxy-uid", "1"], check=False)
        self.assertEqual(out.returncode, 2)
        self.assertIn("iptables not found", out.stderr)

    # -- many destinations ------------------------------------------------
    def test_thousands_of_distinct_destinations_keep_the_table_at_its_cap(self):
        n = 2000
        code = (
            "import ipaddress, socket, sys\n"
            "from concurrent.futures import ThreadPoolExecutor\n"
            "def call(ip):\n"
            "    s = socket.create_connection((str(ip), 8080), timeout=10)\n"
            "    s.sendall(b'GET /many HTTP/1.1\\r\\nHost: many\\r\\nConnection: close\\r\\n\\r\\n')\n"
            "    data = b''\n"
            "    while True:\n"
            "        chunk = s.recv(4096)\n"
            "        if not chunk: break\n"
            "        data += chunk\n"
            "    s.close()\n"
            "    return data.split(b'\\r\\n', 1)[0].decode()\n"
            "hosts = list(ipaddress.ip_network(sys.argv[1]).hosts())[:int(sys.argv[2])]\n"
            "with ThreadPoolExecutor(8) as pool:\n"
            "    lines = list(pool.map(call, hosts))\n"
            "print({l: lines.count(l) for l in set(lines)})\n")
        self.assertEqual(self.app_python(code, MANY_NET, str(n), timeout=80).strip(), str({"HTTP/1.1 200 OK": n}))
        held = self.metric("onelayer_transparent_destinations")
        self.assertLessEqual(held, 1024 + 1, "destinations held beyond the documented cap")
        self.assertGreaterEqual(held, 1000)  # the table was used, and filled
        self.assertEqual(len(self.log_for("/many", count=n)), n)


class TransparentManifests(unittest.TestCase):
    """deploy/kubernetes/transparent/: the init container runs deploy/iptables.sh
    (as installed in the image) with the uid onelayer runs as and onelayer's
    transparent listener port, and the config it carries passes --check.
    Read with test_deploy's YAML subset reader; no root needed."""

    def setUp(self):
        import test_deploy
        self.deploy = test_deploy
        k8s = os.path.join(SOURCE_DIR, "deploy", "kubernetes", "transparent")
        docs = []
        for f in sorted(os.listdir(k8s)):
            if f.endswith(".yaml") and f != "kustomization.yaml":
                docs += test_deploy.load_yaml_documents(os.path.join(k8s, f))
        self.kinds = {d["kind"]: d for d in docs}
        self.pod = self.kinds["Deployment"]["spec"]["template"]["spec"]
        self.inits = {c["name"]: c for c in self.pod["initContainers"]}
        self.config_text = self.kinds["ConfigMap"]["data"]["onelayer.yaml"]
        self.cfg = test_deploy.onelayer_config(self.config_text, "transparent ConfigMap")

    def flag(self, container, name):
        args = container.get("args", [])
        self.assertIn(name, args)
        return args[args.index(name) + 1]

    def test_init_container_redirects_to_the_transparent_listener_and_excludes_onelayers_uid(self):
        names = [c["name"] for c in self.pod["initContainers"]]
        self.assertEqual(names, ["onelayer-iptables", "onelayer"], "the redirect must be in place before the sidecar")
        init, sidecar = self.inits["onelayer-iptables"], self.inits["onelayer"]
        self.assertEqual(init["command"], ["onelayer-iptables"])
        self.assertEqual(int(self.flag(init, "--proxy-uid")), sidecar["securityContext"]["runAsUser"])
        self.assertIn("NET_ADMIN", init["securityContext"]["capabilities"]["add"])
        self.assertNotIn("restartPolicy", init)  # runs once, to completion
        transparent = [l for l in self.cfg["listeners"] if l.get("mode") == "transparent"]
        self.assertEqual(len(transparent), 1)
        _, port = self.deploy.host_port(transparent[0]["listen"])
        self.assertEqual(int(self.flag(init, "--listener-port")), port)
        for c in self.pod["containers"]:
            self.assertNotEqual(c["securityContext"].get("runAsUser"), sidecar["securityContext"]["runAsUser"],
                                "the app must not run as the excluded uid: its calls would not be redirected")

    def test_the_image_installs_the_script_the_init_container_runs(self):
        with open(os.path.join(SOURCE_DIR, "Dockerfile")) as f:
            dockerfile = f.read()
        self.assertIn("COPY deploy/iptables.sh /usr/local/bin/onelayer-iptables", dockerfile)
        runtime = dockerfile.split("AS runtime", 1)[1]
        install = runtime[runtime.index("apt-get install"):runtime.index("apt-get clean")]
        self.assertRegex(install, r"\biptables\b")

    def test_compose_variant_shares_one_namespace_and_excludes_onelayers_uid(self):
        compose = os.path.join(SOURCE_DIR, "deploy", "compose", "transparent")
        (doc,) = self.deploy.load_yaml_documents(os.path.join(compose, "docker-compose.yaml"))
        services = doc["services"]
        init, proxy, app = services["onelayer-iptables"], services["onelayer"], services["app"]
        uid = int(str(proxy["user"]).split(":")[0])
        self.assertEqual(init["network_mode"], "service:onelayer")
        self.assertEqual(app["network_mode"], "service:onelayer")
        self.assertIn("NET_ADMIN", init["cap_add"])
        self.assertEqual(init["entrypoint"], ["onelayer-iptables"])
        self.assertEqual(int(self.flag({"args": init["command"]}, "--proxy-uid")), uid)
        self.assertNotEqual(int(str(app["user"]).split(":")[0]), uid)
        self.assertEqual(app["depends_on"]["onelayer-iptables"]["condition"], "service_completed_successfully")
        with open(os.path.join(compose, "onelayer.yaml")) as f:
            cfg = self.deploy.onelayer_config(f.read(), "compose transparent onelayer.yaml")
        (listener,) = [l for l in cfg["listeners"] if l.get("mode") == "transparent"]
        self.assertEqual(int(self.flag({"args": init["command"]}, "--listener-port")),
                         self.deploy.host_port(listener["listen"])[1])
        self.check_config(os.path.join(compose, "onelayer.yaml"))

    def check_config(self, path):
        binary = onelayer_bin()
        if not binary:
            if os.environ.get("CI") == "true":
                self.fail("onelayer binary not built")
            self.skipTest("onelayer binary not built")
        out = run([binary, "--check", "--config", path], check=False)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def test_the_carried_config_passes_check(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "onelayer.yaml")
            with open(path, "w") as f:
                f.write(self.config_text)
            self.check_config(path)

if __name__ == "__main__":
    unittest.main()
