"""HTTP/2 with prior knowledge (h2c) on listeners, through the real onelayer
to an HTTP/1 origin: nghttp and h2load (nghttp2-client) for the plain
cases, a python3-h2 client (and raw frames) for cancellation, drain, flow
control and the flood defences."""

import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest

import harness as h
import ops_helpers as ops
from harness import IntegrationTest
from test_tls_upstream import PkiTest  # a CA and certificates made once per class

try:
    import h2.config
    import h2.connection
    import h2.events
    import h2.settings
except ImportError:  # python3-h2 is Debian's; ctest's interpreter may be another 3.11
    sys.path.append("/usr/lib/python3/dist-packages")
    import h2.config  # noqa: E402  (missing: deploy/install-deps.sh test installs it)
    import h2.connection  # noqa: E402
    import h2.events  # noqa: E402
    import h2.settings  # noqa: E402
import hpack  # noqa: E402  (comes with python3-h2)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FRAME_DATA, FRAME_HEADERS, FRAME_RST_STREAM, FRAME_SETTINGS = 0x0, 0x1, 0x3, 0x4
FRAME_PING, FRAME_GOAWAY, FRAME_WINDOW_UPDATE, FRAME_CONTINUATION = 0x6, 0x7, 0x8, 0x9
NO_ERROR, PROTOCOL_ERROR, FLOW_CONTROL_ERROR, ENHANCE_YOUR_CALM = 0x0, 0x1, 0x3, 0xB
FAST_RETRY = {"max_attempts": 2, "backoff": {"base": "1ms", "cap": "5ms", "jitter": "none"}}


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


class FrameStream:
    """What the server sends on `sock`, as frames: (type, flags, stream,
    payload, seconds since `t0`) in `frames`, kept across reads."""

    def __init__(self, sock):
        self.sock = sock
        self.frames = []
        self.pending = b""

    def read(self, seconds, until=lambda frames: False, t0=None):
        """Reads for `seconds`, until the server closes the connection, or
        until `until(frames)` is true; returns every frame so far."""
        t0 = time.monotonic() if t0 is None else t0
        self.sock.settimeout(0.05)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not until(self.frames):
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break
            if not chunk:
                break
            buf = self.pending + chunk
            while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[0:3], "big"):
                n = int.from_bytes(buf[0:3], "big")
                self.frames.append((buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, buf[9:9 + n],
                                    time.monotonic() - t0))
                buf = buf[9 + n:]
            self.pending = buf
        return self.frames


def read_frames(sock, timeout=5.0):
    """Every frame the server sends until it closes the connection (or
    `timeout` passes): a list of (type, flags, stream, payload)."""
    return [f[:4] for f in FrameStream(sock).read(timeout)]


def goaway_codes(frames):
    return [int.from_bytes(p[4:8], "big") for t, _, _, p in frames if t == FRAME_GOAWAY]


class H2Client:
    """A scripted HTTP/2 client over one socket (python3-h2; `sock`: one
    given, e.g. TLS). Body bytes are acknowledged as they arrive
    (WINDOW_UPDATE) unless their stream is in `held`: those get only the
    connection-level update."""

    def __init__(self, port, timeout=10.0, sock=None):
        self.sock = sock or socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.conn = h2.connection.H2Connection(
            config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.flush()
        self.streams = {}  # id -> {"headers", "data", "trailers", "ended", "reset"}
        self.held = set()
        self.goaway = None  # (error code, last stream id)
        self.closed = False

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, method, path, headers=(), body=None, authority="test.local"):
        sid = self.conn.get_next_available_stream_id()
        hdrs = [(":method", method), (":scheme", "http"), (":authority", authority), (":path", path)]
        hdrs += list(headers)
        self.conn.send_headers(sid, hdrs, end_stream=body is None)
        if body is not None:
            self.conn.send_data(sid, body, end_stream=True)
        self.streams[sid] = {"headers": None, "data": bytearray(), "trailers": None, "ended": False,
                             "reset": None}
        self.flush()
        return sid

    def status(self, sid):
        hdrs = self.streams[sid]["headers"]
        return int(dict(hdrs)[":status"]) if hdrs else None

    def header(self, sid, name):
        return dict(self.streams[sid]["headers"] or []).get(name)

    def release(self, sid):
        """Acknowledge what a held stream received: its window reopens."""
        self.held.discard(sid)
        unacked = self.streams[sid].pop("unacked", 0)
        if unacked:
            self.conn.increment_flow_control_window(unacked, stream_id=sid)
            self.flush()

    def pump(self, until, timeout=10.0):
        """Reads and handles events until `until()` is true; returns it."""
        deadline = time.monotonic() + timeout
        self.sock.settimeout(0.1)
        while not until() and time.monotonic() < deadline and not self.closed:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                self.closed = True
                break
            if not data:
                self.closed = True
                break
            for ev in self.conn.receive_data(data):
                self.handle(ev)
            self.flush()
        return until()

    def handle(self, ev):
        s = self.streams.get(getattr(ev, "stream_id", None))
        if isinstance(ev, h2.events.ResponseReceived):
            s["headers"] = ev.headers
        elif isinstance(ev, h2.events.DataReceived):
            s["data"] += ev.data
            if ev.stream_id in self.held:
                self.conn.increment_flow_control_window(ev.flow_controlled_length)
                s["unacked"] = s.get("unacked", 0) + ev.flow_controlled_length
            else:
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.TrailersReceived):
            s["trailers"] = ev.headers
        elif isinstance(ev, h2.events.StreamEnded):
            s["ended"] = True
        elif isinstance(ev, h2.events.StreamReset):
            if s is not None:
                s["reset"] = ev.error_code
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.goaway = (ev.error_code, ev.last_stream_id)

    def done(self, *sids):
        return lambda: all(self.streams[s]["ended"] or self.streams[s]["reset"] is not None for s in sids)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class WaitForClose(h.Action):
    """Sends a response head and part of a chunked body, then waits until the
    proxy closes the connection (set `closed`)."""

    def __init__(self):
        self.started = threading.Event()
        self.closed = threading.Event()

    def run(self, ctx):
        ctx.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        self.started.set()
        deadline = time.monotonic() + 10
        ctx.sock.settimeout(0.05)
        while time.monotonic() < deadline:
            try:
                if not ctx.sock.recv(65536):
                    break
            except socket.timeout:
                continue
            except OSError:
                break
        self.closed.set()
        return False


def run_tool(args, timeout=30):
    return subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=timeout)


class H2ServerConnectionTest(IntegrationTest):
    def proxy(self, origin, protocols=None, limits=None, **overrides):
        listener = {"protocols": protocols} if protocols else None
        return self.proxy_for(origin, listener=listener, limits=limits, **overrides)

    def client(self, proxy):
        c = H2Client(proxy.port())
        self.addCleanup(c.close)
        return c

    # -- requests and responses -------------------------------------------

    def test_get_and_post_round_trip_with_nghttp(self):
        origin = self.start_origin(script=[h.respond(200, headers=[("X-From", "origin")], body=b"hello h2")],
                                   default=h.echo())
        proxy = self.proxy(origin)
        base = "http://127.0.0.1:%d" % proxy.port()
        r = run_tool(["nghttp", "-v", base + "/items?id=7"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("hello h2", r.stdout)
        self.assertIn(":status: 200", r.stdout)
        self.assertIn("x-from: origin", r.stdout)
        body = bytes(range(256)) * 300  # 76,800 bytes: more than one window
        path = self.tmp_file(body)
        r = run_tool(["nghttp", "-d", path, base + "/upload"])
        self.assertEqual(r.returncode, 0, r.stderr)
        get, post = origin.wait_for(2)
        self.assertEqual((get.method, get.target, get.version), ("GET", "/items?id=7", "HTTP/1.1"))
        self.assertEqual(get.header("host"), "127.0.0.1:%d" % proxy.port())
        self.assertEqual((post.method, post.target), ("POST", "/upload"))
        self.assertEqual(post.body, body)
        self.assertEqual(post.header("content-length"), str(len(body)))
        records = ops.access_records(proxy, 2, lambda rec: rec.get("path") in ("/items?id=7", "/upload"))
        self.assertEqual({(rec["protocol"], rec["status"]) for rec in records}, {("h2", "200")})
        self.assertTrue(all(int(rec["stream"]) > 0 for rec in records), records)

    def tmp_file(self, data):
        import tempfile
        f = tempfile.NamedTemporaryFile(delete=False)
        self.addCleanup(lambda: __import__("os").unlink(f.name))
        f.write(data)
        f.close()
        return f.name

    def test_head_translation_authority_cookies_and_a_body_of_unknown_length(self):
        origin = self.start_origin(default=h.echo())
        proxy = self.proxy(origin)
        c = self.client(proxy)
        sid = c.request("GET", "/c", headers=[("cookie", "a=1"), ("accept", "*/*"), ("cookie", "b=2")],
                        authority="api.test")
        # A POST whose body has no content-length: chunked to the HTTP/1 origin.
        sid2 = c.conn.get_next_available_stream_id()
        c.conn.send_headers(sid2, [(":method", "POST"), (":scheme", "http"), (":authority", "api.test"),
                                   (":path", "/stream")])
        c.streams[sid2] = {"headers": None, "data": bytearray(), "trailers": None, "ended": False, "reset": None}
        c.conn.send_data(sid2, b"part one,")
        c.flush()
        time.sleep(0.1)
        c.conn.send_data(sid2, b"part two", end_stream=True)
        c.flush()
        self.assertTrue(c.pump(c.done(sid, sid2)))
        self.assertEqual((c.status(sid), c.status(sid2)), (200, 200))
        self.assertEqual(bytes(c.streams[sid2]["data"]), b"part one,part two")
        by_target = {a.target: a for a in origin.wait_for(2)}
        get, post = by_target["/c"], by_target["/stream"]
        self.assertEqual(get.headers[0], ("Host", "api.test"))
        self.assertEqual(get.header_all("cookie"), ["a=1; b=2"])
        self.assertEqual(post.header("transfer-encoding"), "chunked")
        self.assertIsNone(post.header("content-length"))
        self.assertEqual(post.body, b"part one,part two")

    def test_100_concurrent_streams_on_one_connection_are_all_answered(self):
        origin = self.start_origin(default=h.delay(0.3, h.respond(200, body=b"x" * 100)))
        proxy = self.proxy(origin, upstream={"pool": {"max_idle": 128}})
        start = time.monotonic()
        r = run_tool(["h2load", "-n", "100", "-c", "1", "-m", "100", "http://127.0.0.1:%d/c" % proxy.port()])
        took = time.monotonic() - start
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("requests: 100 total, 100 started, 100 done, 100 succeeded", r.stdout)
        self.assertIn("status codes: 100 2xx", r.stdout)
        self.assertEqual(len(origin.wait_for(100)), 100)
        # One after another they would take 30 s; side by side about 0.3 s.
        self.assertLess(took, 5.0, r.stdout)
        # The last answer may reach h2load a moment before its exchange is
        # counted (the counting follows the write): wait for all 100.
        text = ops.settled_metrics(self, proxy, "default", 100)
        self.assertEqual(ops.value(text, "onelayer_requests_total", route="default", code="200",
                                   protocol="h2"), 100)

    def test_http1_and_h2c_on_the_same_port(self):
        origin = self.start_origin()
        proxy = self.proxy(origin)
        with h.Conn(proxy.port()) as c1:
            self.assertEqual(c1.request("GET", "/one").status, 200)
        c = self.client(proxy)
        sid = c.request("GET", "/two")
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual(c.status(sid), 200)
        self.assertEqual(bytes(c.streams[sid]["data"]), b"ok")
        text = ops.settled_metrics(self, proxy, "default", 2)  # counted just after the answer left
        self.assertEqual(ops.value(text, "onelayer_requests_total", route="default", code="200",
                                   protocol="http1"), 1)
        self.assertEqual(ops.value(text, "onelayer_requests_total", route="default", code="200",
                                   protocol="h2"), 1)
        self.assertEqual(ops.value(text, "onelayer_downstream_connections_active", protocol="h2"), 1)
        c.close()
        self.assertIsNotNone(ops.wait_until(lambda: ops.value(
            ops.metrics(self, proxy), "onelayer_downstream_connections_active", protocol="h2") == 0, 3))

    def test_a_listener_without_h2c_refuses_the_preface_and_one_without_http1_refuses_http1(self):
        origin = self.start_origin()
        proxy = self.proxy(origin, protocols=["http1"])
        data, closed = h.raw_exchange(proxy.port(), PREFACE + frame(FRAME_SETTINGS, 0, 0))
        (resp,) = h.parse_responses(data)
        self.assertTrue(closed)
        self.assertProxyError(resp, 400, "bad_request")
        self.assertIn(b"listeners[].protocols", resp.body)
        r = run_tool(["nghttp", "http://127.0.0.1:%d/" % proxy.port()])
        self.assertIn("Some requests were not processed", r.stderr)
        with h.Conn(proxy.port()) as c1:
            self.assertEqual(c1.request("GET", "/fine").status, 200)

        only_h2 = self.proxy(origin, protocols=["h2c"])
        with h.Conn(only_h2.port()) as c1:
            self.assertProxyError(c1.request("GET", "/refused"), 505, "protocol_not_allowed")
        c = self.client(only_h2)
        sid = c.request("GET", "/h2")
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual(c.status(sid), 200)
        self.assertEqual([a.target for a in origin.snapshot()], ["/fine", "/h2"])

    def test_onelayer_answers_refusals_as_http2_responses(self):
        origin = self.start_origin()
        proxy = self.proxy(origin, routes=[{"name": "api", "upstream": "origin", "match": {"path_prefix": "/api"}}])
        c = self.client(proxy)
        sid = c.request("GET", "/nowhere")
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual(c.status(sid), 404)
        self.assertEqual(c.header(sid, "x-onelayer-error"), "no_route")
        self.assertEqual(c.header(sid, "content-type"), "text/plain")
        self.assertEqual(bytes(c.streams[sid]["data"]), b"no_route\n")
        # The connection goes on serving.
        sid = c.request("GET", "/api/x")
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual(c.status(sid), 200)
        self.assertNoArrivals_except(origin, ["/api/x"])

    def assertNoArrivals_except(self, origin, targets):
        self.assertEqual([a.target for a in origin.wait_for(len(targets))], targets)

    def test_head_and_204_answers_end_with_their_headers(self):
        origin = self.start_origin(handler=lambda a: h.respond(204) if a.target == "/none"
                                   else h.respond(200, body=b"twelve bytes"))
        proxy = self.proxy(origin)
        c = self.client(proxy)
        head = c.request("HEAD", "/doc")
        none = c.request("GET", "/none")
        self.assertTrue(c.pump(c.done(head, none)))
        self.assertEqual((c.status(head), c.header(head, "content-length")), (200, "12"))
        self.assertEqual(bytes(c.streams[head]["data"]), b"")
        self.assertEqual((c.status(none), c.header(none, "content-length")), (204, None))
        self.assertTrue(c.streams[none]["ended"] and c.streams[head]["ended"])

    def test_a_response_with_a_transfer_coding_is_502_for_an_http2_client(self):
        origin = self.start_origin(default=h.raw(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"))
        proxy = self.proxy(origin)
        c = self.client(proxy)
        sid = c.request("GET", "/gz")
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual(c.status(sid), 502)
        self.assertEqual(c.header(sid, "x-onelayer-error"), "bad_upstream_response")

    def test_a_get_answered_503_then_200_is_retried_over_h2(self):
        origin = self.start_origin(script=[h.respond(503), h.respond(200, body=b"second")])
        proxy = self.proxy(origin, retry=FAST_RETRY)
        r = run_tool(["nghttp", "http://127.0.0.1:%d/retry" % proxy.port()])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("second", r.stdout)
        first, second = origin.wait_for(2)
        self.assertEqual((first.header("x-retry-attempt"), second.header("x-retry-attempt")), ("1", "2"))
        (rec,) = ops.access_records(proxy, 1, lambda rec: rec.get("path") == "/retry")
        self.assertEqual((rec["attempts"], rec["retry_reasons"], rec["protocol"]), ("2", "503", "h2"))

    def test_an_h2c_upstream_answer_with_trailers_reaches_an_http2_client_whole(self):
        from h2_origin import H2Origin
        up = H2Origin(lambda r: r.respond(200, [("content-type", "application/grpc")], b"\0\0\0\0\0",
                                          trailers=[("grpc-status", "0"), ("grpc-message", "fine")]))
        self.addCleanup(up.stop)
        proxy2 = self.proxy(up, upstream={"protocol": "h2c"})
        c2 = self.client(proxy2)
        sid = c2.request("POST", "/pkg.Svc/Call", headers=[("content-type", "application/grpc"), ("te", "trailers")],
                         body=b"\0\0\0\0\0")
        self.assertTrue(c2.pump(c2.done(sid)))
        self.assertEqual(c2.status(sid), 200)
        self.assertEqual(bytes(c2.streams[sid]["data"]), b"\0\0\0\0\0")
        self.assertEqual(c2.streams[sid]["trailers"], [("grpc-status", "0"), ("grpc-message", "fine")])
        (req,) = up.snapshot()
        self.assertEqual((req.method, req.path, req.body), ("POST", "/pkg.Svc/Call", b"\0\0\0\0\0"))
        self.assertEqual(req.field("te"), "trailers")

    # -- cancellation and drain -------------------------------------------

    def test_a_client_reset_mid_response_cancels_the_upstream_request(self):
        action = WaitForClose()
        origin = self.start_origin(script=[action])
        proxy = self.proxy(origin)
        c = self.client(proxy)
        sid = c.request("GET", "/slow")
        self.assertTrue(c.pump(lambda: len(c.streams[sid]["data"]) >= 5))
        self.assertEqual(bytes(c.streams[sid]["data"]), b"first")
        self.assertFalse(action.closed.is_set())
        c.conn.reset_stream(sid, error_code=8)  # CANCEL
        c.flush()
        self.assertTrue(action.closed.wait(3), "the origin's request was not cancelled")
        (rec,) = ops.access_records(proxy, 1, lambda rec: rec.get("path") == "/slow")
        self.assertEqual((rec["status"], rec["error"], rec["protocol"]), ("499", "client_reset", "h2"))
        # The connection itself goes on.
        sid = c.request("GET", "/after")
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual(c.status(sid), 200)

    def test_drain_lets_open_streams_finish_after_goaway(self):
        origin = self.start_origin(default=h.delay(0.8, h.respond(200, body=b"finished")))
        # With the harness's 2 s drain_timeout, a sanitized build on a loaded
        # machine once got no answer out before the connection ended (GOAWAY,
        # then nothing). The test is about what happens within the drain, not
        # about its limit, so it gets 8 s.
        proxy = self.proxy(origin, drain_timeout="8s")
        base = "http://127.0.0.1:%d" % proxy.port()
        client = subprocess.Popen(["nghttp", "-v"] + [base + "/d%d" % i for i in range(3)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
        self.addCleanup(lambda: client.poll() is None and client.kill())
        self.assertEqual(len(origin.wait_for(3)), 3)
        proxy.signal(signal.SIGTERM)
        out, err = client.communicate(timeout=10)
        self.assertEqual(client.returncode, 0, out + err)
        # GOAWAY NO_ERROR while the three streams were open, then their answers.
        goaway = out.index("recv GOAWAY frame")
        self.assertIn("error_code=NO_ERROR", out[goaway:goaway + 200])
        self.assertEqual(out.count(":status: 200"), 3, out)
        self.assertEqual(out.count("finished"), 3, out)
        self.assertGreater(out.rindex(":status: 200"), goaway, "the answers came before the GOAWAY")
        self.assertEqual(proxy.stop(), 0)

    def drain_client(self, proxy):
        """A raw h2c client (preface, SETTINGS and its ACK sent) and the
        FrameStream.read of what the proxy sends it."""
        sock = socket.create_connection(("127.0.0.1", proxy.port()), timeout=5)
        self.addCleanup(sock.close)
        sock.sendall(PREFACE + frame(FRAME_SETTINGS, 0, 0) + frame(FRAME_SETTINGS, 0x1, 0))
        return sock, FrameStream(sock).read

    @staticmethod
    def goaways_in(frames):
        return [(int.from_bytes(p[0:4], "big") & 0x7FFFFFFF, int.from_bytes(p[4:8], "big"))
                for t, _, _, p, _ in frames if t == FRAME_GOAWAY]

    def test_a_request_sent_as_the_drain_starts_is_answered_not_refused(self):
        origin = self.start_origin(default=h.respond(200, body=b"served"))
        proxy = self.proxy(origin)
        sock, read = self.drain_client(proxy)
        sock.sendall(frame(FRAME_HEADERS, 0x4 | 0x1, 1, self.request_block(b"GET", b"/first")))
        ended = lambda s: lambda fs: any(t == FRAME_DATA and st == s and f & 0x1 for t, f, st, _, _ in fs)
        read(5, ended(1))
        proxy.signal(signal.SIGTERM)
        # The drain's first GOAWAY is in the client's socket, unread: the
        # client sends its next request as if it had not arrived yet (the two
        # crossed on the wire).
        import select
        self.assertTrue(select.select([sock], [], [], 5)[0], "nothing after SIGTERM")
        sock.sendall(frame(FRAME_HEADERS, 0x4 | 0x1, 3, self.request_block(b"GET", b"/raced")))
        frames = read(5, lambda fs: any(t == FRAME_PING and not f & 0x1 for t, f, _, _, _ in fs))
        ping = [p for t, f, _, p, _ in frames if t == FRAME_PING and not f & 0x1]
        self.assertEqual(len(ping), 1, frames)
        # The notice (the largest stream id) came first, the PING behind it.
        kinds = [t for t, _, _, _, _ in frames]
        self.assertLess(kinds.index(FRAME_GOAWAY), kinds.index(FRAME_PING))
        self.assertEqual(self.goaways_in(frames), [(0x7FFFFFFF, NO_ERROR)])
        sock.sendall(frame(FRAME_PING, 0x1, 0, ping[0]))  # the answer
        frames = read(5, lambda fs: ended(3)(fs) and len(self.goaways_in(fs)) == 2)
        # The final GOAWAY names the raced stream, which is answered.
        self.assertEqual(self.goaways_in(frames), [(0x7FFFFFFF, NO_ERROR), (3, NO_ERROR)])
        self.assertTrue(any(t == FRAME_DATA and st == 3 and p == b"served" for t, _, st, p, _ in frames), frames)
        self.assertFalse([f for f in frames if f[0] == FRAME_RST_STREAM], frames)
        self.assertEqual([a.target for a in origin.wait_for(2)], ["/first", "/raced"])
        self.assertEqual(proxy.stop(), 0)

    def test_a_client_that_never_answers_the_drain_ping_gets_the_final_goaway_within_a_second(self):
        origin = self.start_origin(default=h.delay(2.0, h.respond(200, body=b"late")))
        proxy = self.proxy(origin, drain_timeout="8s")
        sock, read = self.drain_client(proxy)
        sock.sendall(frame(FRAME_HEADERS, 0x4 | 0x1, 1, self.request_block(b"GET", b"/slow")))
        origin.wait_for(1)
        t0 = time.monotonic()
        proxy.signal(signal.SIGTERM)
        frames = read(4, lambda fs: len(self.goaways_in(fs)) == 2, t0=t0)
        goaways = [(self.goaways_in([f])[0], f[4]) for f in frames if f[0] == FRAME_GOAWAY]
        self.assertEqual([g for g, _ in goaways], [(0x7FFFFFFF, NO_ERROR), (1, NO_ERROR)])
        self.assertLess(goaways[0][1], 0.5)
        self.assertGreater(goaways[1][1] - goaways[0][1], 0.8)  # the bound, no answer to the PING
        self.assertLess(goaways[1][1] - goaways[0][1], 2.0)
        # The open stream still finishes.
        frames = read(5, lambda fs: any(t == FRAME_DATA and p == b"late" for t, _, _, p, _ in fs))
        self.assertTrue(any(t == FRAME_DATA and p == b"late" for t, _, _, p, _ in frames), frames)

    def test_an_idle_connection_gets_goaway_and_is_closed(self):
        origin = self.start_origin()
        proxy = self.proxy(origin, limits={"idle_timeout": "300ms"})
        c = self.client(proxy)
        sid = c.request("GET", "/once")
        self.assertTrue(c.pump(c.done(sid)))
        start = time.monotonic()
        self.assertTrue(c.pump(lambda: c.closed, timeout=5))
        self.assertGreater(time.monotonic() - start, 0.2)
        self.assertEqual(c.goaway[0], NO_ERROR)

    def test_a_client_that_sends_no_settings_in_header_timeout_gets_goaway_and_is_closed(self):
        origin = self.start_origin()
        proxy = self.proxy(origin, limits={"header_timeout": "300ms"})
        sock = socket.create_connection(("127.0.0.1", proxy.port()), timeout=5)
        self.addCleanup(sock.close)
        start = time.monotonic()
        sock.sendall(PREFACE + frame(FRAME_SETTINGS, 0, 0)[:5])  # half a SETTINGS frame header
        frames = read_frames(sock, timeout=5)
        took = time.monotonic() - start
        self.assertGreater(took, 0.25)
        self.assertLess(took, 3)
        self.assertEqual(goaway_codes(frames), [NO_ERROR])

    def test_max_concurrent_streams_is_what_the_listener_advertises(self):
        origin = self.start_origin()
        proxy = self.proxy(origin, limits={"max_concurrent_streams": 7})
        c = self.client(proxy)
        sid = c.request("GET", "/s")
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual(c.conn.remote_settings.max_concurrent_streams, 7)

    # -- flow control -------------------------------------------------------

    def test_a_stalled_stream_does_not_hold_up_a_flowing_one(self):
        big = h.pattern_block(64 * 1024) * 16  # 1 MiB
        origin = self.start_origin(default=h.respond(200, body=big))
        proxy = self.proxy(origin)
        c = self.client(proxy)
        stalled = c.request("GET", "/stalled")
        c.held.add(stalled)  # its window stays shut (64 KiB at most arrive)
        flowing = c.request("GET", "/flowing")
        self.assertTrue(c.pump(c.done(flowing), timeout=10))
        self.assertEqual(bytes(c.streams[flowing]["data"]), big)
        self.assertLessEqual(len(c.streams[stalled]["data"]), 65535)
        self.assertFalse(c.streams[stalled]["ended"])
        c.release(stalled)
        self.assertTrue(c.pump(c.done(stalled), timeout=10))
        self.assertEqual(bytes(c.streams[stalled]["data"]), big)

    def test_a_client_that_reads_none_of_its_streams_holds_little_of_each_in_the_proxy(self):
        # 40 streams of 1 MiB from an h2c origin to a client that takes
        # none of them (their windows stay shut; the connection's is kept
        # open). What the origin could send on each is what onelayer holds
        # for it plus the client's 64 KiB window: the upstream stream's
        # window (64 KiB) reopens only for bytes framed to the client, so
        # no more than that window waits in the proxy. Reopening it as
        # bytes were queued, and pausing the upstream at a 64 KiB queue,
        # let the origin send 192 KiB per stream (a queue of 256 KiB, the
        # HTTP/1.1 one, about 400 KiB).
        from h2_origin import H2Origin
        big = h.pattern_block(64 * 1024) * 16
        up = H2Origin(lambda r: r.respond(200, [], big))
        self.addCleanup(up.stop)
        proxy = self.proxy_for(up, upstream={"protocol": "h2c"})
        c = self.client(proxy)
        sids = []
        for i in range(40):
            sid = c.request("GET", "/big%d" % i)
            c.held.add(sid)
            sids.append(sid)

        def sent_per_stream():
            with up.lock:
                unsent = dict(up.unsent)
            return [len(big) - left for left in unsent.values()]
        # Wait until the origin's sending has stopped: two equal readings.
        last, deadline = None, time.monotonic() + 15
        while time.monotonic() < deadline:
            c.pump(lambda: False, timeout=0.3)
            now = sent_per_stream()
            if len(now) == 40 and now == last:
                break
            last = now
        self.assertEqual(len(last), 40, "not every request reached the origin")
        self.assertGreater(min(last), 64 * 1024, "the client's windows were not filled")
        # 64 KiB at the client + 64 KiB in the upstream window.
        self.assertLessEqual(max(last), 128 * 1024, last)
        for sid in sids:
            self.assertFalse(c.streams[sid]["ended"])
            c.release(sid)
        self.assertTrue(c.pump(c.done(*sids), timeout=30))
        for sid in sids:
            self.assertEqual(bytes(c.streams[sid]["data"]), big)

    def test_an_upload_to_an_upstream_that_reads_none_of_it_holds_little_in_the_proxy(self):
        # A 1 MiB POST (past buffer_limit: it streams) to an h2c origin that
        # never opens its windows again. What the client could send is what
        # onelayer holds for the stream plus the origin's 64 KiB: the
        # stream's queue towards the upstream holds the client's side above
        # 64 KiB (and one frame, and the client's 64 KiB window in flight,
        # may still arrive). The HTTP/1.1 queue of 256 KiB let the client
        # send about 350 KiB. Another request on the same connection is
        # answered meanwhile.
        from h2_origin import H2Origin
        up = H2Origin(lambda r: r.respond(200, [], b"ok"), reads_bodies=False)
        self.addCleanup(up.stop)
        proxy = self.proxy_for(up, upstream={"protocol": "h2c"}, route={"retry": {"buffer_limit": "16KiB"}})
        c = self.client(proxy)
        sid = c.conn.get_next_available_stream_id()
        c.conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":authority", "t"), (":path", "/up")])
        c.streams[sid] = {"headers": None, "data": bytearray(), "trailers": None, "ended": False, "reset": None}
        body = b"u" * (1024 * 1024)
        sent, last_progress = 0, time.monotonic()
        # Send what the windows allow until they stay shut for a second.
        while time.monotonic() - last_progress < 1.0:
            room = min(c.conn.local_flow_control_window(sid), c.conn.max_outbound_frame_size, len(body) - sent)
            if room > 0:
                c.conn.send_data(sid, body[sent:sent + room])
                sent += room
                c.flush()
                last_progress = time.monotonic()
            c.pump(lambda: False, timeout=0.05)
        self.assertGreater(sent, 128 * 1024, "the origin's and the client's windows were not filled")
        # 64 KiB at the origin + 64 KiB queued + a 16 KiB frame + 64 KiB in
        # the client's window, and the frames' rounding.
        self.assertLessEqual(sent, 216 * 1024)
        quick = c.request("GET", "/quick")
        self.assertTrue(c.pump(c.done(quick), timeout=5))
        self.assertEqual(c.status(quick), 200)
        self.assertFalse(c.streams[sid]["ended"])

    def test_a_slow_upstream_stalls_only_the_request_body_it_reads(self):
        # The origin reads 16 KiB every 50 ms: a 1 MiB body streams (past
        # buffer_limit) at its pace while another stream is answered at once.
        origin = self.start_origin(recv_throttle=(16 * 1024, 0.05))
        proxy = self.proxy(origin, route={"retry": {"buffer_limit": "16KiB"}})
        c = self.client(proxy)
        sid = c.conn.get_next_available_stream_id()
        c.conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":authority", "t"), (":path", "/up")])
        c.streams[sid] = {"headers": None, "data": bytearray(), "trailers": None, "ended": False, "reset": None}
        sent = 0
        body = b"b" * (1024 * 1024)
        # Send what the windows allow, as the server opens them.
        quick = None
        deadline = time.monotonic() + 30
        while sent < len(body) and time.monotonic() < deadline:
            room = min(c.conn.local_flow_control_window(sid), c.conn.max_outbound_frame_size, len(body) - sent)
            if room > 0:
                c.conn.send_data(sid, body[sent:sent + room], end_stream=sent + room == len(body))
                sent += room
                c.flush()
            if quick is None and sent > 256 * 1024:
                quick = c.request("GET", "/quick")
                start = time.monotonic()
                self.assertTrue(c.pump(c.done(quick), timeout=5))
                self.assertLess(time.monotonic() - start, 2.0)
            c.pump(lambda: False, timeout=0.05)
        self.assertEqual(sent, len(body))
        self.assertTrue(c.pump(c.done(sid), timeout=30))
        self.assertEqual(c.status(sid), 200)
        by_target = {a.target: a for a in origin.wait_for(2)}
        self.assertEqual(by_target["/up"].body_len, len(body))

    # -- defences -----------------------------------------------------------

    # Most attacks below run while another client has a request in flight
    # (the origin holds it 0.2 s): that request and a new one on the same
    # connection are answered, and the attack's reason is logged.

    def under_attack(self):
        """An origin that holds each request 0.2 s, onelayer, and a client
        whose request is in flight: (origin, proxy, that client, its stream)."""
        origin = self.start_origin(default=h.delay(0.2, h.respond(200)))
        proxy = self.proxy(origin)
        other = self.client(proxy)
        return origin, proxy, other, other.request("GET", "/before")

    @staticmethod
    def request_block(method, path, *fields):
        return hpack.Encoder().encode([(b":method", method), (b":scheme", b"http"), (b":authority", b"t"),
                                       (b":path", path)] + list(fields), huffman=False)

    def assert_bystander_served(self, other, before):
        self.assertTrue(other.pump(other.done(before)))
        self.assertEqual(other.status(before), 200)
        sid = other.request("GET", "/after")
        self.assertTrue(other.pump(other.done(sid)))
        self.assertEqual(other.status(sid), 200)
        self.assertIsNone(other.goaway)

    def assert_logged(self, proxy, reason):
        line = re.compile(r"HTTP/2 connection from 127\.0\.0\.1 ended: GOAWAY code \d+ \(%s\)" % re.escape(reason))
        self.assertTrue(h.wait_until(lambda: line.search(proxy.stderr()), 3.0), proxy.stderr()[-2000:])

    def raw_attacker(self, proxy, rcvbuf=None):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.connect(("127.0.0.1", proxy.port()))
        self.addCleanup(sock.close)
        sock.settimeout(5)
        return sock

    def test_rapid_reset_flood_gets_goaway_enhance_your_calm_while_another_client_is_served(self):
        _, proxy, other, before = self.under_attack()
        attacker = self.client(proxy)
        for _ in range(400):
            sid = attacker.conn.get_next_available_stream_id()
            attacker.conn.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", "t"),
                                             (":path", "/flood")], end_stream=True)
            attacker.conn.reset_stream(sid, error_code=8)
            try:
                attacker.flush()
            except OSError:
                break
        codes = goaway_codes(read_frames(attacker.sock))
        self.assertIn(ENHANCE_YOUR_CALM, codes)
        self.assert_bystander_served(other, before)
        self.assert_logged(proxy, "rapid reset")

    def test_continuation_flood_gets_goaway_enhance_your_calm(self):
        origin = self.start_origin()
        proxy = self.proxy(origin)
        sock = socket.create_connection(("127.0.0.1", proxy.port()), timeout=5)
        self.addCleanup(sock.close)
        block = hpack.Encoder().encode([(":method", "GET"), (":scheme", "http"), (":authority", "t"),
                                        (":path", "/c")])
        out = PREFACE + frame(FRAME_SETTINGS, 0, 0) + frame(FRAME_HEADERS, 0x1, 1, block)  # no END_HEADERS
        out += b"".join(frame(FRAME_CONTINUATION, 0, 1, hpack.Encoder().encode([("x-a", "b")])) for _ in range(50))
        try:
            sock.sendall(out)
        except OSError:
            pass
        self.assertIn(ENHANCE_YOUR_CALM, goaway_codes(read_frames(sock)))
        self.assertNoArrivals(origin)

    def test_every_malformed_field_is_refused_by_the_session_before_it_reaches_the_proxy(self):
        # The exchange does not check an HTTP/2 head's names and values again
        # (the session's message rules let only lower-case tokens and values
        # free of control bytes open a stream): every byte that HTTP/1.1 would answer 400 is
        # met with RST_STREAM PROTOCOL_ERROR, and nothing goes upstream.
        origin = self.start_origin()
        proxy = self.proxy(origin)
        token = set(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz")
        cases = [(b"x-t" + bytes([c]), b"v") for c in range(256) if c not in token]
        cases += [(b"x-t", b"a" + bytes([c]) + b"a") for c in list(range(0x00, 0x09)) + list(range(0x0A, 0x20)) + [0x7F]]
        cases += [(b"x-t", b" a"), (b"x-t", b"a\t"), (b"", b"v")]

        def answer(field):
            with socket.create_connection(("127.0.0.1", proxy.port()), timeout=5) as sock:
                block = hpack.Encoder().encode([(b":method", b"GET"), (b":scheme", b"http"), (b":authority", b"t"),
                                                (b":path", b"/m"), field], huffman=False)
                sock.sendall(PREFACE + frame(FRAME_SETTINGS, 0, 0) + frame(FRAME_HEADERS, 0x5, 1, block))
                buf, deadline = b"", time.monotonic() + 5
                while time.monotonic() < deadline:
                    while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[0:3], "big"):
                        n = int.from_bytes(buf[0:3], "big")
                        ftype, stream, payload = buf[3], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, buf[9:9 + n]
                        buf = buf[9 + n:]
                        if stream == 1 and ftype == FRAME_RST_STREAM:
                            return "reset %d" % int.from_bytes(payload, "big")
                        if stream == 1 and ftype == FRAME_HEADERS:
                            return "answered"
                        if ftype == FRAME_GOAWAY:
                            return "goaway %d" % int.from_bytes(payload[4:8], "big")
                    chunk = sock.recv(65536)
                    if not chunk:
                        return "closed"
                    buf += chunk
                return "nothing"

        got = {field: answer(field) for field in cases}
        self.assertEqual({f: a for f, a in got.items() if a != "reset 1"}, {})  # 1: PROTOCOL_ERROR
        self.assertEqual(answer((b"x-t", b"a\x80a")), "answered")  # obs-text is allowed
        self.assertEqual([a.target for a in origin.snapshot()], ["/m"])

    def test_an_oversized_header_list_is_answered_431(self):
        origin = self.start_origin()
        proxy = self.proxy(origin, limits={"max_header_bytes": "4KiB"})
        c = self.client(proxy)
        sid = c.request("GET", "/big", headers=[("x-big", "a" * 6000)])
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual(c.status(sid), 431)
        sid = c.request("GET", "/small", headers=[("x-small", "a" * 100)])
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual(c.status(sid), 200)
        self.assertEqual([a.target for a in origin.snapshot()], ["/small"])

    def test_settings_flood_from_a_client_that_does_not_read_gets_goaway_enhance_your_calm(self):
        origin = self.start_origin()
        proxy = self.proxy(origin)
        sock = self.raw_attacker(proxy, rcvbuf=4096)  # our side takes little
        sock.sendall(PREFACE + frame(FRAME_SETTINGS, 0, 0))
        one = frame(FRAME_SETTINGS, 0, 0, struct.pack(">HI", 0x4, 65535))
        try:
            for _ in range(200):  # 200 x 1000 SETTINGS frames, ACKs never read
                sock.sendall(one * 1000)
        except OSError:
            pass  # the server closed the connection once its GOAWAY was queued
        self.assertIn(ENHANCE_YOUR_CALM, goaway_codes(read_frames(sock, timeout=10)))
        self.assert_logged(proxy, "control frame flood (SETTINGS or PING acknowledgements piling up unread)")

    def test_a_settings_frame_with_too_many_entries_gets_goaway_enhance_your_calm(self):
        origin = self.start_origin()
        proxy = self.proxy(origin)
        sock = socket.create_connection(("127.0.0.1", proxy.port()), timeout=5)
        self.addCleanup(sock.close)
        entries = b"".join(struct.pack(">HI", 0x4, 65535) for _ in range(40))
        sock.sendall(PREFACE + frame(FRAME_SETTINGS, 0, 0, entries))
        self.assertIn(ENHANCE_YOUR_CALM, goaway_codes(read_frames(sock)))

    def test_ping_flood_from_a_client_that_does_not_read_gets_goaway_while_another_client_is_served(self):
        origin, proxy, other, before = self.under_attack()
        sock = self.raw_attacker(proxy, rcvbuf=4096)  # takes few of the PING ACKs
        sock.sendall(PREFACE + frame(FRAME_SETTINGS, 0, 0))
        pings = b"".join(frame(FRAME_PING, 0, 0, struct.pack(">Q", i)) for i in range(1000))
        try:
            for _ in range(200):  # 200,000 PINGs, their ACKs never read
                sock.sendall(pings)
        except OSError:
            pass  # closed once the GOAWAY was queued
        frames = read_frames(sock, timeout=10)
        self.assertIn(ENHANCE_YOUR_CALM, goaway_codes(frames))
        # What it was sent back is bounded: far fewer ACKs than PINGs.
        self.assertLess(sum(1 for t, flags, _, _ in frames if t == FRAME_PING and flags & 0x1), 20000)
        self.assert_bystander_served(other, before)
        self.assert_logged(proxy, "control frame flood (SETTINGS or PING acknowledgements piling up unread)")

    def test_an_hpack_bomb_gets_goaway_enhance_your_calm_and_nothing_reaches_the_origin(self):
        origin, proxy, other, before = self.under_attack()
        sock = self.raw_attacker(proxy)
        # A 4,000-byte value enters the dynamic table once (index 62); 200
        # one-byte references to it decode to 800 KB, far over 4 x
        # max_header_bytes (32 KiB), from a block of 4.3 KB.
        block = self.request_block(b"GET", b"/bomb", (b"x-bomb", b"z" * 4000))
        block += bytes([0x80 | 62]) * 200
        self.assertLess(len(block), 4400)
        sock.sendall(PREFACE + frame(FRAME_SETTINGS, 0, 0) + frame(FRAME_HEADERS, 0x5, 1, block))
        self.assertIn(ENHANCE_YOUR_CALM, goaway_codes(read_frames(sock)))
        self.assert_bystander_served(other, before)
        self.assertNotIn("/bomb", [a.target for a in origin.snapshot()])
        self.assert_logged(proxy, "header list over the hard cap (HPACK bomb)")

    def test_a_flood_of_empty_data_frames_gets_goaway_and_its_upstream_request_is_cut(self):
        origin, proxy, other, before = self.under_attack()
        sock = self.raw_attacker(proxy)
        block = self.request_block(b"POST", b"/empty")
        # A request whose body never comes: DATA frames of no bytes that do
        # not end the stream cost the server work and carry nothing.
        sock.sendall(PREFACE + frame(FRAME_SETTINGS, 0, 0) + frame(FRAME_HEADERS, 0x4, 1, block) +
                     frame(FRAME_DATA, 0, 1, b"x") + frame(FRAME_DATA, 0, 1) * 1000)
        self.assertIn(ENHANCE_YOUR_CALM, goaway_codes(read_frames(sock)))
        self.assert_bystander_served(other, before)
        self.assert_logged(proxy, "empty frames flood")
        # The upstream request, if it had begun, never got its body's end:
        # the origin saw no complete POST.
        self.assertNotIn("/empty", [a.target for a in origin.snapshot()])

    def test_window_update_abuse_is_a_connection_or_stream_flow_control_error(self):
        origin, proxy, other, before = self.under_attack()
        start = PREFACE + frame(FRAME_SETTINGS, 0, 0) + frame(FRAME_HEADERS, 0x5, 1, self.request_block(b"GET", b"/w"))
        # A zero increment, on the connection or on a stream: PROTOCOL_ERROR.
        for stream in (0, 1):
            sock = self.raw_attacker(proxy)
            sock.sendall(start + frame(FRAME_WINDOW_UPDATE, 0, stream, struct.pack(">I", 0)))
            self.assertIn(PROTOCOL_ERROR, goaway_codes(read_frames(sock)))
        # Increments that push the connection's window past 2^31-1:
        # GOAWAY FLOW_CONTROL_ERROR.
        sock = self.raw_attacker(proxy)
        sock.sendall(start + frame(FRAME_WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7FFFFFFF)))
        self.assertIn(FLOW_CONTROL_ERROR, goaway_codes(read_frames(sock)))
        # The same on one stream ends that stream only (RST_STREAM
        # FLOW_CONTROL_ERROR); the connection goes on serving.
        client = self.client(proxy)
        sid = client.request("GET", "/slow")
        client.sock.sendall(frame(FRAME_WINDOW_UPDATE, 0, sid, struct.pack(">I", 0x7FFFFFFF)))
        self.assertTrue(client.pump(lambda: client.streams[sid]["reset"] is not None))
        self.assertEqual(client.streams[sid]["reset"], FLOW_CONTROL_ERROR)
        sid = client.request("GET", "/next")
        self.assertTrue(client.pump(client.done(sid)))
        self.assertEqual(client.status(sid), 200)
        self.assert_bystander_served(other, before)
        # nghttp2 finds these itself; each connection it ends still leaves
        # its line, with nghttp2's reason or the code's name.
        self.assert_logged(proxy, "WINDOW_UPDATE: window_size_increment == 0")
        self.assertEqual(len(re.findall(r"GOAWAY code 1 \(WINDOW_UPDATE", proxy.stderr())), 2)
        self.assert_logged(proxy, "FLOW_CONTROL_ERROR")



class H2OverTlsTest(PkiTest):
    """A TLS listener offers h2 by ALPN when it speaks h2c, preferred over
    http/1.1; the client then starts with the preface inside TLS."""

    def tls_proxy(self, origin, protocols=None):
        listener = {"tls": {"cert_file": self.pki.path("proxy.pem"), "key_file": self.pki.path("proxy.key")}}
        if protocols:
            listener["protocols"] = protocols
        return self.start_proxy(h.simple_config(origin.port, listener=listener))

    def tls_socket(self, proxy, offer):
        import ssl
        ctx = ssl.create_default_context(cafile=self.pki.path("ca.pem"))
        ctx.set_alpn_protocols(offer)
        raw = socket.create_connection(("127.0.0.1", proxy.port()), timeout=10)
        s = ctx.wrap_socket(raw, server_hostname="proxy.test")
        self.addCleanup(s.close)
        return s

    def test_alpn_chooses_h2_and_the_request_is_served_over_http2_in_tls(self):
        origin = self.start_origin()
        proxy = self.tls_proxy(origin)
        s = self.tls_socket(proxy, ["h2", "http/1.1"])
        self.assertEqual(s.selected_alpn_protocol(), "h2")
        c = H2Client(0, sock=s)
        sid = c.request("GET", "/secure")
        self.assertTrue(c.pump(c.done(sid)))
        self.assertEqual((c.status(sid), bytes(c.streams[sid]["data"])), (200, b"ok"))
        (arrival,) = origin.wait_for(1)
        self.assertEqual(arrival.header("x-forwarded-proto"), "https")
        (rec,) = ops.access_records(proxy, 1, lambda rec: rec.get("path") == "/secure")
        self.assertEqual(rec["protocol"], "h2")

    def test_alpn_follows_the_listener_protocols(self):
        origin = self.start_origin()
        http1_only = self.tls_proxy(origin, ["http1"])
        self.assertEqual(self.tls_socket(http1_only, ["h2", "http/1.1"]).selected_alpn_protocol(), "http/1.1")
        h2_only = self.tls_proxy(origin, ["h2c"])
        self.assertEqual(self.tls_socket(h2_only, ["h2", "http/1.1"]).selected_alpn_protocol(), "h2")
        both = self.tls_proxy(origin)
        self.assertEqual(self.tls_socket(both, ["http/1.1"]).selected_alpn_protocol(), "http/1.1")


if __name__ == "__main__":
    unittest.main()
