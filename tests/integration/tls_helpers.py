"""TLS test parts made at test time: a PKI from the ``openssl`` CLI and
NGINX (Debian ``nginx-light``) as a TLS origin that logs what it saw of each
connection (SNI, ALPN, session reuse, client certificate).

NGINX cannot listen on port 0 and report the port, so the port is one the
kernel handed out for 127.0.0.1:0 a moment before; NGINX failing to bind it
fails the test loudly (never a silent pass).
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import harness as h
from harness import IntegrationTest


def need(tool):
    """Path of a tool the test cannot run without; its absence fails the test
    (deploy/install-deps.sh test installs it)."""
    path = shutil.which(tool) or (os.path.exists("/usr/sbin/" + tool) and "/usr/sbin/" + tool)
    if not path:
        raise AssertionError("%s is not installed (deploy/install-deps.sh test installs it)" % tool)
    return path


def _openssl(*args, cwd):
    subprocess.run([need("openssl")] + list(args), cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


class Pki:
    """A CA, a server certificate for ``origin.test`` (and IP 127.0.0.1)
    signed by it, a second unrelated CA, and a client certificate signed by
    the first CA, all P-256, written to a temp dir."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="onelayer-pki-")
        self._ca("ca")
        self._ca("other-ca")
        self._leaf("origin", "origin.test", "ca", "subjectAltName=DNS:origin.test,IP:127.0.0.1\n"
                   "extendedKeyUsage=serverAuth\n")
        self._leaf("client", "client.test", "ca", "extendedKeyUsage=clientAuth\n")
        self._leaf("proxy", "proxy.test", "ca", "subjectAltName=DNS:proxy.test,IP:127.0.0.1\n"
                   "extendedKeyUsage=serverAuth\n")

    def path(self, name):
        return os.path.join(self.dir, name)

    def _ca(self, name):
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", name + ".key", "-out", name + ".pem", "-days", "2",
                 "-subj", "/CN=onelayer test %s" % name, cwd=self.dir)

    def _leaf(self, name, cn, ca, ext):
        with open(os.path.join(self.dir, name + ".ext"), "w") as f:
            f.write(ext)
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + cn, cwd=self.dir)
        _openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
                 "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile", name + ".ext",
                 cwd=self.dir)

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class PkiTest(IntegrationTest):
    """A CA and certificates made once per class with the openssl CLI."""

    @classmethod
    def setUpClass(cls):
        cls.pki = Pki()

    @classmethod
    def tearDownClass(cls):
        cls.pki.cleanup()


LOG_FORMAT = ("$request_method $request_uri sni=$ssl_server_name alpn=$ssl_alpn_protocol "
              "reused=$ssl_session_reused client=$ssl_client_verify proto=$ssl_protocol "
              "conn=$connection via=\"$http_via\" http=$server_protocol")


class Nginx:
    """NGINX serving TLS on 127.0.0.1 with the PKI's origin certificate.
    ``client_ca``: client certificates are required and checked against it.
    ``http2``: the listener offers h2 by ALPN too. ``locations``: extra
    configuration inside the server block. With ``pki=None`` the listener
    is cleartext and speaks HTTP/2 with prior knowledge (h2c) instead.
    ``port``: the port to listen on (one a stopped NGINX used), else a
    fresh one. ``master``: a master process and its worker, so that
    reload() works as it does in production."""

    def __init__(self, pki, *, client_ca=None, http2=True, locations="", port=None, master=False):
        self.dir = tempfile.mkdtemp(prefix="onelayer-nginx-")
        self.port = port
        if port is None:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
        verify = ""
        if client_ca:
            verify = "ssl_client_certificate %s; ssl_verify_client on;" % client_ca
        conf = """
daemon off;
master_process %(master)s;
worker_processes 1;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log info;
events { worker_connections 1024; }
http {
  log_format t '%(fmt)s';
  access_log %(d)s/access.log t;
  client_body_temp_path %(d)s/body;
  proxy_temp_path %(d)s/proxy;
  fastcgi_temp_path %(d)s/fastcgi;
  uwsgi_temp_path %(d)s/uwsgi;
  scgi_temp_path %(d)s/scgi;
  keepalive_requests 100000;
  server {
    %(listen)s
    %(verify)s
    %(locations)s
    location / { return 200 "ok sni=$ssl_server_name alpn=$ssl_alpn_protocol\\n"; }
  }
}
""" % {"d": self.dir, "fmt": LOG_FORMAT, "listen": self._listen(pki, http2), "verify": verify,
       "locations": locations, "master": "on" if master else "off"}
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen(
            [need("nginx"), "-p", self.dir, "-e", os.path.join(self.dir, "error.log"), "-c", self.conf],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while not self._accepts():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("nginx did not start: %s\n%s" % (
                    self.proc.stderr.read().decode(errors="replace") if self.proc.poll() is not None else "",
                    self.error_log()))
            time.sleep(0.02)

    def _listen(self, pki, http2):
        if pki is None:
            return "listen 127.0.0.1:%d http2;" % self.port
        return """listen 127.0.0.1:%(port)d ssl%(h2)s;
    server_name origin.test;
    ssl_certificate %(cert)s;
    ssl_certificate_key %(key)s;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:t:1m;""" % {"port": self.port, "h2": " http2" if http2 else "",
                                         "cert": pki.path("origin.pem"), "key": pki.path("origin.key")}

    def reload(self):
        """SIGHUP to the master: a new worker takes new connections, the old
        one sends its connections a GOAWAY and ends once their streams do."""
        os.kill(self.proc.pid, signal.SIGHUP)

    def reloads_seen(self):
        return self.error_log().count("reconfiguring")

    def _accepts(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def access_lines(self):
        try:
            with open(os.path.join(self.dir, "access.log")) as f:
                return [l.rstrip("\n") for l in f if l.strip()]
        except FileNotFoundError:
            return []

    def wait_lines(self, n, timeout=5):
        got = h.wait_for_lines(self.access_lines, n, timeout)
        if len(got) < n:
            raise AssertionError("nginx logged %r, expected %d lines" % (got, n))
        return got

    def error_log(self):
        try:
            with open(os.path.join(self.dir, "error.log")) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr:
            self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def field(line, name):
    """The value of ``name=`` in an access-log line of LOG_FORMAT."""
    for part in line.split():
        if part.startswith(name + "="):
            return part[len(name) + 1:].strip('"')
    return None
