"""A single-threaded, selector-based fault-injecting origin for the hardening
tests (test_faults, test_hostile_input, tests/soak). Python 3.11 stdlib only.

Unlike harness.Origin (one thread per connection, backlog 256) it holds
thousands of connections at once, and every answer is an Action chosen by a
handler per arrival, so a test can mix faults deterministically:

    origin = FaultOrigin(lambda arrival: respond(200, body=b"ok"))

It validates every request it receives with the harness's framing rules
(exactly one Host, clean header lines, unambiguous framing, a complete body)
and records them; anything malformed goes to ``errors``. For every request it
also records what it sent back (``Arrival.sent``: "nothing", "head", "all").
"""

from __future__ import annotations

import heapq
import itertools
import re
import selectors
import socket
import threading
import time

import harness as h

# The target must be visible ASCII: a raw byte such as 0xA0 is whitespace to
# some parsers and would split the line differently (RFC 9112 3, RFC 3986).
_REQUEST_LINE = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+) ([\x21-\x7e]+) (HTTP/1\.[01])")


# ---------------------------------------------------------------- actions

class Action:
    """What the origin does with one request. ``early`` actions run as soon
    as the head is in, before the body is read."""
    early = False


class Respond(Action):
    def __init__(self, status=200, headers=(), body=b"", close=False, reason=None):
        self.status, self.headers, self.body, self.close = status, list(headers), body, close
        self.reason = reason


class Raw(Action):
    def __init__(self, data, close=True, rst=False):
        self.data, self.close, self.rst = data, close, rst


class Close(Action):
    def __init__(self, rst=False):
        self.rst = rst


class Hang(Action):
    pass


class Delay(Action):
    def __init__(self, seconds, then):
        self.seconds, self.then = seconds, then


class HeadThenClose(Action):
    """A head promising ``content_length`` bytes, ``partial`` of them, then a
    close (or reset) after ``pause``."""

    def __init__(self, status=200, content_length=100000, partial=b"p" * 100, rst=True, pause=0.02):
        self.status, self.content_length, self.partial = status, content_length, partial
        self.rst, self.pause = rst, pause


class SlowBody(Action):
    """A complete response whose body comes in ``pieces`` with ``pause`` between."""

    def __init__(self, status=200, body=b"s" * 1000, pieces=4, pause=0.02, headers=()):
        self.status, self.body, self.pieces, self.pause = status, body, pieces, pause
        self.headers = list(headers)


def respond(status=200, headers=(), body=b"", close=False, reason=None):
    return Respond(status, headers, body, close, reason)


def raw(data, close=True, rst=False):
    return Raw(data, close, rst)


def close(rst=False):
    return Close(rst)


def hang():
    return Hang()


def delay(seconds, then):
    return Delay(seconds, then)


def head_then_close(status=200, content_length=100000, partial=b"p" * 100, rst=True, pause=0.02):
    return HeadThenClose(status, content_length, partial, rst, pause)


def slow_body(status=200, body=b"s" * 1000, pieces=4, pause=0.02, headers=()):
    return SlowBody(status, body, pieces, pause, headers)


def early(action):
    """Run ``action`` when the head arrives, without waiting for the body."""
    action.early = True
    return action


# ---------------------------------------------------------------- origin

class _Conn:
    def __init__(self, cid, sock):
        self.id = cid
        self.sock = sock
        self.inbuf = bytearray()
        self.out = bytearray()
        self.close_after_flush = False
        self.rst_after_flush = False
        self.busy = False        # an action is running; later requests wait
        self.closed = False
        self.requests = 0
        self.last_active = time.monotonic()
        self.discard_body = None  # (kind, remaining) after an early answer


class FaultOrigin:
    """handler(arrival) -> Action, called for every complete request (or at
    the head for ``early_handler``). ``idle_reset=(probability, rng)`` resets
    a fraction of connections a little after they go idle, like an upstream
    that drops pooled connections at random."""

    def __init__(self, handler=None, *, early_handler=None, name="fault-origin",
                 idle_reset=None, backlog=4096, record_limit=1 << 16):
        self.name = name
        self.handler = handler or (lambda a: respond(200, body=b"ok"))
        self.early_handler = early_handler
        self.idle_reset = idle_reset
        self.record_limit = record_limit
        self.arrivals = []
        self.errors = []
        self.connections_accepted = 0
        self.idle_resets = 0
        self._lock = threading.Lock()
        self._sel = selectors.DefaultSelector()
        self._timers = []
        self._seq = itertools.count()
        self._conns = {}
        self._stop = False
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(backlog)
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def endpoint(self):
        return "127.0.0.1:%d" % self.port

    # -- observation -----------------------------------------------------
    def snapshot(self):
        with self._lock:
            return list(self.arrivals)

    def count(self):
        with self._lock:
            return len(self.arrivals)

    def open_connections(self):
        with self._lock:
            return len(self._conns)

    def wait_for(self, n, timeout=5.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.count() >= n:
                break
            time.sleep(0.01)
        return self.snapshot()

    # -- lifecycle -------------------------------------------------------
    def stop(self):
        if self._stop:
            return
        self._stop = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._thread.join(10)
        for c in list(self._conns.values()):
            self._drop(c)
        for s in (self._listener, self._wake_r, self._wake_w):
            try:
                s.close()
            except OSError:
                pass
        self._sel.close()

    # -- loop ------------------------------------------------------------
    def _call_later(self, seconds, fn):
        heapq.heappush(self._timers, (time.monotonic() + seconds, next(self._seq), fn))

    def _run(self):
        try:
            while not self._stop:
                timeout = 0.05
                if self._timers:
                    timeout = max(0.0, min(timeout, self._timers[0][0] - time.monotonic()))
                for key, mask in self._sel.select(timeout):
                    if key.data is None:
                        self._accept()
                    elif key.data == "wake":
                        try:
                            self._wake_r.recv(64)
                        except OSError:
                            pass
                    else:
                        c = key.data
                        if mask & selectors.EVENT_READ and not c.closed:
                            self._on_readable(c)
                        if mask & selectors.EVENT_WRITE and not c.closed:
                            self._flush(c)
                now = time.monotonic()
                while self._timers and self._timers[0][0] <= now:
                    _, _, fn = heapq.heappop(self._timers)
                    fn()
        except Exception as e:  # a bug here must fail the test, not hang it
            with self._lock:
                self.errors.append("origin loop crashed: %r" % e)
            raise

    def _accept(self):
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.connections_accepted += 1
                c = _Conn(self.connections_accepted, sock)
                self._conns[c.id] = c
            self._sel.register(sock, selectors.EVENT_READ, c)

    def _interest(self, c):
        if c.closed:
            return
        ev = selectors.EVENT_READ | (selectors.EVENT_WRITE if c.out else 0)
        try:
            self._sel.modify(c.sock, ev, c)
        except (KeyError, ValueError, OSError):
            pass

    def _drop(self, c, rst=False):
        if c.closed:
            return
        c.closed = True
        try:
            self._sel.unregister(c.sock)
        except (KeyError, ValueError, OSError):
            pass
        try:
            if rst:
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            c.sock.close()
        except OSError:
            pass
        with self._lock:
            self._conns.pop(c.id, None)

    def _send(self, c, data):
        if c.closed:
            return
        c.out += data
        self._flush(c)

    def _flush(self, c):
        while c.out and not c.closed:
            try:
                n = c.sock.send(c.out)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._drop(c)
                return
            del c.out[:n]
        if c.closed:
            return
        if not c.out and (c.close_after_flush or c.rst_after_flush):
            self._drop(c, rst=c.rst_after_flush)
            return
        self._interest(c)

    def _on_readable(self, c):
        try:
            data = c.sock.recv(262144)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            if c.inbuf.strip(b"\r\n") and not c.busy and c.discard_body is None:
                self._closed_inside_request(c)
            self._drop(c)
            return
        c.last_active = time.monotonic()
        c.inbuf += data
        self._process(c)

    def _closed_inside_request(self, c):
        """EOF with a request pending. A cut body is what a proxy does when its
        client goes away mid-request: recorded as an incomplete arrival. A cut
        head is never legitimate (a proxy writes its head at once)."""
        try:
            arrival, consumed, complete = self._parse(c)
        except h.ProtocolError as e:
            self._error(c, "bad request from proxy: %s" % e)
            return
        if arrival is None:
            self._error(c, "connection closed inside a request head: %r" % bytes(c.inbuf[:200]))
            return
        self._record(arrival, c)

    def _error(self, c, message):
        with self._lock:
            self.errors.append("%s conn %d: %s" % (self.name, c.id, message))

    # -- requests --------------------------------------------------------
    def _process(self, c):
        while not c.closed and not c.busy and c.inbuf:
            if c.discard_body is not None:
                if not self._skip_body(c):
                    return
                continue
            head_end = c.inbuf.find(b"\r\n\r\n")
            if head_end < 0:
                if len(c.inbuf) > 1 << 20:
                    self._error(c, "request head over 1 MiB")
                    self._drop(c)
                return
            try:
                arrival, consumed, complete = self._parse(c)
            except h.ProtocolError as e:
                self._error(c, "bad request from proxy: %s" % e)
                self._send(c, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                c.close_after_flush = True
                c.busy = True
                self._flush(c)
                return
            if arrival is None:
                return
            if not complete:
                # Head only: an early handler may answer now; else wait for the body.
                if self.early_handler is not None:
                    action = self.early_handler(arrival)
                    if action is not None:
                        del c.inbuf[:consumed]
                        self._record(arrival, c)
                        c.discard_body = h._framing(arrival.headers, is_request=True)
                        self._start(c, arrival, action)
                        continue
                return
            del c.inbuf[:consumed]
            self._record(arrival, c)
            action = None
            if self.early_handler is not None:
                action = self.early_handler(arrival)
            if action is None:
                action = self.handler(arrival)
            self._start(c, arrival, action)

    def _skip_body(self, c):
        """After an early answer: swallow the body that follows. True when done."""
        kind, length = c.discard_body
        if kind == "length":
            take = min(length, len(c.inbuf))
            del c.inbuf[:take]
            length -= take
            if length > 0:
                c.discard_body = (kind, length)
                return False
            c.discard_body = None
            return True
        if kind == "chunked":
            data = bytes(c.inbuf)
            reader = h._Reader(_bytes_recv(data))
            try:
                h._read_chunked(reader, lambda d: None)
            except h.IncompleteMessage:
                return False
            del c.inbuf[:len(data) - len(reader.buf)]
            c.discard_body = None
            return True
        c.discard_body = None
        return True

    def _parse(self, c):
        """(arrival, bytes consumed, body complete) or (None, 0, False) when
        the head itself is incomplete. Raises ProtocolError."""
        data = bytes(c.inbuf)
        reader = h._Reader(_bytes_recv(data))
        try:
            head = h._read_head(reader)
        except h.IncompleteMessage:
            return None, 0, False
        if head is None:
            return None, 0, False
        start, headers = head
        m = _REQUEST_LINE.fullmatch(start)
        if not m:
            raise h.ProtocolError("bad request line %r" % start[:200])
        if len([1 for k, _ in headers if k.lower() == "host"]) != 1:
            raise h.ProtocolError("request without exactly one Host: %r" % headers)
        kind, length = h._framing(headers, is_request=True)
        arrival = h.Arrival(0, c.id, m.group(1), m.group(2), m.group(3), headers, time.monotonic())
        arrival.framing = kind
        arrival.conn_request = c.requests
        head_len = len(data) - len(reader.buf)
        body = []

        def sink(d):
            arrival.body_len += len(d)
            if sum(len(x) for x in body) < self.record_limit:
                body.append(d)
        try:
            if kind == "length":
                reader.read_exact(length, sink)
            elif kind == "chunked":
                arrival.trailers = h._read_chunked(reader, sink)
        except h.IncompleteMessage:
            return arrival, head_len, False
        arrival.body = b"".join(body)
        arrival.body_complete = True
        arrival.time_complete = time.monotonic()
        return arrival, len(data) - len(reader.buf), True

    def _record(self, arrival, c):
        c.requests += 1
        arrival.sent = "nothing"
        with self._lock:
            arrival.index = len(self.arrivals)
            self.arrivals.append(arrival)

    # -- running actions -------------------------------------------------
    def _start(self, c, arrival, action):
        c.busy = True
        self._run_action(c, arrival, action)

    def _done(self, c, keep):
        """The action finished: go on with the next request or close."""
        if c.closed:
            return
        if not keep:
            c.close_after_flush = True
            self._flush(c)
            return
        c.busy = False
        if self.idle_reset is not None:
            probability, rng = self.idle_reset
            if rng.random() < probability:
                stamp = c.requests
                def reset_if_still_idle(c=c, stamp=stamp):
                    if not c.closed and not c.busy and c.requests == stamp and not c.inbuf:
                        self.idle_resets += 1
                        self._drop(c, rst=True)
                self._call_later(rng.uniform(0.0, 0.01), reset_if_still_idle)
        if c.inbuf:
            self._process(c)

    def _run_action(self, c, arrival, a):
        if c.closed:
            return
        wants_close = "close" in [t.lower() for t in arrival.header_list("connection")]
        if isinstance(a, Respond):
            headers = list(a.headers)
            names = [k.lower() for k, _ in headers]
            body = a.body(arrival) if callable(a.body) else a.body
            if (a.close or wants_close) and "connection" not in names:
                headers.append(("Connection", "close"))
            bodiless = a.status < 200 or a.status in (204, 304)
            if not bodiless and "content-length" not in names and "transfer-encoding" not in names:
                headers.append(("Content-Length", str(len(body))))
            payload = b"" if (arrival.method == "HEAD" or bodiless) else body
            self._send(c, h._head_bytes(a.status, headers, a.reason) + payload)
            arrival.sent = "all"
            self._done(c, not (a.close or wants_close))
        elif isinstance(a, Raw):
            self._send(c, a.data)
            arrival.sent = "head" if a.data else "nothing"
            if a.rst:
                c.rst_after_flush = True
                self._flush(c)
            elif a.close:
                self._done(c, False)
            else:
                self._done(c, True)
        elif isinstance(a, Close):
            self._drop(c, rst=a.rst)
        elif isinstance(a, Hang):
            pass  # keep the connection; the proxy gives up (its close is seen as EOF)
        elif isinstance(a, Delay):
            self._call_later(a.seconds, lambda: self._run_action(c, arrival, a.then))
        elif isinstance(a, HeadThenClose):
            head = h._head_bytes(a.status, [("Content-Length", str(a.content_length))])
            self._send(c, head + (b"" if arrival.method == "HEAD" else a.partial))
            arrival.sent = "head"

            def finish():
                if a.rst:
                    c.rst_after_flush = True
                    self._flush(c)
                else:
                    c.close_after_flush = True
                    self._flush(c)
            self._call_later(a.pause, finish)
        elif isinstance(a, SlowBody):
            headers = list(a.headers) + [("Content-Length", str(len(a.body)))]
            if wants_close:
                headers.append(("Connection", "close"))
            self._send(c, h._head_bytes(a.status, headers))
            arrival.sent = "head"
            if arrival.method == "HEAD":
                arrival.sent = "all"
                self._done(c, not wants_close)
                return
            step = max(1, len(a.body) // max(1, a.pieces))
            parts = [a.body[i:i + step] for i in range(0, len(a.body), step)]

            def next_piece(i=0):
                if c.closed:
                    return
                self._send(c, parts[i])
                if i + 1 < len(parts):
                    self._call_later(a.pause, lambda: next_piece(i + 1))
                else:
                    arrival.sent = "all"
                    self._done(c, not wants_close)
            self._call_later(a.pause, next_piece)
        else:
            raise TypeError("unknown action %r" % (a,))


def _bytes_recv(data):
    chunks = [data]

    def recv(_n):
        return chunks.pop() if chunks else b""
    return recv
