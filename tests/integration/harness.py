"""Integration-test harness for onelayer (Python 3.11 standard library only).

Three pieces, usable on their own:

* ``Origin``: a scriptable raw-socket HTTP/1.1 upstream running in threads on
  127.0.0.1:0. It records every request that reaches it (``Arrival``) and
  answers each one with the next action of its script (``respond``,
  ``close_without_response``, ``head_then_close``, ``hang``, ``delay``,
  ``close_delimited``, ``raw``, ``stream_response``) or its default action.
  It validates the framing of what it receives, so a proxy that forwards a
  malformed message is caught (``Origin.errors``).
* ``Proxy``: writes a YAML config to a private temp dir, starts
  ``$ONELAYER_BIN --config F --ports-file P`` and learns its ports from P
  (the proxy binds port 0; ports are never guessed here).
* A raw client: ``build_request``, ``Conn`` (one keep-alive connection),
  ``raw_request`` and ``parse_responses`` (Content-Length, chunked,
  close-delimited, HEAD/1xx/204/304, several pipelined responses).

``IntegrationTest`` is a ``unittest.TestCase`` base class that ties them
together with cleanups, so no process or thread outlives a test even when it
fails, and prints the proxy's log tail when a test fails.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import select
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import unittest

# The repository this file is in: tests read their data from it, never from
# anything beside it.
SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

CRLF = b"\r\n"
MAX_LINE = 1 << 20


class ProtocolError(Exception):
    """The peer sent bytes that are not valid HTTP/1.1 framing."""


class IncompleteMessage(Exception):
    """The connection ended (or timed out) in the middle of a message."""

    def __init__(self, message, responses=(), partial=None):
        super().__init__(message)
        self.responses = list(responses)  # complete responses before the cut
        self.partial = partial            # Response with what was read, if the head was complete


# --------------------------------------------------------------------------
# Header helpers shared by Arrival and Response.

def wait_until(predicate, timeout=5.0, interval=0.02):
    """Polls predicate() until it returns a truthy value or ``timeout``
    seconds pass; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got or time.monotonic() >= deadline:
            return got
        time.sleep(interval)


def wait_for_lines(read, count, timeout=5.0):
    """What a peer wrote down (``read()``: a list, e.g. an NGINX access log,
    an origin's resets or GOAWAYs, a counter's records) once it holds
    ``count`` items, or what it holds after ``timeout`` seconds, for the
    caller's assertion to show. A peer writes its log line after its answer
    has gone: read at once, the line may not be there yet."""
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if len(got) >= count or time.monotonic() >= deadline:
            return got
        time.sleep(0.02)


def fd_count(pid):
    """Open file descriptors of a process."""
    return len(os.listdir("/proc/%d/fd" % pid))


def _normalize_headers(headers):
    if headers is None:
        return []
    if isinstance(headers, dict):
        return [(str(k), str(v)) for k, v in headers.items()]
    return [(str(k), str(v)) for k, v in headers]


class _HeaderAccess:
    headers: list

    def header(self, name, default=None):
        """First value of header ``name`` (case-insensitive), or default."""
        lname = name.lower()
        for k, v in self.headers:
            if k.lower() == lname:
                return v
        return default

    def header_all(self, name):
        """Every value of header ``name`` in arrival order."""
        lname = name.lower()
        return [v for k, v in self.headers if k.lower() == lname]

    def has_header(self, name):
        return bool(self.header_all(name))

    def header_list(self, name):
        """Comma-separated list values of every ``name`` field, joined, trimmed."""
        out = []
        for v in self.header_all(name):
            out.extend(p.strip() for p in v.split(",") if p.strip())
        return out

    def header_names(self):
        return [k.lower() for k, _ in self.headers]


# --------------------------------------------------------------------------
# Buffered, incremental reader. Works over a socket or over bytes, so the same
# code parses what the origin receives and what the client receives.

class _Reader:
    def __init__(self, recv, chunk=256 * 1024):
        self._recv = recv
        self._chunk = chunk
        self.buf = bytearray()
        self.eof = False

    def fill(self):
        if self.eof:
            return False
        try:
            data = self._recv(self._chunk)
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def at_clean_eof(self):
        """True when no more bytes will come and none are buffered."""
        while not self.buf:
            if not self.fill():
                return True
        return False

    def read_line(self, limit=MAX_LINE):
        """One CRLF-terminated line without the CRLF; None on EOF before any byte."""
        start = 0
        while True:
            idx = self.buf.find(CRLF, start)
            if idx >= 0:
                line = bytes(self.buf[:idx])
                del self.buf[: idx + 2]
                if b"\n" in line or b"\r" in line:
                    raise ProtocolError("bare CR or LF in line %r" % line[:200])
                return line
            if len(self.buf) > limit:
                raise ProtocolError("line longer than %d bytes" % limit)
            start = max(0, len(self.buf) - 1)
            if not self.fill():
                if not self.buf:
                    return None
                raise IncompleteMessage("EOF inside a line: %r" % bytes(self.buf[:200]))

    def read_exact(self, n, sink):
        """Deliver exactly n bytes to sink(bytes), streaming; IncompleteMessage if cut."""
        remaining = n
        while remaining > 0:
            if self.buf:
                take = min(remaining, len(self.buf))
                sink(bytes(self.buf[:take]))
                del self.buf[:take]
                remaining -= take
                continue
            if self.eof:
                raise IncompleteMessage("EOF with %d of %d body bytes missing" % (remaining, n))
            try:
                data = self._recv(min(self._chunk, max(remaining, 4096)))
            except ConnectionResetError:
                data = b""
            if not data:
                self.eof = True
                raise IncompleteMessage("EOF with %d of %d body bytes missing" % (remaining, n))
            if len(data) > remaining:  # pipelined bytes of the next message
                self.buf += data[remaining:]
                data = data[:remaining]
            sink(data)
            remaining -= len(data)

    def read_to_eof(self, sink):
        if self.buf:
            sink(bytes(self.buf))
            self.buf.clear()
        while not self.eof:
            try:
                data = self._recv(self._chunk)
            except ConnectionResetError:
                data = b""
            if not data:
                self.eof = True
                break
            sink(data)


def _read_head(reader, limit=MAX_LINE):
    """(start line, [(name, value)]) or None on a clean EOF before the head."""
    first = reader.read_line(limit)
    if first is None:
        return None
    headers = []
    total = len(first)
    while True:
        line = reader.read_line(limit)
        if line is None:
            raise IncompleteMessage("EOF inside the header section")
        if line == b"":
            break
        total += len(line)
        if total > limit:
            raise ProtocolError("header section larger than %d bytes" % limit)
        if line[:1] in (b" ", b"\t"):
            raise ProtocolError("obs-fold line %r" % line[:200])
        name, sep, value = line.partition(b":")
        if not sep or not name or re.search(rb"[\s\x00-\x1f()<>@,;:\\\"/\[\]?={}\x7f]", name):
            raise ProtocolError("bad header line %r" % line[:200])
        headers.append((name.decode("latin-1"), value.strip(b" \t").decode("latin-1")))
    return first.decode("latin-1"), headers


def _framing(headers, is_request):
    """RFC 9112 6.3 body framing: ('none'|'length'|'chunked'|'close', length)."""
    te = [v.strip().lower() for k, v in headers if k.lower() == "transfer-encoding"]
    cl = [v.strip() for k, v in headers if k.lower() == "content-length"]
    if te and cl:
        raise ProtocolError("both Transfer-Encoding and Content-Length")
    if te:
        codings = [c.strip() for v in te for c in v.split(",") if c.strip()]
        if codings and codings[-1] == "chunked" and codings.count("chunked") == 1:
            return "chunked", None
        if is_request:
            raise ProtocolError("request Transfer-Encoding without final chunked: %r" % te)
        return "close", None
    if cl:
        values = {p.strip() for v in cl for p in v.split(",")}
        if len(values) != 1:
            raise ProtocolError("conflicting Content-Length values %r" % cl)
        value = values.pop()
        if not value.isdigit():
            raise ProtocolError("bad Content-Length %r" % value)
        return "length", int(value)
    return ("none", 0) if is_request else ("close", None)


def _read_chunked(reader, sink):
    """Decode a chunked body into sink; returns the trailer fields."""
    while True:
        line = reader.read_line()
        if line is None:
            raise IncompleteMessage("EOF before a chunk size line")
        size_text = line.split(b";", 1)[0].strip(b" \t")
        if not size_text or not re.fullmatch(rb"[0-9A-Fa-f]+", size_text):
            raise ProtocolError("bad chunk size line %r" % line[:100])
        size = int(size_text, 16)
        if size == 0:
            break
        reader.read_exact(size, sink)
        end = reader.read_line()
        if end is None:
            raise IncompleteMessage("EOF after chunk data")
        if end != b"":
            raise ProtocolError("chunk data not followed by CRLF")
    trailers = []
    while True:
        line = reader.read_line()
        if line is None:
            raise IncompleteMessage("EOF inside the trailer section")
        if line == b"":
            return trailers
        name, sep, value = line.partition(b":")
        if not sep:
            raise ProtocolError("bad trailer line %r" % line[:100])
        trailers.append((name.decode("latin-1"), value.strip().decode("latin-1")))


# --------------------------------------------------------------------------
# Client side.

class Response(_HeaderAccess):
    """A parsed response. Unpacks as (status, headers, body)."""

    def __init__(self, status, headers, body, reason="", version="HTTP/1.1",
                 framing="none", trailers=None, body_len=None):
        self.status = status
        self.headers = headers
        self.body = body
        self.reason = reason
        self.version = version
        self.framing = framing  # 'none' | 'length' | 'chunked' | 'close'
        self.trailers = trailers or []
        self.body_len = len(body) if body_len is None else body_len

    def __iter__(self):
        return iter((self.status, self.headers, self.body))

    def __getitem__(self, i):
        return (self.status, self.headers, self.body)[i]

    def __len__(self):
        return 3

    def __repr__(self):
        body = self.body if len(self.body) <= 80 else self.body[:80] + b"..."
        return "Response(%d %s, framing=%s, headers=%r, body[%d]=%r)" % (
            self.status, self.reason, self.framing, self.headers, self.body_len, body)

    def wants_close(self):
        return "close" in [t.lower() for t in self.header_list("connection")] or (
            self.version == "HTTP/1.0"
            and "keep-alive" not in [t.lower() for t in self.header_list("connection")])


def read_response(reader, method="GET", sink=None):
    """Read one response (interim 1xx included) or None on clean EOF.

    With ``sink`` the body is passed to sink(bytes) piece by piece and
    Response.body stays empty (Response.body_len still counts it)."""
    head = _read_head(reader)
    if head is None:
        return None
    start, headers = head
    m = re.fullmatch(r"(HTTP/1\.[01]) ([0-9]{3})(?: (.*))?", start)
    if not m:
        raise ProtocolError("bad status line %r" % start[:200])
    status = int(m.group(2))
    resp = Response(status, headers, b"", reason=m.group(3) or "", version=m.group(1))
    if 100 <= status < 200 or status in (204, 304) or method.upper() == "HEAD":
        resp.framing = "none"
        resp.body_len = 0
        return resp
    kind, length = _framing(headers, is_request=False)
    resp.framing = kind
    parts = []
    count = [0]

    def collect(data):
        count[0] += len(data)
        if sink is not None:
            sink(data)
        else:
            parts.append(data)

    try:
        if kind == "length":
            reader.read_exact(length, collect)
        elif kind == "chunked":
            resp.trailers = _read_chunked(reader, collect)
        else:
            reader.read_to_eof(collect)
    except IncompleteMessage as e:
        resp.body = b"".join(parts)
        resp.body_len = count[0]
        raise IncompleteMessage(str(e), partial=resp) from None
    resp.body = b"".join(parts)
    resp.body_len = count[0]
    return resp


def parse_responses(data, methods=None, include_interim=False):
    """Parse every response in ``data`` (bytes read until the peer closed).

    ``methods`` lists the request methods in order (HEAD responses have no
    body); default GET for all. Raises IncompleteMessage (with .responses and
    .partial) when the data ends inside a response, ProtocolError on bad
    framing."""
    chunks = [bytes(data)]
    reader = _Reader(lambda n: chunks.pop() if chunks else b"")
    out = []
    finals = 0
    while True:
        method = "GET"
        if methods is not None and finals < len(methods):
            method = methods[finals]
        try:
            resp = read_response(reader, method)
        except IncompleteMessage as e:
            raise IncompleteMessage(str(e), responses=out, partial=e.partial) from None
        if resp is None:
            return out
        if resp.status >= 200 or resp.status == 101:
            finals += 1
            out.append(resp)
        elif include_interim:
            out.append(resp)


def build_request(method="GET", target="/", headers=None, body=b"", *, chunked=False,
                  chunk_size=None, host="test.local", version="HTTP/1.1", trailers=None):
    """Serialize a request. Adds Host (unless given) and Content-Length (when
    there is a body or the method usually has one), or chunked framing."""
    headers = _normalize_headers(headers)
    names = [k.lower() for k, _ in headers]
    out = ["%s %s %s" % (method, target, version)]
    if "host" not in names and host is not None:
        out.append("Host: %s" % host)
    for k, v in headers:
        out.append("%s: %s" % (k, v))
    if isinstance(body, str):
        body = body.encode()
    if chunked:
        if "transfer-encoding" not in names:
            out.append("Transfer-Encoding: chunked")
        payload = encode_chunked(body, chunk_size or max(1, len(body)), trailers)
    else:
        framed = "content-length" in names or "transfer-encoding" in names
        if not framed and (body or method.upper() in ("POST", "PUT", "PATCH")):
            out.append("Content-Length: %d" % len(body))
        payload = body
    return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + payload


def encode_chunked(body, chunk_size, trailers=None):
    parts = []
    for i in range(0, len(body), chunk_size):
        piece = body[i:i + chunk_size]
        parts.append(b"%x\r\n%s\r\n" % (len(piece), piece))
    parts.append(b"0\r\n")
    for k, v in _normalize_headers(trailers):
        parts.append(("%s: %s\r\n" % (k, v)).encode("latin-1"))
    parts.append(b"\r\n")
    return b"".join(parts)


class Conn:
    """One client connection to ``port`` with keep-alive and pipelining support."""

    def __init__(self, port, host="127.0.0.1", timeout=10.0):
        self.port = port
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = _Reader(self.sock.recv)
        self.interim = []  # 1xx responses seen by request()/read_response()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def request(self, method="GET", target="/", headers=None, body=b"", *, chunked=False,
                chunk_size=None, host="test.local", sink=None, trailers=None):
        """Send one request and read its final response."""
        self.send(build_request(method, target, headers, body, chunked=chunked,
                                chunk_size=chunk_size, host=host, trailers=trailers))
        return self.read_response(method, sink=sink)

    def read_response(self, method="GET", sink=None, include_interim=False):
        """Next final response (1xx go to self.interim unless include_interim).
        Raises IncompleteMessage if the connection ends first."""
        while True:
            try:
                resp = read_response(self.reader, method, sink=sink)
            except TimeoutError:
                raise TimeoutError("no complete response within %.1fs; unparsed bytes: %r" % (
                    self.timeout, bytes(self.reader.buf[:300]))) from None
            if resp is None:
                raise IncompleteMessage("connection closed before a response")
            if 100 <= resp.status < 200 and resp.status != 101:
                self.interim.append(resp)
                if include_interim:
                    return resp
                continue
            return resp

    def wait_for_data(self, timeout):
        """True when bytes (or EOF) are readable within timeout."""
        if self.reader.buf:
            return True
        r, _, _ = select.select([self.sock], [], [], timeout)
        return bool(r)

    def closed_by_peer(self, timeout=2.0):
        """True if the peer closes (EOF or reset) within timeout without sending
        more bytes; False if it stays open or sends data."""
        if self.reader.buf:
            return False
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            r, _, _ = select.select([self.sock], [], [], left)
            if not r:
                return False
            try:
                data = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not data:
                return True
            self.reader.buf += data
            return False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def raw_exchange(port, data=b"", *, pieces=None, pause=0.05, timeout=5.0, responses=None,
                 methods=None, half_close=False, host="127.0.0.1"):
    """Send ``data`` (or ``pieces`` with ``pause`` between them) on a new
    connection, optionally half-close, then read until the peer closes,
    ``timeout`` passes, or (with ``responses=n``) n final responses arrived.
    Returns (bytes received, closed) where closed says the peer ended the
    connection (EOF or reset). Never raises on reset or timeout."""
    sock = socket.create_connection((host, port), timeout=timeout)
    got = bytearray()
    closed = False
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            for piece in (pieces if pieces is not None else [data]):
                sock.sendall(piece)
                if pieces is not None:
                    time.sleep(pause)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            r, _, _ = select.select([sock], [], [], left)
            if not r:
                break
            try:
                chunk = sock.recv(65536)
            except OSError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            got += chunk
            if responses is not None and _count_complete(got, methods) >= responses:
                break
    finally:
        sock.close()
    return bytes(got), closed


def raw_request(port, data, timeout=5.0, responses=None, methods=None, half_close=False,
                host="127.0.0.1"):
    """raw_exchange's bytes alone."""
    return raw_exchange(port, data, timeout=timeout, responses=responses, methods=methods,
                        half_close=half_close, host=host)[0]


def _count_complete(data, methods):
    try:
        return len(parse_responses(data, methods))
    except IncompleteMessage as e:
        return len(e.responses)
    except ProtocolError:
        return 0


# --------------------------------------------------------------------------
# Origin: scriptable upstream.

class Arrival(_HeaderAccess):
    """One request as the origin received it."""

    def __init__(self, index, conn_id, method, target, version, headers, time_head):
        self.index = index
        self.conn_id = conn_id
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.time = time_head          # time.monotonic() when the head was complete
        self.time_complete = None      # ... when the body was complete
        self.framing = "none"
        self.body = b""                # first Origin.record_limit bytes of the body
        self.body_len = 0
        self.body_sha256 = None
        self.body_complete = False
        self.trailers = []
        self.sent_continue = False

    def __repr__(self):
        return "Arrival(#%d conn=%d %s %s body[%d]%s)" % (
            self.index, self.conn_id, self.method, self.target, self.body_len,
            "" if self.body_complete else " INCOMPLETE")


class _Ctx:
    """What an action sees: the connection and the request it answers."""

    def __init__(self, origin, sock, arrival):
        self.origin = origin
        self.sock = sock
        self.arrival = arrival
        self.method = arrival.method
        tokens = [t.lower() for t in arrival.header_list("connection")]
        self.client_wants_close = "close" in tokens or (
            arrival.version == "HTTP/1.0" and "keep-alive" not in tokens)

    def send(self, data):
        self.sock.sendall(data)

    def sleep(self, seconds):
        """Sleep unless the origin stops; False when stopped."""
        return not self.origin._stop.wait(seconds)


def _status_line(status, reason):
    if reason is None:
        reason = _REASONS.get(status, "Status")
    return ("HTTP/1.1 %d %s\r\n" % (status, reason)).encode("latin-1")


_REASONS = {100: "Continue", 200: "OK", 201: "Created", 204: "No Content",
            206: "Partial Content", 301: "Moved Permanently", 304: "Not Modified",
            400: "Bad Request", 404: "Not Found", 408: "Request Timeout",
            429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
            503: "Service Unavailable", 504: "Gateway Timeout"}


def _head_bytes(status, headers, reason=None):
    out = [_status_line(status, reason)]
    for k, v in headers:
        out.append(("%s: %s\r\n" % (k, v)).encode("latin-1"))
    out.append(CRLF)
    return b"".join(out)


def _rst_close(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()


class Action:
    """An origin's answer to one arrival. run() returns True to keep the
    connection open for the next request."""

    def run(self, ctx):
        raise NotImplementedError


class _Respond(Action):
    def __init__(self, status=200, headers=None, body=b"", chunked=False, chunk_size=None,
                 reason=None, close=False, close_after=False, trailers=None, omit_length=False):
        self.status = status
        self.headers = _normalize_headers(headers)
        self.body = body
        self.chunked = chunked
        self.chunk_size = chunk_size
        self.reason = reason
        self.close = close
        self.close_after = close_after
        self.trailers = trailers
        self.omit_length = omit_length

    def run(self, ctx):
        body = self.body(ctx.arrival) if callable(self.body) else self.body
        if isinstance(body, str):
            body = body.encode()
        headers = list(self.headers)
        names = [k.lower() for k, _ in headers]
        closing = self.close or ctx.client_wants_close
        if closing and "connection" not in names:
            headers.append(("Connection", "close"))
        bodiless = 100 <= self.status < 200 or self.status in (204, 304)
        if self.chunked:
            headers.append(("Transfer-Encoding", "chunked"))
            payload = encode_chunked(body, self.chunk_size or max(1, len(body)), self.trailers)
        else:
            if not bodiless and not self.omit_length and "content-length" not in names:
                headers.append(("Content-Length", str(len(body))))
            payload = body
        if ctx.method == "HEAD" or bodiless:
            payload = b""
        ctx.send(_head_bytes(self.status, headers, self.reason) + payload)
        return not (closing or self.close_after)


def respond(status=200, headers=None, body=b"", *, chunked=False, chunk_size=None, reason=None,
            close=False, close_after=False, trailers=None):
    """Answer with a complete response. ``body`` may be bytes or a callable
    taking the Arrival. Content-Length is added unless chunked. ``close`` adds
    ``Connection: close`` and closes; ``close_after`` closes silently (no
    header) after the response, like a server racing its keep-alive timeout."""
    return _Respond(status, headers, body, chunked, chunk_size, reason, close, close_after, trailers)


def retry_after(seconds, status=503, headers=None, body=b"retry later", **kw):
    """A response carrying ``Retry-After: seconds`` (int, str or HTTP-date)."""
    return respond(status, _normalize_headers(headers) + [("Retry-After", str(seconds))], body, **kw)


def echo(status=200, headers=None):
    """Answer with the request body (Content-Length framed)."""
    return respond(status, headers, lambda a: a.body)


class _CloseWithoutResponse(Action):
    def __init__(self, rst):
        self.rst = rst

    def run(self, ctx):
        if self.rst:
            _rst_close(ctx.sock)
        else:
            ctx.sock.shutdown(socket.SHUT_RDWR)
        return False


def close_without_response(rst=False):
    """Close before any response byte: FIN, or RST (SO_LINGER 0) with rst=True."""
    return _CloseWithoutResponse(rst)


class _HeadThenClose(Action):
    def __init__(self, status, headers, content_length, partial, chunked, rst, pause):
        self.status = status
        self.headers = _normalize_headers(headers)
        self.content_length = content_length
        self.partial = partial
        self.chunked = chunked
        self.rst = rst
        self.pause = pause

    def run(self, ctx):
        headers = list(self.headers)
        if self.chunked:
            headers.append(("Transfer-Encoding", "chunked"))
            body = b"%x\r\n%s" % (max(len(self.partial) * 2, 1), self.partial)
        else:
            headers.append(("Content-Length", str(self.content_length)))
            body = self.partial
        ctx.send(_head_bytes(self.status, headers) + body)
        if self.pause:
            ctx.sleep(self.pause)
        if self.rst:
            _rst_close(ctx.sock)
        else:
            ctx.sock.shutdown(socket.SHUT_RDWR)
        return False


def head_then_close(status=200, headers=None, content_length=1000, partial=b"x" * 10, *,
                    chunked=False, rst=False, pause=0.05):
    """Send a complete head promising ``content_length`` bytes (or a chunked
    body), ``partial`` body bytes, wait ``pause``, then close (or reset)."""
    return _HeadThenClose(status, headers, content_length, partial, chunked, rst, pause)


class _Hang(Action):
    def run(self, ctx):
        while not ctx.origin._stop.is_set():
            r, _, _ = select.select([ctx.sock], [], [], 0.05)
            if r:
                try:
                    if not ctx.sock.recv(65536):
                        return False  # the proxy gave up on us
                except OSError:
                    return False
        return False


def hang():
    """Never answer; hold the connection until the peer closes it or the origin stops."""
    return _Hang()


class _Delay(Action):
    def __init__(self, seconds, then):
        self.seconds = seconds
        self.then = then

    def run(self, ctx):
        if not ctx.sleep(self.seconds):
            return False
        return self.then.run(ctx)


def delay(seconds, then=None):
    """Wait, then run ``then`` (default: 200 ok)."""
    return _Delay(seconds, then or respond(200, body=b"ok"))


class _CloseDelimited(Action):
    def __init__(self, status, headers, body, pieces, pause):
        self.status = status
        self.headers = _normalize_headers(headers)
        self.body = body
        self.pieces = pieces
        self.pause = pause

    def run(self, ctx):
        headers = self.headers + [("Connection", "close")]
        ctx.send(_head_bytes(self.status, headers))
        if ctx.method != "HEAD":
            step = max(1, len(self.body) // max(1, self.pieces))
            for i in range(0, len(self.body), step):
                ctx.send(self.body[i:i + step])
                if self.pause:
                    ctx.sleep(self.pause)
        ctx.sock.shutdown(socket.SHUT_RDWR)
        return False


def close_delimited(status=200, headers=None, body=b"", pieces=1, pause=0.0):
    """A response without Content-Length or chunked: the body ends at close."""
    return _CloseDelimited(status, headers, body, pieces, pause)


class _Raw(Action):
    def __init__(self, data, close):
        self.data = data
        self.close = close

    def run(self, ctx):
        ctx.send(self.data)
        if self.close:
            ctx.sock.shutdown(socket.SHUT_RDWR)
        return not self.close


def raw(data, close=True):
    """Send these exact bytes (e.g. an unparseable response), then close."""
    return _Raw(data, close)


class _StreamResponse(Action):
    def __init__(self, status, total, chunked, block, headers):
        self.status = status
        self.total = total
        self.chunked = chunked
        self.block = block
        self.headers = _normalize_headers(headers)

    def run(self, ctx):
        headers = list(self.headers)
        if self.chunked:
            headers.append(("Transfer-Encoding", "chunked"))
        else:
            headers.append(("Content-Length", str(self.total)))
        ctx.send(_head_bytes(self.status, headers))
        if ctx.method == "HEAD":
            return True
        sent = 0
        view = memoryview(self.block)
        while sent < self.total:
            n = min(len(self.block), self.total - sent)
            if self.chunked:
                ctx.send(b"%x\r\n" % n)
                ctx.send(view[:n])
                ctx.send(CRLF)
            else:
                ctx.send(view[:n])
            sent += n
        if self.chunked:
            ctx.send(b"0\r\n\r\n")
        return not ctx.client_wants_close


def stream_response(total, status=200, *, chunked=False, block=None, headers=None):
    """A ``total``-byte body generated on the fly by repeating ``block``
    (default: pattern_block()), never held in memory at once."""
    return _StreamResponse(status, total, chunked, block or pattern_block(), headers)


def pattern_block(size=64 * 1024, seed=1):
    """Deterministic non-repeating-looking bytes for body payloads."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(b"%d:%d" % (seed, counter)).digest()
        counter += 1
    return bytes(out[:size])


def pattern_digest(total, block=None):
    """sha256 of ``total`` bytes made by repeating ``block`` (what
    stream_response sends / stream_body produces)."""
    block = block or pattern_block()
    h = hashlib.sha256()
    full, rest = divmod(total, len(block))
    for _ in range(full):
        h.update(block)
    h.update(block[:rest])
    return h.hexdigest()


class Origin:
    """A scriptable HTTP/1.1 upstream on 127.0.0.1:<port>.

    ``script``: list of Actions used one per arrival (in arrival order, across
    connections), then ``default`` (200 ok). ``handler(arrival) -> Action``,
    when given, decides every answer instead. ``record_limit``: how many body
    bytes each Arrival keeps (length and sha256 always cover all of it).
    ``send_continue``: answer ``Expect: 100-continue`` with an interim 100.
    ``recv_throttle=(n, seconds)``: pause after every n bytes read, to make
    the origin a slow reader (so a proxy without backpressure would buffer)."""

    def __init__(self, script=None, default=None, handler=None, record_limit=8 << 20,
                 send_continue=True, name="origin", recv_throttle=None, host="127.0.0.1"):
        self.name = name
        self._script = list(script or [])
        self.default = default or respond(200, body=b"ok")
        self.handler = handler
        self.record_limit = record_limit
        self.send_continue = send_continue
        self.recv_throttle = recv_throttle  # (bytes, seconds): pause after each `bytes` read
        self.arrivals = []
        self.errors = []               # protocol errors in what the proxy sent us
        self.connections_accepted = 0
        self.bytes_received = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._conns = {}               # conn_id -> socket
        self._idle = set()             # conn ids waiting for a request with nothing buffered
        self._threads = []
        self._listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                                       socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, 0))
        self._listener.listen(256)
        self.port = self._listener.getsockname()[1]
        self._accept_thread = threading.Thread(target=self._accept_loop, daemon=True,
                                               name="%s-accept" % name)
        self._accept_thread.start()

    # -- scripting -------------------------------------------------------
    def push(self, *actions):
        """Append actions to the script."""
        with self._lock:
            self._script.extend(actions)

    def set_script(self, actions):
        with self._lock:
            self._script = list(actions)

    def _next_action(self, arrival):
        if self.handler is not None:
            return self.handler(arrival)
        with self._lock:
            if self._script:
                return self._script.pop(0)
        return self.default

    # -- observation -----------------------------------------------------
    @property
    def endpoint(self):
        return "127.0.0.1:%d" % self.port

    def count(self):
        with self._lock:
            return len(self.arrivals)

    def snapshot(self):
        with self._lock:
            return list(self.arrivals)

    def wait_for(self, n, timeout=5.0):
        """Wait until at least n arrivals; returns the arrivals (maybe fewer on timeout)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.arrivals) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return list(self.arrivals)

    def conn_ids(self):
        with self._lock:
            return [a.conn_id for a in self.arrivals]

    def close_idle(self):
        """Close (FIN) every connection waiting for its next request, as a server
        whose keep-alive timeout fired does. Returns how many were closed."""
        with self._lock:
            ids = list(self._idle)
            socks = [self._conns[i] for i in ids if i in self._conns]
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return len(socks)

    def open_connections(self):
        with self._lock:
            return len(self._conns)

    # -- lifecycle -------------------------------------------------------
    def stop(self):
        if self._stop.is_set():
            return
        self._stop.set()
        try:
            self._listener.close()
        except OSError:
            pass
        with self._lock:
            socks = list(self._conns.values())
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._accept_thread.join(5)
        for t in list(self._threads):
            t.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- internals -------------------------------------------------------
    def _accept_loop(self):
        while not self._stop.is_set():
            try:
                r, _, _ = select.select([self._listener], [], [], 0.05)
                if not r:
                    continue
                sock, _ = self._listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.connections_accepted += 1
                conn_id = self.connections_accepted
                self._conns[conn_id] = sock
            t = threading.Thread(target=self._serve, args=(sock, conn_id), daemon=True,
                                 name="%s-conn-%d" % (self.name, conn_id))
            self._threads = [x for x in self._threads if x.is_alive()]
            self._threads.append(t)
            t.start()

    def _recv_counted(self, sock):
        since_pause = [0]

        def recv(n):
            data = sock.recv(n)
            with self._lock:
                self.bytes_received += len(data)
            if self.recv_throttle:
                since_pause[0] += len(data)
                every, seconds = self.recv_throttle
                if since_pause[0] >= every:
                    since_pause[0] = 0
                    self._stop.wait(seconds)
            return data
        return recv

    def _error(self, conn_id, message):
        with self._lock:
            self.errors.append("conn %d: %s" % (conn_id, message))

    def _serve(self, sock, conn_id):
        reader = _Reader(self._recv_counted(sock))
        try:
            while not self._stop.is_set():
                with self._lock:
                    if not reader.buf:
                        self._idle.add(conn_id)
                try:
                    head = _read_head(reader)
                finally:
                    with self._lock:
                        self._idle.discard(conn_id)
                if head is None:
                    return
                if not self._handle_one(sock, reader, conn_id, head):
                    return
        except IncompleteMessage as e:
            if not self._stop.is_set():
                self._error(conn_id, "incomplete request head: %s" % e)
        except ProtocolError as e:
            self._error(conn_id, "bad request from proxy: %s" % e)
            self._send_quietly(sock, _head_bytes(400, [("Content-Length", "0"),
                                                        ("Connection", "close")]))
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.pop(conn_id, None)
                self._idle.discard(conn_id)
            try:
                sock.close()
            except OSError:
                pass

    @staticmethod
    def _send_quietly(sock, data):
        try:
            sock.sendall(data)
        except OSError:
            pass

    def _handle_one(self, sock, reader, conn_id, head):
        start, headers = head
        m = re.fullmatch(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) (HTTP/1\.[01])", start)
        if not m:
            raise ProtocolError("bad request line %r" % start[:200])
        arrival = Arrival(0, conn_id, m.group(1), m.group(2), m.group(3), headers, time.monotonic())
        if len([1 for k, _ in headers if k.lower() == "host"]) != 1:
            raise ProtocolError("request without exactly one Host: %r" % headers)
        kind, length = _framing(headers, is_request=True)
        arrival.framing = kind
        expects = (arrival.header("expect") or "").lower() == "100-continue"
        if (self.send_continue and expects and kind != "none" and length != 0
                and len(reader.buf) < (length or 1)):
            sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            arrival.sent_continue = True
        digest = hashlib.sha256()
        kept = []
        kept_len = [0]

        def sink(data):
            digest.update(data)
            arrival.body_len += len(data)
            room = self.record_limit - kept_len[0]
            if room > 0:
                kept.append(data[:room])
                kept_len[0] += min(room, len(data))

        complete = True
        try:
            if kind == "length":
                reader.read_exact(length, sink)
            elif kind == "chunked":
                arrival.trailers = _read_chunked(reader, sink)
        except IncompleteMessage:
            complete = False  # the proxy abandoned the request (client went away?)
        arrival.body = b"".join(kept)
        arrival.body_sha256 = digest.hexdigest()
        arrival.body_complete = complete
        arrival.time_complete = time.monotonic()
        with self._cond:
            arrival.index = len(self.arrivals)
            self.arrivals.append(arrival)
            self._cond.notify_all()
        if not complete:
            return False
        ctx = _Ctx(self, sock, arrival)
        keep = self._next_action(arrival).run(ctx)
        return keep and not ctx.client_wants_close


def closed_port():
    """A 127.0.0.1 port that refuses connections: a bound socket that never
    listens (the port stays reserved, so nothing else can take it). Returns
    (port, socket); keep the socket open for as long as the port is needed."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1], s


def black_hole_port():
    """A 127.0.0.1 port that drops SYNs, like a black-holed host: a listener
    with backlog 0 that never accepts, its queue filled at once, so a connect
    hangs until the client's timeout. Returns (port, sockets); keep the
    sockets open for as long as the port is needed."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(0)
    port = s.getsockname()[1]
    keep = [s]
    for _ in range(3):
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        c.setblocking(False)
        try:
            c.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        keep.append(c)
    time.sleep(0.1)
    return port, keep


def concurrent_gets(port, total, concurrency=10, target="/item", host="test.local", timeout=10.0):
    """`total` GETs over `concurrency` keep-alive connections (a new one after
    an error): [(start time, status or 0 for no answer, seconds)]."""
    out = []
    lock = threading.Lock()
    left = [total]

    def run():
        conn = None
        while True:
            with lock:
                if left[0] == 0:
                    break
                left[0] -= 1
            t0 = time.monotonic()
            status = 0
            try:
                conn = conn or Conn(port, timeout=timeout)
                r = conn.request("GET", target, host=host)
                status = r.status
                if r.wants_close():
                    conn.close()
                    conn = None
            except (OSError, IncompleteMessage):
                if conn:
                    conn.close()
                conn = None
            with lock:
                out.append((t0, status, time.monotonic() - t0))
        if conn:
            conn.close()

    threads = [threading.Thread(target=run) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


# --------------------------------------------------------------------------
# Config helpers.

_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./:-]*")
_QUANTITY = re.compile(r"[0-9]+(?:\.[0-9]+)?[A-Za-z]+")  # 250ms, 1.5s, 64KiB
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"}


def _scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if v is None:
        return "null"
    s = str(v)
    if (_PLAIN.fullmatch(s) or _QUANTITY.fullmatch(s)) and s.lower() not in _RESERVED:
        return s
    return json.dumps(s)


def to_yaml(obj, indent=0):
    """Block-style YAML for dicts/lists/scalars (lists of scalars in flow style)."""
    pad = " " * indent
    lines = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, dict) and v:
                lines.append("%s%s:" % (pad, k))
                lines.append(to_yaml(v, indent + 2))
            elif isinstance(v, list) and v and any(isinstance(x, (dict, list)) for x in v):
                lines.append("%s%s:" % (pad, k))
                lines.append(to_yaml(v, indent + 2))
            elif isinstance(v, list):
                lines.append("%s%s: [%s]" % (pad, k, ", ".join(_scalar(x) for x in v)))
            elif isinstance(v, dict):
                lines.append("%s%s: {}" % (pad, k))
            else:
                lines.append("%s%s: %s" % (pad, k, _scalar(v)))
    elif isinstance(obj, list):
        for item in obj:
            if isinstance(item, (dict, list)):
                body = to_yaml(item, indent + 2).lstrip(" ")
                lines.append("%s- %s" % (pad, body))
            else:
                lines.append("%s- %s" % (pad, _scalar(item)))
    else:
        lines.append(pad + _scalar(obj))
    return "\n".join(lines)


def _merge(base, extra):
    out = dict(base)
    for k, v in (extra or {}).items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


# Debian 12's default /etc/hosts: localhost is 127.0.0.1 and ::1.
DEBIAN_HOSTS = ("127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n"
                "ff02::1\t\tip6-allnodes\nff02::2\t\tip6-allrouters\n")


def refusing_port(host, port):
    """A socket bound to (host, port) that does not listen: connects to it are
    refused, and nothing else can take the port meanwhile. Close it after."""
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.bind((host, port))
    return s


def simple_config(origin_port=None, *, endpoints=None, limits=None, route=None, retry=None,
                  timeout=None, upstream=None, routes=None, listener=None, **top):
    """A complete config: listener ``main`` on 127.0.0.1:0, admin on
    127.0.0.1:0, one route ``default`` to upstream ``origin`` at
    127.0.0.1:<origin_port> (or ``endpoints``). Overrides merge into the
    listener's ``limits``, the route (``route``, ``retry``, ``timeout``), the
    upstream (``upstream``), the listener (``listener``) or the top level
    (other keywords); ``routes`` replaces the route list; a None value
    removes a key. Returns YAML text."""
    if endpoints is None:
        endpoints = ["127.0.0.1:%d" % origin_port]
    r = {"name": "default", "upstream": "origin"}
    if timeout is not None:
        r["timeout"] = timeout
    if retry is not None:
        r["retry"] = retry
    r = _merge(r, route)
    lst = {"name": "main", "listen": "127.0.0.1:0"}
    if limits:
        lst["limits"] = dict(limits)
    lst["routes"] = routes if routes is not None else [r]
    lst = _merge(lst, listener)
    up = _merge({"name": "origin", "endpoints": list(endpoints), "connect_timeout": "1s"}, upstream)
    cfg = {"layer_id": "itest", "admin": {"listen": "127.0.0.1:0"}, "drain_timeout": "2s"}
    cfg = _merge(cfg, top)
    cfg["listeners"] = [lst]
    cfg["upstreams"] = [up]
    return to_yaml(cfg) + "\n"


# --------------------------------------------------------------------------
# Proxy process.

def onelayer_bin():
    """Path of the binary under test, $ONELAYER_BIN. ctest always sets it, so
    a missing or non-executable binary fails the test (never a skip)."""
    path = os.environ.get("ONELAYER_BIN")
    if path and os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    raise AssertionError("ONELAYER_BIN=%r is not an executable file; run the tests through ctest "
                         "or point ONELAYER_BIN at a built onelayer" % path)


class ProxyStartError(AssertionError):
    pass


class Proxy:
    """A running onelayer. ``config``: YAML text; ``${name}`` placeholders are
    filled from ``subs`` (string.Template). Call start() (or use ``with``)."""

    def __init__(self, config, subs=None, *, binary=None, log_level="info", log_format="text",
                 extra_args=(), ready_timeout=10.0, config_name="onelayer.yaml", hosts=None):
        self.binary = binary or onelayer_bin()
        # ``hosts``: the text of an /etc/hosts the proxy alone sees (bind-mounted
        # in a mount namespace of its own; the machine's file is untouched).
        self.hosts = hosts
        if subs:
            config = string.Template(config).substitute({k: str(v) for k, v in subs.items()})
        self.config_text = config
        self.log_level = log_level
        self.log_format = log_format
        self.extra_args = list(extra_args)
        self.ready_timeout = ready_timeout
        self.dir = tempfile.mkdtemp(prefix="onelayer-itest-")
        self.config_path = os.path.join(self.dir, config_name)
        self.ports_path = os.path.join(self.dir, "ports")
        self.stdout_path = os.path.join(self.dir, "stdout")
        self.stderr_path = os.path.join(self.dir, "stderr")
        self.proc = None
        self._terminated = False
        self.ports = {}
        self.returncode = None

    # -- lifecycle -------------------------------------------------------
    def command(self):
        cmd = [self.binary, "--config", self.config_path, "--ports-file", self.ports_path,
               "--log-level", self.log_level, "--log-format", self.log_format]
        cmd += self.extra_args
        if self.hosts is not None:
            hosts_path = os.path.join(self.dir, "hosts")
            with open(hosts_path, "w") as f:
                f.write(self.hosts)
            cmd = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                   'mount --bind "$0" /etc/hosts && exec "$@"', hosts_path] + cmd
        if shutil.which("setpriv"):
            # Dies with the test runner even if it is killed (no orphans).
            cmd = ["setpriv", "--pdeathsig", "KILL", "--"] + cmd
        return cmd

    def start(self):
        with open(self.config_path, "w") as f:
            f.write(self.config_text)
        out = open(self.stdout_path, "wb")
        err = open(self.stderr_path, "wb")
        try:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=err, cwd=self.dir)
        finally:
            out.close()
            err.close()
        deadline = time.monotonic() + self.ready_timeout
        while True:
            if self._read_ports():
                return self
            if self.proc.poll() is not None:
                self.returncode = self.proc.returncode
                raise ProxyStartError("onelayer exited with %s before writing %s\n%s" % (
                    self.returncode, self.ports_path, self.diagnostics()))
            if time.monotonic() > deadline:
                self.kill()
                raise ProxyStartError("onelayer wrote no ports file within %.0fs\n%s" % (
                    self.ready_timeout, self.diagnostics()))
            time.sleep(0.02)

    def _read_ports(self):
        try:
            with open(self.ports_path) as f:
                text = f.read()
        except FileNotFoundError:
            return False
        ports = {}
        for line in text.splitlines():
            if not line.strip():
                continue
            name, port = line.split()
            ports[name] = int(port)
        if "admin" not in ports:
            return False
        self.ports = ports
        return True

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.running():
            self.proc.send_signal(sig)
            if sig == signal.SIGTERM:
                self._terminated = True

    def stop(self, expect_code=0, timeout=10.0):
        """SIGTERM, wait, and (unless expect_code is None) assert the exit code.
        Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            if not self._terminated:  # a second SIGTERM may mean "exit now"
                self.proc.send_signal(signal.SIGTERM)
                self._terminated = True
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError("onelayer did not exit within %.0fs of SIGTERM\n%s" % (
                    timeout, self.diagnostics()))
        self.returncode = self.proc.returncode
        if expect_code is not None and self.returncode != expect_code:
            raise AssertionError("onelayer exited with %s, expected %s\n%s" % (
                self.returncode, expect_code, self.diagnostics()))
        return self.returncode

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        if self.proc is not None:
            self.returncode = self.proc.returncode

    def cleanup(self):
        """Kill if still running and remove the temp dir."""
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.stop()
        else:
            self.kill()
        return False

    # -- access ----------------------------------------------------------
    def port(self, listener="main"):
        return self.ports[listener]

    @property
    def admin_port(self):
        return self.ports["admin"]

    def stdout(self):
        return _read_text(self.stdout_path)

    def stderr(self):
        return _read_text(self.stderr_path)

    def access_log(self):
        return [line for line in self.stdout().splitlines() if line.strip()]

    def diagnostics(self, lines=40):
        def tail(text):
            return "\n".join(text.splitlines()[-lines:])
        return ("--- onelayer command: %s\n--- config:\n%s\n--- stderr (tail):\n%s\n"
                "--- stdout (tail):\n%s\n---" % (" ".join(self.command()), self.config_text,
                                                 tail(self.stderr()), tail(self.stdout())))

    def rss_kb(self, field="VmRSS"):
        """Memory from /proc/<pid>/status in KiB: VmRSS (current) or VmHWM (peak)."""
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise KeyError(field)

    def peak_rss_kb(self):
        return self.rss_kb("VmHWM")

    def admin_get(self, path, timeout=5.0):
        with Conn(self.admin_port, timeout=timeout) as c:
            return c.request("GET", path, headers=[("Connection", "close")], host="127.0.0.1")


def _read_text(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def run_onelayer(args, timeout=10.0, binary=None):
    """Run the binary to completion (e.g. --check, --version): (code, stdout, stderr)."""
    binary = binary or onelayer_bin()
    p = subprocess.run([binary] + list(args), stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


# --------------------------------------------------------------------------
# TestCase base.

class IntegrationTest(unittest.TestCase):
    """Starts origins and proxies with cleanups registered, prints the
    proxy's log tail when the test fails, checks that each origin only ever
    received well-formed HTTP, and stops every proxy with SIGTERM asserting
    exit code 0."""

    def start_origin(self, *args, check_protocol=True, **kwargs):
        origin = Origin(*args, **kwargs)
        self.addCleanup(origin.stop)
        if check_protocol:
            self.addCleanup(self._check_origin_protocol, origin)
        return origin

    def start_origin_with_refuser(self, host, refuse_on, **kwargs):
        """An origin on (host, port 0) and a socket bound, not listening, on
        (refuse_on, the same port): a name with both addresses reaches the
        origin on one and is refused on the other. The port is free on one
        family but may be taken on the other (by a test running beside this
        one): then another port is tried."""
        for _ in range(50):
            origin = self.start_origin(host=host, **kwargs)
            try:
                refuser = refusing_port(refuse_on, origin.port)
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    raise
                origin.stop()
                continue
            self.addCleanup(refuser.close)
            return origin
        self.fail("no port free on both %s and %s after 50 tries" % (host, refuse_on))

    def start_proxy(self, config, subs=None, *, check_exit=True, **kwargs):
        proxy = Proxy(config, subs, **kwargs)
        # Cleanups run last-in first-out: stop, then print logs if failed, then remove.
        self.addCleanup(proxy.cleanup)
        self.addCleanup(self._print_diagnostics_on_failure, proxy)
        self.addCleanup(self._stop_proxy, proxy, check_exit)
        proxy.start()
        return proxy

    def proxy_for(self, origin, **overrides):
        """Start a proxy with simple_config(origin.port, **overrides)."""
        return self.start_proxy(simple_config(origin.port, **overrides))

    def _failed(self):
        """Has this test already failed or errored? (Read from the result: inside
        a cleanup, unittest resets _Outcome.success for each cleanup call.)"""
        result = getattr(getattr(self, "_outcome", None), "result", None)
        if result is None:
            return True
        for test, _ in list(getattr(result, "errors", [])) + list(getattr(result, "failures", [])):
            if test is self or getattr(test, "test_case", None) is self:
                return True
        return False

    def _print_diagnostics_on_failure(self, proxy):
        if self._failed():
            sys.stderr.write("\n==== %s: proxy diagnostics\n%s\n" % (self.id(), proxy.diagnostics()))

    def _stop_proxy(self, proxy, check_exit):
        if not proxy.running():
            if check_exit and proxy.proc is not None and not self._failed():
                code = proxy.proc.returncode
                if code != 0:
                    raise AssertionError("onelayer died during the test with %s\n%s" % (
                        code, proxy.diagnostics()))
            return
        if self._failed():
            # Already failing: report the exit code, don't raise a second error.
            code = proxy.stop(expect_code=None)
            sys.stderr.write("(onelayer exit code after SIGTERM: %s)\n" % code)
            return
        proxy.stop(expect_code=0 if check_exit else None)

    def _check_origin_protocol(self, origin):
        if origin.errors and not self._failed():
            raise AssertionError("%s received malformed HTTP from the proxy: %s" % (
                origin.name, origin.errors))

    # -- assertion helpers -------------------------------------------------
    def assertProxyError(self, resp, status, reason):
        """resp is a proxy-made error: ``status`` with ``x-onelayer-error: reason``."""
        self.assertIsNotNone(resp, "no response")
        self.assertEqual(resp.status, status, "status of %r" % resp)
        self.assertEqual(resp.header("x-onelayer-error"), reason, "x-onelayer-error of %r" % resp)

    def assertNoArrivals(self, origin, settle=0.2):
        time.sleep(settle)
        self.assertEqual(origin.snapshot(), [], "the origin received a request")
        self.assertEqual(origin.bytes_received, 0, "the origin received bytes")
