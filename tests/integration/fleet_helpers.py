"""Redis for the fleet-budget tests: a real redis-server (and sentinels) on
127.0.0.1, a scripted fake Redis that answers badly on purpose, and a small
counting origin. Standard library only."""

from __future__ import annotations

import collections
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def free_port():
    """A port nothing listens on now (bound to 0, read back, closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resp_command(sock, *args, timeout=2.0):
    """Send one command, return the raw first line of the answer."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    sock.settimeout(timeout)
    sock.sendall(out)
    data = b""
    while not data.endswith(b"\r\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


class RedisServer:
    """redis-server on 127.0.0.1 with a free port, no persistence."""

    def __init__(self, port=None, extra=()):
        self.binary = shutil.which("redis-server")
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="onelayer-redis-")
        self.extra = list(extra)
        self.proc = None

    def start(self):
        cmd = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", self.dir, "--daemonize", "no"] + self.extra
        if shutil.which("setpriv"):
            cmd = ["setpriv", "--pdeathsig", "KILL", "--"] + cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    if resp_command(s, "PING").startswith((b"+PONG", b"-NOAUTH")):
                        return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start on port %d" % self.port)

    def command(self, *args):
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            return resp_command(s, *args)

    def signal(self, sig):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Sentinel:
    """redis-sentinel on 127.0.0.1 watching `master` at 127.0.0.1:master_port,
    quick to decide (down after 1 s) so a failover takes a few seconds."""

    def __init__(self, master, master_port):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="onelayer-sentinel-")
        self.conf = os.path.join(self.dir, "sentinel.conf")
        with open(self.conf, "w") as f:
            f.write("port %d\nbind 127.0.0.1\ndir %s\n"
                    "sentinel monitor %s 127.0.0.1 %d 2\n"
                    "sentinel down-after-milliseconds %s 1000\n"
                    "sentinel failover-timeout %s 4000\n"
                    "sentinel parallel-syncs %s 1\n" % (self.port, self.dir, master, master_port, master, master,
                                                         master))
        self.proc = None

    def start(self):
        cmd = [shutil.which("redis-sentinel"), self.conf]
        if shutil.which("setpriv"):
            cmd = ["setpriv", "--pdeathsig", "KILL", "--"] + cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        return self

    def command(self, *args):
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            return resp_command(s, *args)

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


class LoopbackServer:
    """A listening socket on 127.0.0.1 (port 0) whose accept thread hands
    each connection to ``serve(sock)``, counted in ``connections``, until
    stop()."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        self.connections = 0
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        self.sock.settimeout(0.2)
        while not self.stopped.is_set():
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            self.serve(c)

    def serve(self, c):
        raise NotImplementedError

    def stop(self):
        self.stopped.set()
        self.sock.close()
        self.thread.join(timeout=2)


class FakeRedis(LoopbackServer):
    """A server on 127.0.0.1 that speaks just enough RESP to misbehave:
    mode "error" answers -ERR to everything, "echo" an -ERR quoting what it got, "noauth" -NOAUTH, "wrongtype"
    an integer where arrays and strings belong, "huge" a bulk string header
    of a gigabyte followed by a stream of bytes, "silent" never answers.
    ``sent`` counts the bytes it wrote."""

    def __init__(self, mode):
        self.mode = mode
        self.sent = 0
        super().__init__()

    def serve(self, c):
        threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        c.settimeout(0.2)
        try:
            while not self.stopped.is_set():
                try:
                    data = c.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    return
                if self.mode == "silent":
                    continue
                commands = max(1, data.count(b"\r\n*"))
                if self.mode == "huge":
                    c.sendall(b"$1000000000\r\n")
                    block = b"x" * 65536
                    for _ in range(64):  # up to 4 MiB, until the peer hangs up
                        c.sendall(block)
                        self.sent += len(block)
                    return
                if self.mode == "echo":  # an error quoting everything it was sent
                    c.sendall(b"-ERR " + data.replace(b"\r\n", b" ") + b"\r\n")
                    continue
                reply = {"error": b"-ERR unknown command\r\n", "noauth": b"-NOAUTH Authentication required.\r\n",
                         "wrongtype": b":5\r\n"}[self.mode]
                c.sendall(reply * commands)
        except OSError:
            return
        finally:
            c.close()


class RedisRelay(LoopbackServer):
    """A TCP relay on 127.0.0.1 in front of a real Redis, for faults on the
    path rather than in the server. ``mode`` can change at any time and
    applies to every byte read from then on, both ways:
    "pass" forwards at once, "delay" forwards each chunk ``delay`` seconds
    after it was read (in order), "drop" swallows it (the connections stay
    open, nothing arrives: a black hole), "error" answers every command
    from the client with ``-ERR`` itself (Redis's answers are swallowed).
    ``connections`` counts accepts."""

    def __init__(self, target_port, delay=0.5):
        self.target_port = target_port
        self.delay = delay
        self.mode = "pass"
        self.lock = threading.Lock()
        self.open = []  # sockets to close at stop
        super().__init__()

    def serve(self, client):
        try:
            server = socket.create_connection(("127.0.0.1", self.target_port), timeout=2)
        except OSError:
            client.close()
            return
        with self.lock:
            self.open += [client, server]
        to_server = (collections.deque(), threading.Condition())
        to_client = (collections.deque(), threading.Condition())
        for src, dst, out, back in ((client, server, to_server, to_client), (server, client, to_client, None)):
            threading.Thread(target=self._read, args=(src, out, back), daemon=True).start()
            threading.Thread(target=self._write, args=(dst, src) + out, daemon=True).start()

    @staticmethod
    def _queue(out, due, data):
        queue, ready = out
        with ready:
            queue.append((due, data))
            ready.notify()

    def _read(self, src, out, back):
        """Reads src; queues each chunk on `out` with the time it may leave
        (None at EOF). `back` (client side only) takes the relay's own
        answers in "error" mode."""
        src.settimeout(0.2)
        while not self.stopped.is_set():
            try:
                data = src.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                data = b""
            mode = self.mode
            if data and mode == "error" and back is not None:
                # One error per command: each starts with '*' at a line start.
                commands = data.count(b"\r\n*") + data.startswith(b"*")
                self._queue(back, time.monotonic(), b"-ERR relay refuses\r\n" * max(1, commands))
                continue
            if data and mode in ("drop", "error"):
                continue
            self._queue(out, time.monotonic() + (self.delay if mode == "delay" else 0.0), data or None)
            if not data:
                return

    def _write(self, dst, src, queue, ready):
        """Sends queued chunks to dst when due; at EOF closes both sockets."""
        while not self.stopped.is_set():
            with ready:
                while not queue and not self.stopped.is_set():
                    ready.wait(0.2)
                if not queue:
                    break
                due, data = queue.popleft()
            wait = due - time.monotonic()
            if wait > 0 and self.stopped.wait(wait):
                break
            if data is None:
                break
            try:
                dst.sendall(data)
            except OSError:
                break
        for s in (dst, src):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self):
        super().stop()
        with self.lock:
            for s in self.open:
                s.close()


class CountingOrigin:
    """An HTTP/1.1 origin that answers ``status`` to every request and counts
    arrivals per wall-clock second, split into first attempts and retries by
    x-retry-attempt. Exact counts: every arrival is recorded under a lock."""

    def __init__(self, status=503):
        origin = self
        self.status = status
        self.lock = threading.Lock()
        self.first = {}    # second -> arrivals with x-retry-attempt 1 (or absent)
        self.retries = {}  # second -> arrivals with x-retry-attempt > 1

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # the body goes right after the headers, not after an ACK

            def do_GET(self):
                attempt = int(self.headers.get("x-retry-attempt", "1") or 1)
                sec = int(time.monotonic())
                with origin.lock:
                    d = origin.first if attempt <= 1 else origin.retries
                    d[sec] = d.get(sec, 0) + 1
                body = b"x"
                self.send_response(origin.status)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 1024  # 30 instances connect at once

            def handle_error(self, request, client_address):
                pass  # proxies closing idle keep-alive connections at exit

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1},
                                       daemon=True)
        self.thread.start()

    def reset(self):
        with self.lock:
            self.first.clear()
            self.retries.clear()

    def totals(self, start=None, end=None):
        with self.lock:
            f = sum(v for s, v in self.first.items() if (start is None or s >= start) and (end is None or s < end))
            r = sum(v for s, v in self.retries.items() if (start is None or s >= start) and (end is None or s < end))
        return f, r

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def instance_config(origin_port, redis_port, scope, *, ratio, floor, interval_ms):
    """One instance of a fleet: retries 503 once, budget `scope`."""
    import harness as h
    return h.simple_config(
        origin_port,
        retry={"max_attempts": 2, "retry_on": [503], "backoff": {"base": "1ms", "cap": "2ms"}},
        upstream={"retry_budget": {"ratio": ratio, "min_per_second": floor, "scope": scope, "service": "svc"}},
        fleet={"redis": "127.0.0.1:%d" % redis_port, "sync_interval": "%dms" % interval_ms,
               "timeout": "%dms" % min(interval_ms, 200), "stale_after": "%dms" % (4 * interval_ms)})


def _drive(port, rate, stop, errors, slowest):
    """`rate` requests per second on one keep-alive connection until stop;
    every answer must be a 503 (the origin's). slowest[0]: the longest
    request, in seconds."""
    import harness as h
    period = 1.0 / rate
    nxt = time.monotonic()
    conn = None
    while not stop.is_set():
        t = time.monotonic()
        try:
            if conn is None:
                conn = h.Conn(port, timeout=5)
            r = conn.request("GET", "/")
            if r.status != 503:
                errors.append(r.status)
        except Exception as e:  # noqa: BLE001 - reported by the caller
            errors.append(repr(e))
            conn = None
        slowest[0] = max(slowest[0], time.monotonic() - t)
        nxt += period
        delay = nxt - time.monotonic()
        if delay > 0:
            stop.wait(delay)
    if conn is not None:
        conn.close()


class FailingLoad:
    """`rate` requests per second to each port (one thread and keep-alive
    connection each) in front of an origin failing everything, from start()
    until stop(). errors: every answer that was not the origin's 503 and
    every exception; slowest: the longest request in seconds."""

    def __init__(self, ports, rate):
        self.stopping = threading.Event()
        self.errors = []
        self.slowest = [0.0]
        self.threads = [threading.Thread(target=_drive, args=(p, rate, self.stopping, self.errors, self.slowest))
                        for p in ports]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def stop(self):
        """Returns once every request sent has been answered."""
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=10)


def run_fleet(start_proxy, origin, redis_port, n, scope, *, rate, seconds, ratio, floor, interval_ms,
              around_load=None):
    """n instances (started with start_proxy(config_text)) in front of
    `origin` (a failing CountingOrigin), each driven at `rate` requests/s for
    `seconds` whole seconds. Returns (first, retries, windows, errors): the
    origin's exact counts over the run, and (first, retries) of every 10 s
    window inside it. around_load(), if given, is called just before the
    load starts and just after it ends, every instance still running."""
    proxies = [start_proxy(instance_config(origin.port, redis_port, scope, ratio=ratio, floor=floor,
                                           interval_ms=interval_ms)) for _ in range(n)]
    time.sleep(3 * interval_ms / 1000.0)  # every instance has synced
    origin.reset()
    load = FailingLoad([p.port() for p in proxies], rate)
    start = int(time.monotonic()) + 1
    while time.monotonic() < start:
        time.sleep(0.01)
    if around_load:
        around_load()
    load.start()
    time.sleep(seconds)
    load.stop()
    if around_load:
        around_load()
    end = start + seconds
    windows = [origin.totals(s, s + 10) for s in range(start, end - 10 + 1)]
    first, retries = origin.totals(start, end)
    return first, retries, windows, load.errors, proxies
