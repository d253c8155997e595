"""The HTTP/2 message rules (RFC 9113 8.1-8.3) on both sides of the real
onelayer: its own checks (H2MessageRules; nghttp2's HTTP messaging is off).

Downstream: a client speaking raw HTTP/2 frames sends one malformed request
per connection to an h2c listener; the stream is reset with PROTOCOL_ERROR,
nothing reaches the (HTTP/1) origin, and the same connection then has a
valid request served. Upstream: a raw-frame h2c origin (RawH2Origin below:
python3-h2 refuses to send malformed responses) answers an HTTP/1.1 client's
request with a malformed response; the client gets onelayer's 502, the
origin sees its stream reset with PROTOCOL_ERROR, and the access log names
the failure."""

import socket
import threading
import time
import unittest

import harness as h
import ops_helpers as ops
from h2_origin import LoopbackServer
from harness import IntegrationTest
from hpack_reading import header_block_fragment
# Raw frames and python3-h2's hpack (its import also finds Debian's
# dist-packages when the interpreter is another 3.11).
from test_h2_downstream import FRAME_DATA, FRAME_GOAWAY, FRAME_HEADERS, FRAME_RST_STREAM, FRAME_SETTINGS
from test_h2_downstream import PREFACE, frame, hpack

FRAME_PING, FRAME_CONTINUATION = 0x6, 0x9
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
PROTOCOL_ERROR = 0x1
RESET_1 = ("reset", PROTOCOL_ERROR)

# A valid request head (HPACK field order: pseudo-header fields first).
GET = [(":method", "GET"), (":scheme", "http"), (":authority", "svc.test"), (":path", "/m")]


def fields(*pairs):
    """(name, value) pairs as bytes, for hpack (which encodes them as given)."""
    return [(n.encode("latin-1") if isinstance(n, str) else n, v.encode("latin-1") if isinstance(v, str) else v)
            for n, v in pairs]


def without(head, name):
    return [f for f in head if f[0] != name]


def replaced(head, name, value):
    return [(n, value if n == name else v) for n, v in head]


class FrameReader:
    """Frames off a socket: (type, flags, stream, payload), with header
    blocks (HEADERS plus CONTINUATION) joined and decoded by one
    hpack.Decoder for the connection (every block, in order)."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.decoder = hpack.Decoder()
        self.block = None  # [stream, flags, bytes] while CONTINUATION is due
        self.eof = False

    def next(self, deadline):
        """The next frame, or None when the peer closed or `deadline` passed.
        A header block comes as (FRAME_HEADERS, flags, stream, [fields])."""
        while True:
            while len(self.buf) >= 9 and len(self.buf) >= 9 + int.from_bytes(self.buf[0:3], "big"):
                n = int.from_bytes(self.buf[0:3], "big")
                ftype, flags = self.buf[3], self.buf[4]
                stream = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
                payload, self.buf = self.buf[9:9 + n], self.buf[9 + n:]
                if ftype == FRAME_HEADERS:
                    self.block = [stream, flags, header_block_fragment(flags, payload)]
                elif ftype == FRAME_CONTINUATION and self.block:
                    self.block[2] += payload
                else:
                    return ftype, flags, stream, payload
                if flags & END_HEADERS:
                    stream, flags, block = self.block
                    self.block = None
                    decoded = [(bytes(n).decode("latin-1"), bytes(v).decode("latin-1"))
                               for n, v in self.decoder.decode(block, raw=True)]
                    return FRAME_HEADERS, flags | END_HEADERS, stream, decoded
            if self.eof:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            except OSError:
                chunk = b""
            if not chunk:
                self.eof = True
            self.buf += chunk


class RawH2Client:
    """One HTTP/2 connection whose frames are written by hand: header blocks
    are encoded as given (any name, value or order), nothing is checked."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.encoder = hpack.Encoder()
        self.reader = FrameReader(self.sock)
        self.streams = {}  # id -> {"heads": [[fields]...], "data": bytes, "reset": code, "ended": bool}
        self.goaway = None
        self.out = PREFACE + frame(FRAME_SETTINGS, 0, 0)

    def send(self, data=b""):
        """Writes what headers() and data() queued, and `data`, in one write."""
        out, self.out = self.out + data, b""
        try:
            self.sock.sendall(out)
        except OSError:
            pass

    def headers(self, stream, head, end_stream=True):
        """Queues a HEADERS frame (END_HEADERS) with `head` encoded as given."""
        self.streams.setdefault(stream, {"heads": [], "data": b"", "reset": None, "ended": False})
        block = self.encoder.encode(fields(*head), huffman=False)
        self.out += frame(FRAME_HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), stream, block)

    def data(self, stream, payload, end_stream=True):
        self.out += frame(FRAME_DATA, END_STREAM if end_stream else 0, stream, payload)

    def outcome(self, stream, timeout=5.0):
        """Reads until `stream` is reset or answered to its end, or the
        connection ends. ("reset", code), ("answered", status, fields
        without pseudo-headers, body), ("goaway", code), "closed" or
        "nothing" (no end within `timeout`)."""
        self.send()
        s = self.streams[stream]
        deadline = time.monotonic() + timeout
        while True:
            if s["reset"] is not None:
                return ("reset", s["reset"])
            if s["ended"]:
                final = [hd for hd in s["heads"] if not dict(hd).get(":status", "").startswith("1")]
                head = final[0] if final else s["heads"][-1]
                return ("answered", int(dict(head)[":status"]), [f for f in head if not f[0].startswith(":")],
                        s["data"])
            if self.goaway is not None:
                return ("goaway", self.goaway)
            got = self.reader.next(deadline)
            if got is None:
                return "closed" if self.reader.eof else "nothing"
            ftype, flags, sid, payload = got
            st = self.streams.get(sid)
            if ftype == FRAME_SETTINGS and not flags & ACK:
                self.send(frame(FRAME_SETTINGS, ACK, 0))
            elif ftype == FRAME_PING and not flags & ACK:
                self.send(frame(FRAME_PING, ACK, 0, payload))
            elif ftype == FRAME_GOAWAY:
                self.goaway = int.from_bytes(payload[4:8], "big")
            elif st is None:
                continue
            elif ftype == FRAME_RST_STREAM:
                st["reset"] = int.from_bytes(payload[0:4], "big")
            elif ftype == FRAME_HEADERS:
                st["heads"].append(payload)
                st["ended"] = bool(flags & END_STREAM)
            elif ftype == FRAME_DATA:
                st["data"] += payload
                st["ended"] = bool(flags & END_STREAM)
                if payload:  # the windows open again
                    n = len(payload).to_bytes(4, "big")
                    self.send(frame(0x8, 0, 0, n) + frame(0x8, 0, sid, n))

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


# --------------------------------------------------------------------------
# An h2c origin that writes its responses frame by frame.

class Response:
    """The frames one response is made of, written together once the
    handler returns. Header blocks are encoded with the connection's
    hpack.Encoder exactly as given."""

    def __init__(self, encoder, stream):
        self.encoder = encoder
        self.stream = stream
        self.out = b""

    def head(self, *pairs, end_stream=False):
        block = self.encoder.encode(fields(*pairs), huffman=False)
        self.out += frame(FRAME_HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), self.stream, block)
        return self

    def data(self, payload, end_stream=False):
        self.out += frame(FRAME_DATA, END_STREAM if end_stream else 0, self.stream, payload)
        return self


class UpRequest:
    """A request the raw origin received: its head's fields as decoded."""

    def __init__(self, conn_id, stream, head):
        self.conn_id = conn_id
        self.stream = stream
        self.fields = head
        self.method, self.path = self.field(":method"), self.field(":path")

    def field(self, name, default=None):
        return dict(self.fields).get(name, default)


class RawH2Origin(LoopbackServer):
    """An h2c origin on 127.0.0.1:0: SETTINGS exchange and PING answers,
    then for each request (at its END_STREAM) ``handler(request, response)``
    fills ``response`` (a Response) with whatever frames the test wants;
    they go out in one write. The connection stays open (a stream left
    unended stays so until the proxy acts), and every RST_STREAM and GOAWAY
    the proxy sends is recorded."""

    def __init__(self, handler):
        self.handler = handler
        self.resets = []   # (connection, stream, code) the proxy sent
        self.goaways = []  # (connection, code)
        self.listen(64)

    def converse(self, s, conn_id):
        got = b""
        while len(got) < len(PREFACE):
            more = s.recv(len(PREFACE) - len(got))
            if not more:
                return
            got += more
        if got != PREFACE:
            raise ValueError("no HTTP/2 preface: %r" % got)
        s.sendall(frame(FRAME_SETTINGS, 0, 0))
        reader = FrameReader(s)
        encoder = hpack.Encoder()
        pending = {}  # stream -> request waiting for its END_STREAM
        while not self.stopping:
            f = reader.next(time.monotonic() + 3600)
            if f is None:
                return
            ftype, flags, stream, payload = f
            ready = None
            if ftype == FRAME_SETTINGS and not flags & ACK:
                s.sendall(frame(FRAME_SETTINGS, ACK, 0))
            elif ftype == FRAME_PING and not flags & ACK:
                s.sendall(frame(FRAME_PING, ACK, 0, payload))
            elif ftype == FRAME_GOAWAY:
                with self.lock:
                    self.goaways.append((conn_id, int.from_bytes(payload[4:8], "big")))
            elif ftype == FRAME_RST_STREAM:
                pending.pop(stream, None)
                with self.lock:
                    self.resets.append((conn_id, stream, int.from_bytes(payload, "big")))
            elif ftype == FRAME_HEADERS and stream not in pending:
                req = UpRequest(conn_id, stream, payload)
                with self.lock:
                    self.requests.append(req)
                pending[stream] = req
                if flags & END_STREAM:
                    ready = pending.pop(stream)
            elif ftype in (FRAME_HEADERS, FRAME_DATA) and flags & END_STREAM and stream in pending:
                ready = pending.pop(stream)
            if ready is not None:
                resp = Response(encoder, ready.stream)
                self.handler(ready, resp)
                s.sendall(resp.out)

    def stop(self):
        super().stop()
        self.shut_connections()

# --------------------------------------------------------------------------
# Downstream: malformed requests from an HTTP/2 client.

POST = replaced(GET, ":method", "POST")
AFTER = replaced(GET, ":path", "/after")  # the valid request that follows on the same connection


class H2RequestRulesTest(IntegrationTest):
    """Every malformed request: RST_STREAM PROTOCOL_ERROR on its stream,
    nothing upstream, and the connection goes on (a GET /after on the
    next stream is served 200 "ok" by the origin)."""

    def listener(self, **route):
        """An HTTP/1.1 origin (it also checks that what reaches it is well
        formed) behind a listener, with an idle upstream connection in the
        pool already (GET /warm): a request is written upstream the moment
        onelayer takes it for complete, never after a connect."""
        origin = self.start_origin()
        proxy = self.proxy_for(origin, timeout="5s", retry=dict({"max_attempts": 1}, **route))
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/warm", host="svc.test").status, 200)
        return origin, proxy

    def exchange(self, proxy, head, body=(), trailers=None, trailers_end=True):
        """Stream 1 of a new connection: `head` (END_STREAM unless a body
        or trailers follow), the DATA frames in `body` ((bytes, end)
        pairs), then `trailers`; all in one write, so the outcome does not
        depend on timing. Returns stream 1's outcome once a valid GET on
        stream 3 of the same connection has been served."""
        c = RawH2Client(proxy.port())
        self.addCleanup(c.close)
        c.headers(1, head, end_stream=not body and trailers is None)
        for piece, end in body:
            c.data(1, piece, end)
        if trailers is not None:
            c.headers(1, trailers, end_stream=trailers_end)
        got = c.outcome(1)
        c.headers(3, AFTER)
        after = c.outcome(3)
        self.assertEqual((after[:2], after[3:]) if isinstance(after, tuple) else after,
                         (("answered", 200), (b"ok",)), "the connection did not go on after %r" % (got,))
        c.close()
        return got

    def assertRefused(self, proxy, cases):
        """Every (name, head) of `cases`: RST_STREAM PROTOCOL_ERROR."""
        for name, head in cases:
            with self.subTest(case=name):
                self.assertEqual(self.exchange(proxy, head), RESET_1)

    def assertOnlyAfters(self, origin, count, extra=()):
        """What reached the origin: the GET /after of each exchange (and `extra` targets)."""
        want = sorted(["/warm"] + ["/after"] * count + list(extra))
        got = origin.wait_for(len(want))
        time.sleep(0.1)  # a late arrival would show
        self.assertEqual(sorted(a.target for a in origin.snapshot()), want, got)

    def test_a_request_without_a_required_pseudo_header_is_reset(self):
        origin, proxy = self.listener()
        self.assertRefused(proxy, [
            (":method missing", without(GET, ":method")),
            (":scheme missing", without(GET, ":scheme")),
            (":path missing", without(GET, ":path")),
            ("neither :authority nor host", without(GET, ":authority")),
        ])
        # host in place of :authority is enough (RFC 9113 8.3.1).
        got = self.exchange(proxy, without(GET, ":authority") + [("host", "svc.test")])
        self.assertEqual(got[:2], ("answered", 200))
        self.assertOnlyAfters(origin, 5, ["/m"])
        self.assertEqual([a.header("host") for a in origin.snapshot() if a.target == "/m"], ["svc.test"])

    def test_a_repeated_misplaced_unknown_or_empty_pseudo_header_is_reset(self):
        origin, proxy = self.listener()
        self.assertRefused(proxy, [
            ("two :path", GET + [(":path", "/n")]),
            ("two :method", GET + [(":method", "GET")]),
            ("two :authority", GET + [(":authority", "svc.test")]),
            ("pseudo-header after a regular field", GET[:3] + [("x-a", "b"), (":path", "/m")]),
            ("unknown pseudo-header :foo", GET + [(":foo", "x")]),
            ("response pseudo-header :status", GET + [(":status", "200")]),
            (":status alone", [(":status", "200")]),
            ("empty :path", replaced(GET, ":path", "")),
            ("empty :method", replaced(GET, ":method", "")),
            ("empty :scheme", replaced(GET, ":scheme", "")),
            ("empty :authority", replaced(GET, ":authority", "")),
        ])
        self.assertOnlyAfters(origin, 11)

    def test_path_is_origin_form_and_only_options_may_ask_for_asterisk(self):
        origin, proxy = self.listener()
        self.assertRefused(proxy, [
            ("GET x", replaced(GET, ":path", "x")),
            ("GET ?a", replaced(GET, ":path", "?a")),
            ("GET absolute URI", replaced(GET, ":path", "http://svc.test/m")),
            ("GET *", replaced(GET, ":path", "*")),
            ("HEAD *", replaced(replaced(GET, ":path", "*"), ":method", "HEAD")),
            ("POST *", replaced(replaced(GET, ":path", "*"), ":method", "POST")),
            ("OPTIONS x", replaced(replaced(GET, ":path", "x"), ":method", "OPTIONS")),
            ("a space in :path", replaced(GET, ":path", "/a b")),
            ("a control byte in :path", replaced(GET, ":path", "/a\x01b")),
        ])
        # OPTIONS * is a request like any other: the origin answers it.
        got = self.exchange(proxy, replaced(replaced(GET, ":path", "*"), ":method", "OPTIONS"))
        self.assertEqual(got, ("answered", 200, [("via", "1.1 onelayer"), ("content-length", "2")], b"ok"))
        self.assertOnlyAfters(origin, 10, ["*"])
        self.assertEqual([a.method for a in origin.snapshot() if a.target == "*"], ["OPTIONS"])

    def test_a_method_scheme_or_authority_with_a_forbidden_byte_is_reset(self):
        origin, proxy = self.listener()
        self.assertRefused(proxy, [
            ("method GE T", replaced(GET, ":method", "GE T")),
            ("method GE(T", replaced(GET, ":method", "GE(T")),
            ("scheme 1http", replaced(GET, ":scheme", "1http")),
            ("scheme ht tp", replaced(GET, ":scheme", "ht tp")),
            ("authority with a space", replaced(GET, ":authority", "svc test")),
            ("authority with /", replaced(GET, ":authority", "svc/test")),
            ("authority with ?", replaced(GET, ":authority", "svc?x")),
            ("host with a space", without(GET, ":authority") + [("host", "svc test")]),
            ("two host fields", without(GET, ":authority") + [("host", "a"), ("host", "b")]),
        ])
        # Bytes the codec takes: every tchar in a method (which onelayer then
        # answers 400, as HTTP/1.1 does a method it does not know), a scheme
        # of letters, digits, + - . (ALPHA first), a port.
        got = self.exchange(proxy, replaced(GET, ":method", "!#$%&'*+-.^_`|~"))
        self.assertEqual(got[:2], ("answered", 400))
        self.assertEqual(dict(got[2]).get("x-onelayer-error"), "bad_request")
        for name, head, target in [
                ("scheme h+t-t.p", replaced(replaced(GET, ":scheme", "h+t-t.p"), ":path", "/s"), "/s"),
                ("authority with a port", replaced(replaced(GET, ":authority", "svc.test:8080"), ":path", "/p"), "/p")]:
            with self.subTest(case=name):
                self.assertEqual(self.exchange(proxy, head)[:2], ("answered", 200))
        self.assertOnlyAfters(origin, 12, ["/s", "/p"])

    def test_connect_is_reset_unless_well_formed_and_then_refused_by_onelayer(self):
        origin, proxy = self.listener()
        self.assertRefused(proxy, [
            ("CONNECT without :authority", [(":method", "CONNECT")]),
            ("CONNECT with :path", [(":method", "CONNECT"), (":authority", "svc.test:443"), (":path", "/")]),
            ("CONNECT with :scheme", [(":method", "CONNECT"), (":authority", "svc.test:443"), (":scheme", "http")]),
            # Extended CONNECT (RFC 8441) is not enabled: :protocol is unknown.
            (":protocol with CONNECT", [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"),
                                        (":authority", "svc.test"), (":path", "/ws")]),
            (":protocol with GET", GET + [(":protocol", "websocket")]),
        ])
        # A well-formed CONNECT passes the codec; onelayer opens no tunnels.
        got = self.exchange(proxy, [(":method", "CONNECT"), (":authority", "svc.test:443")])
        self.assertEqual(got[:2], ("answered", 400))
        self.assertEqual(dict(got[2]).get("x-onelayer-error"), "bad_request")
        self.assertTrue(got[3].startswith(b"bad_request\nonelayer does not open CONNECT tunnels"), got[3])
        self.assertOnlyAfters(origin, 6)

    def test_connection_specific_fields_are_reset_and_te_may_only_say_trailers(self):
        origin, proxy = self.listener()
        self.assertRefused(proxy, [
            ("connection", GET + [("connection", "close")]),
            ("keep-alive", GET + [("keep-alive", "timeout=5")]),
            ("proxy-connection", GET + [("proxy-connection", "keep-alive")]),
            ("transfer-encoding", GET + [("transfer-encoding", "chunked")]),
            ("upgrade", GET + [("upgrade", "h2c")]),
            ("te: gzip", GET + [("te", "gzip")]),
            ("te: trailers, gzip", GET + [("te", "trailers, gzip")]),
            ("te empty", GET + [("te", "")]),
        ])
        for name, value, target in [("te: trailers", "trailers", "/t1"), ("te: Trailers", "Trailers", "/t2")]:
            with self.subTest(case=name):
                got = self.exchange(proxy, replaced(GET, ":path", target) + [("te", value)])
                self.assertEqual(got, ("answered", 200, [("via", "1.1 onelayer"), ("content-length", "2")], b"ok"))
        self.assertOnlyAfters(origin, 10, ["/t1", "/t2"])

    def test_a_content_length_that_is_no_number_or_given_twice_is_reset(self):
        origin, proxy = self.listener()
        self.assertRefused(proxy, [
            ("abc", GET + [("content-length", "abc")]),
            ("-1", GET + [("content-length", "-1")]),
            ("+5", GET + [("content-length", "+5")]),
            ("empty", GET + [("content-length", "")]),
            ("0,0", GET + [("content-length", "0,0")]),
            ("2^64 and more", GET + [("content-length", "99999999999999999999999")]),
            ("two equal fields", GET + [("content-length", "0"), ("content-length", "0")]),
            ("two different fields", GET + [("content-length", "0"), ("content-length", "1")]),
            # END_STREAM on the head: no body, yet 5 bytes announced.
            ("5 without a body", POST + [("content-length", "5")]),
        ])
        self.assertOnlyAfters(origin, 9)

    def test_a_body_that_does_not_match_its_content_length_is_reset_before_it_goes_upstream(self):
        # Head and DATA come in one write: onelayer holds a small body
        # (for retries) before it opens the upstream request, so the reset
        # comes before anything is sent.
        origin, proxy = self.listener()
        for name, piece, length in [("10 bytes for 5", b"0123456789", "5"), ("3 bytes for 5", b"012", "5")]:
            with self.subTest(case=name):
                got = self.exchange(proxy, POST + [("content-length", length)], body=[(piece, True)])
                self.assertEqual(got, RESET_1)
        # The same request with the body it announces is served.
        got = self.exchange(proxy, replaced(POST, ":path", "/exact") + [("content-length", "5")],
                            body=[(b"01", False), (b"234", True)])
        self.assertEqual(got[:2], ("answered", 200))
        self.assertOnlyAfters(origin, 3, ["/exact"])
        (exact,) = [a for a in origin.snapshot() if a.target == "/exact"]
        self.assertEqual((exact.method, exact.header("content-length"), exact.body), ("POST", "5", b"01234"))

    # content-length: 0 on a HEADERS without END_STREAM: the request is
    # complete only at END_STREAM, so onelayer waits for it before a byte
    # goes upstream; DATA in between resets the stream and the origin
    # never sees the request (it once went up at once on a pooled
    # connection and the origin answered a request the client saw reset).
    def test_data_after_content_length_0_is_reset_before_the_request_goes_upstream(self):
        origin, proxy = self.listener()
        got = self.exchange(proxy, replaced(POST, ":path", "/cl0") + [("content-length", "0")], body=[(b"abc", True)])
        self.assertEqual(got, RESET_1)
        self.assertOnlyAfters(origin, 1)

    def test_content_length_0_without_end_stream_is_forwarded_only_when_the_stream_ends(self):
        # The head alone (content-length: 0, no END_STREAM) stays with
        # onelayer: a pooled upstream connection is ready, yet nothing goes
        # up until the empty DATA frame with END_STREAM comes.
        origin, proxy = self.listener()
        c = RawH2Client(proxy.port())
        self.addCleanup(c.close)
        c.headers(1, replaced(POST, ":path", "/cl0-late") + [("content-length", "0")], end_stream=False)
        time.sleep(0.5)
        self.assertEqual([a.target for a in origin.snapshot()], ["/warm"])
        c.data(1, b"", True)
        got = c.outcome(1)
        self.assertEqual(got[:2], ("answered", 200))
        self.assertEqual(sorted(a.target for a in origin.snapshot()), ["/cl0-late", "/warm"])

    def test_content_length_0_with_an_empty_data_frame_is_served(self):
        # The contrast to the test above: the same head ended by an empty
        # DATA frame is a well-formed request, forwarded at its end.
        origin, proxy = self.listener()
        got = self.exchange(proxy, replaced(POST, ":path", "/cl0") + [("content-length", "0")], body=[(b"", True)])
        self.assertEqual(got[:2], ("answered", 200))
        self.assertOnlyAfters(origin, 1, ["/cl0"])
        (arrival,) = [a for a in origin.snapshot() if a.target == "/cl0"]
        self.assertEqual((arrival.method, arrival.header("content-length"), arrival.body), ("POST", "0", b""))

    def test_a_streamed_body_that_breaks_its_content_length_is_reset_and_cut_upstream(self):
        # A body past the retry buffer streams: the head and the first
        # 2048 bytes are at the origin when the rest breaks the length.
        # Nothing of the offending DATA goes up (too long), or what came
        # goes up but never the end (too short); the origin's request
        # stays incomplete and the client's stream is reset.
        origin, proxy = self.listener(buffer_limit="1KiB")
        head = replaced(POST, ":path", "/streamed") + [("content-length", "4096")]
        for name, rest, expect_len in [("longer", b"b" * 4096, 2048), ("shorter", b"s" * 100, 2148),
                                       ("exact", b"e" * 2048, 4096)]:
            with self.subTest(case=name):
                c = RawH2Client(proxy.port())
                self.addCleanup(c.close)
                before, arrivals = origin.bytes_received, origin.count()
                c.headers(1, head, end_stream=False)
                c.data(1, b"a" * 2048, False)
                c.send()
                # The head (over 100 bytes) and the 2048 bytes are in.
                self.assertTrue(h.wait_until(lambda: origin.bytes_received - before > 2148, 5))
                c.data(1, rest, True)
                got = c.outcome(1)
                if name == "exact":
                    self.assertEqual(got[:2], ("answered", 200))
                else:
                    self.assertEqual(got, RESET_1)
                (arrival,) = origin.wait_for(arrivals + 1)[arrivals:]
                self.assertEqual((arrival.target, arrival.header("content-length"), arrival.body_len,
                                  arrival.body_complete), ("/streamed", "4096", expect_len, name == "exact"))
                c.headers(3, AFTER)
                self.assertEqual(c.outcome(3)[:2], ("answered", 200))
                c.close()
        records = ops.access_records(proxy, 3, lambda r: r.get("path") == "/streamed")
        self.assertEqual([(r["status"], r["error"], r["bytes_in"]) for r in records],
                         [("499", "client_reset", "2048"), ("499", "client_reset", "2148"), ("200", "-", "4096")])

    def test_trailers_that_do_not_end_the_stream_or_carry_a_pseudo_header_are_reset(self):
        origin, proxy = self.listener()
        body = [(b"abc", False)]
        for name, trailers, end in [("no END_STREAM", [("x-t", "v")], False),
                                    ("a pseudo-header", [(":path", "/x")], True),
                                    ("an upper-case name", [("X-T", "v")], True),
                                    ("a connection-specific field", [("connection", "close")], True)]:
            with self.subTest(case=name):
                self.assertEqual(self.exchange(proxy, POST, body=body, trailers=trailers, trailers_end=end), RESET_1)
        with self.subTest(case="DATA after trailers"):
            c = RawH2Client(proxy.port())
            self.addCleanup(c.close)
            c.headers(1, POST, end_stream=False)
            c.data(1, b"abc", False)
            c.headers(1, [("x-t", "v")], end_stream=False)
            c.data(1, b"more", True)
            self.assertEqual(c.outcome(1), RESET_1)
            c.close()
        # Valid trailers: the request is served (the HTTP/1 origin gets the
        # body chunked, the trailer field in its trailer section).
        got = self.exchange(proxy, replaced(POST, ":path", "/trailers"), body=body, trailers=[("x-t", "v")])
        self.assertEqual(got[:2], ("answered", 200))
        self.assertOnlyAfters(origin, 5, ["/trailers"])
        (arrival,) = [a for a in origin.snapshot() if a.target == "/trailers"]
        self.assertEqual((arrival.body, arrival.header("transfer-encoding"), arrival.trailers),
                         (b"abc", "chunked", [("x-t", "v")]))

    def test_content_length_in_request_trailers_is_dropped_and_the_request_served(self):
        # In trailers content-length frames nothing (RFC 9110 6.5.1): the
        # field is dropped, as from an HTTP/1.1 chunked trailer section,
        # and the rest of the trailers go on.
        origin, proxy = self.listener()
        got = self.exchange(proxy, replaced(POST, ":path", "/cl-trailer"), body=[(b"abc", False)],
                            trailers=[("content-length", "7"), ("x-t", "v")])
        self.assertEqual(got[:2], ("answered", 200))
        self.assertOnlyAfters(origin, 1, ["/cl-trailer"])
        (arrival,) = [a for a in origin.snapshot() if a.target == "/cl-trailer"]
        self.assertEqual((arrival.body, arrival.trailers), (b"abc", [("x-t", "v")]))

    def test_an_upper_case_field_name_is_reset(self):
        origin, proxy = self.listener()
        self.assertRefused(proxy, [("X-Foo", GET + [("X-Foo", "v")]), ("Host", without(GET, ":authority") +
                                                                          [("Host", "svc.test")])])
        self.assertOnlyAfters(origin, 2)

    def test_twenty_malformed_requests_on_one_connection_are_reset_and_the_next_ends_it(self):
        # Malformed messages count as stream errors: past 20 on one
        # connection (h2 max_stream_errors) it ends with GOAWAY
        # PROTOCOL_ERROR.
        origin, proxy = self.listener()
        kinds = [without(GET, ":method"), GET + [(":foo", "x")], GET + [("connection", "close")],
                 GET + [("content-length", "abc")], GET + [("X-Foo", "v")]]
        c = RawH2Client(proxy.port())
        self.addCleanup(c.close)
        got = []
        for i in range(21):
            c.headers(1 + 2 * i, kinds[i % len(kinds)])
            got.append(c.outcome(1 + 2 * i))
        self.assertEqual(got, [RESET_1] * 20 + [("goaway", PROTOCOL_ERROR)])
        self.assertTrue(h.wait_until(lambda: "GOAWAY code 1 (too many stream errors)" in proxy.stderr(), 3),
                        proxy.stderr())
        self.assertOnlyAfters(origin, 0)


# --------------------------------------------------------------------------
# Upstream: malformed responses from an h2c origin.

S200 = (":status", "200")


def ok_after(respond):
    """An origin handler: GET /fine is answered 200 "fine", the rest by `respond`."""
    def handler(req, resp):
        if req.path == "/fine":
            resp.head(S200, ("content-length", "4")).data(b"fine", end_stream=True)
        else:
            respond(resp)
    return handler


class H2ResponseRulesTest(IntegrationTest):
    """An HTTP/1.1 client asks; a raw h2c origin answers with frames
    written by hand. A malformed response before any head: 502
    upstream_reset, the origin's stream reset PROTOCOL_ERROR (the
    connection stays: the next request rides it). One found malformed
    after its head went to the client: the client's response is cut."""

    def through(self, respond, retry=None):
        origin = RawH2Origin(ok_after(respond))
        self.addCleanup(origin.stop)
        self.addCleanup(lambda: self.assertEqual(origin.errors, [], "the raw h2 origin failed"))
        proxy = self.start_proxy(h.simple_config(origin.port, upstream={"protocol": "h2c"}, timeout="5s",
                                                 retry=retry or {"max_attempts": 1}, workers=1))
        return origin, proxy

    def record(self, proxy, path="/case"):
        (rec,) = ops.access_records(proxy, 1, lambda r: r.get("path") == path)
        return rec["status"], rec["error"], rec["attempts"]

    def fine_after(self, origin, proxy, conn=None):
        """GET /fine (on `conn` or a new client connection) is served over
        the same upstream connection."""
        if conn is None:
            with h.Conn(proxy.port()) as c:
                r = c.request("GET", "/fine", host="svc.test")
        else:
            r = conn.request("GET", "/fine", host="svc.test")
        self.assertEqual((r.status, r.body), (200, b"fine"))
        self.assertEqual([(q.conn_id, q.stream, q.path) for q in origin.snapshot()], [(1, 1, "/case"), (1, 3, "/fine")])

    def assertRefusedUpstream(self, cases, method="GET"):
        for name, respond in cases:
            with self.subTest(case=name):
                origin, proxy = self.through(respond)
                with h.Conn(proxy.port()) as c:
                    r = c.request(method, "/case", host="svc.test")
                    self.assertProxyError(r, 502, "upstream_reset")
                    self.assertEqual(r.body, b"upstream_reset\n")
                    self.assertEqual(c.interim, [])
                    self.fine_after(origin, proxy, c)
                self.assertEqual((origin.resets, origin.goaways), ([(1, 1, PROTOCOL_ERROR)], []))
                self.assertEqual(self.record(proxy), ("502", "upstream_reset", "1"))

    def served(self, respond, method="GET", headers=()):
        """The client's response to `respond`, which must be served whole."""
        origin, proxy = self.through(respond)
        with h.Conn(proxy.port()) as c:
            r = c.request(method, "/case", host="svc.test", headers=list(headers))
            interim = list(c.interim)
            self.fine_after(origin, proxy, c)
        self.assertEqual((origin.resets, origin.goaways), ([], []))
        return r, interim, proxy

    def cut(self, respond, method="GET", headers=()):
        """A response whose head reaches the client before the fault: what
        the client got (a partial Response) and whether its connection was
        closed; the origin's stream was reset PROTOCOL_ERROR."""
        origin, proxy = self.through(respond)
        raw, closed = h.raw_exchange(proxy.port(), h.build_request(method, "/case", host="svc.test",
                                                                   headers=list(headers)), timeout=5)
        try:
            got = h.parse_responses(raw, [method])
            self.fail("a whole response reached the client: %r" % raw)
        except h.IncompleteMessage as e:
            got = e.partial
        self.assertIsNotNone(got, raw)
        self.assertTrue(closed)
        self.fine_after(origin, proxy)  # behind the RST_STREAM on the same upstream connection
        self.assertEqual((origin.resets, origin.goaways), ([(1, 1, PROTOCOL_ERROR)], []))
        return got, self.record(proxy)

    # -- heads -------------------------------------------------------------

    def test_a_response_head_that_breaks_the_status_rules_is_a_502_upstream_reset(self):
        self.assertRefusedUpstream([
            ("no :status", lambda w: w.head(("x-a", "b")).data(b"ok", end_stream=True)),
            (":status 20", lambda w: w.head((":status", "20")).data(b"ok", end_stream=True)),
            (":status 2000", lambda w: w.head((":status", "2000")).data(b"ok", end_stream=True)),
            (":status abc", lambda w: w.head((":status", "abc")).data(b"ok", end_stream=True)),
            (":status +20", lambda w: w.head((":status", "+20")).data(b"ok", end_stream=True)),
            (":status empty", lambda w: w.head((":status", "")).data(b"ok", end_stream=True)),
            (":status 099", lambda w: w.head((":status", "099")).data(b"ok", end_stream=True)),
            (":status 101", lambda w: w.head((":status", "101")).data(b"ok", end_stream=True)),
            (":status 101, END_STREAM", lambda w: w.head((":status", "101"), end_stream=True)),
            ("two :status", lambda w: w.head(S200, (":status", "200")).data(b"ok", end_stream=True)),
        ])

    def test_a_three_digit_status_outside_100_599_is_a_bad_upstream_response(self):
        # The codec checks three digits; onelayer, as for an HTTP/1.1
        # upstream, that the status exists (RFC 9110 15 ends at 599).
        origin, proxy = self.through(lambda w: w.head((":status", "600")).data(b"ok", end_stream=True))
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/case", host="svc.test")
        self.assertProxyError(r, 502, "bad_upstream_response")
        self.assertEqual(self.record(proxy), ("502", "bad_upstream_response", "1"))

    def test_a_misplaced_or_request_pseudo_header_in_a_response_is_a_502_upstream_reset(self):
        self.assertRefusedUpstream([
            ("pseudo-header after a regular field", lambda w: w.head(("x-a", "b"), S200).data(b"ok", end_stream=True)),
            (":path", lambda w: w.head(S200, (":path", "/x")).data(b"ok", end_stream=True)),
            (":method", lambda w: w.head(S200, (":method", "GET")).data(b"ok", end_stream=True)),
            (":authority", lambda w: w.head(S200, (":authority", "x")).data(b"ok", end_stream=True)),
        ])

    def test_a_bad_field_name_or_value_in_a_response_is_a_502_upstream_reset(self):
        self.assertRefusedUpstream([
            ("upper-case name X-Foo", lambda w: w.head(S200, ("X-Foo", "v")).data(b"ok", end_stream=True)),
            ("name with a space", lambda w: w.head(S200, ("x t", "v")).data(b"ok", end_stream=True)),
            ("name with (", lambda w: w.head(S200, ("x(t", "v")).data(b"ok", end_stream=True)),
            ("name with \\x01", lambda w: w.head(S200, ("x-t\x01", "v")).data(b"ok", end_stream=True)),
            ("empty name", lambda w: w.head(S200, ("", "v")).data(b"ok", end_stream=True)),
            ("value with NUL", lambda w: w.head(S200, ("x-foo", "a\x00b")).data(b"ok", end_stream=True)),
            ("value with CR", lambda w: w.head(S200, ("x-foo", "a\rb")).data(b"ok", end_stream=True)),
            ("value with LF", lambda w: w.head(S200, ("x-foo", "a\nb")).data(b"ok", end_stream=True)),
            ("value with DEL", lambda w: w.head(S200, ("x-foo", "a\x7fb")).data(b"ok", end_stream=True)),
            ("value with a leading space", lambda w: w.head(S200, ("x-foo", " v")).data(b"ok", end_stream=True)),
            ("value with a trailing tab", lambda w: w.head(S200, ("x-foo", "v\t")).data(b"ok", end_stream=True)),
        ])
        # An inner space and obs-text are allowed.
        r, _, _ = self.served(lambda w: w.head(S200, ("x-foo", "a b"), ("x-bar", "a\x80b")).data(
            b"ok", end_stream=True))
        self.assertEqual((r.status, r.body, r.header("x-foo"), r.header("x-bar")), (200, b"ok", "a b", "a\x80b"))

    def test_a_connection_specific_field_in_a_response_is_a_502_upstream_reset(self):
        self.assertRefusedUpstream([
            ("connection: close", lambda w: w.head(S200, ("connection", "close")).data(b"ok", end_stream=True)),
            ("transfer-encoding: chunked",
             lambda w: w.head(S200, ("transfer-encoding", "chunked")).data(b"ok", end_stream=True)),
            ("keep-alive", lambda w: w.head(S200, ("keep-alive", "timeout=5")).data(b"ok", end_stream=True)),
            ("proxy-connection", lambda w: w.head(S200, ("proxy-connection", "x")).data(b"ok", end_stream=True)),
            ("upgrade", lambda w: w.head(S200, ("upgrade", "h2c")).data(b"ok", end_stream=True)),
            ("te: gzip", lambda w: w.head(S200, ("te", "gzip")).data(b"ok", end_stream=True)),
        ])

    # -- 1xx -----------------------------------------------------------------

    def test_an_interim_head_then_a_final_head_is_served(self):
        for name, interim in [("100", [(":status", "100")]), ("103", [(":status", "103"), ("link", "</a.css>")])]:
            with self.subTest(case=name):
                r, seen, proxy = self.served(lambda w: w.head(*interim).head(S200, ("content-length", "4")).data(
                    b"body", end_stream=True))
                self.assertEqual((r.status, r.body, r.header("content-length")), (200, b"body", "4"))
                self.assertEqual(seen, [], "an interim response reached the HTTP/1.1 client")
                self.assertEqual(self.record(proxy), ("200", "-", "1"))

    def test_a_malformed_interim_head_is_a_502_upstream_reset(self):
        final = (S200, ("content-length", "4"))
        self.assertRefusedUpstream([
            ("1xx with content-length", lambda w: w.head((":status", "100"), ("content-length", "4")).head(
                *final).data(b"body", end_stream=True)),
            ("DATA after a 1xx", lambda w: w.head((":status", "100")).data(b"early").head(*final).data(
                b"body", end_stream=True)),
            ("1xx with END_STREAM", lambda w: w.head((":status", "100"), end_stream=True)),
            ("101 after a 100", lambda w: w.head((":status", "100")).head((":status", "101")).data(
                b"ok", end_stream=True)),
        ])

    def test_a_1xx_after_the_final_head_cuts_the_response(self):
        got, rec = self.cut(lambda w: w.head(S200).head((":status", "100")).data(b"ok", end_stream=True))
        self.assertEqual((got.status, got.header("transfer-encoding"), got.body), (200, "chunked", b""))
        self.assertEqual(rec, ("200", "upstream_reset", "1"))

    # -- content-length and bodies ----------------------------------------------

    def test_a_bad_or_repeated_content_length_is_a_502_upstream_reset(self):
        self.assertRefusedUpstream([
            ("two content-length fields",
             lambda w: w.head(S200, ("content-length", "2"), ("content-length", "2")).data(b"ok", end_stream=True)),
            ("abc", lambda w: w.head(S200, ("content-length", "abc")).data(b"ok", end_stream=True)),
            ("-1", lambda w: w.head(S200, ("content-length", "-1")).data(b"ok", end_stream=True)),
            ("empty", lambda w: w.head(S200, ("content-length", "")).data(b"ok", end_stream=True)),
            ("2,2", lambda w: w.head(S200, ("content-length", "2,2")).data(b"ok", end_stream=True)),
            ("5 and END_STREAM on the head", lambda w: w.head(S200, ("content-length", "5"), end_stream=True)),
            ("204 with content-length: 5", lambda w: w.head((":status", "204"), ("content-length", "5"),
                                                            end_stream=True)),
        ])

    def test_a_body_longer_than_content_length_cuts_the_response_before_any_of_it(self):
        for name, end in [("with END_STREAM", True), ("without END_STREAM", False)]:
            with self.subTest(case=name):
                got, rec = self.cut(lambda w: w.head(S200, ("content-length", "5")).data(b"0123456789",
                                                                                         end_stream=end))
                self.assertEqual((got.status, got.header("content-length"), got.body), (200, "5", b""))
                self.assertEqual(rec, ("200", "upstream_reset", "1"))

    def test_a_body_shorter_than_content_length_cuts_the_response_after_it(self):
        got, rec = self.cut(lambda w: w.head(S200, ("content-length", "5")).data(b"012", end_stream=True))
        self.assertEqual((got.status, got.header("content-length"), got.body), (200, "5", b"012"))
        self.assertEqual(rec, ("200", "upstream_reset", "1"))

    def test_data_on_a_response_that_has_no_body_is_refused_and_the_client_gets_the_head_whole(self):
        # The head is complete on its own and goes to the client whole; the
        # DATA is refused (the origin's stream is reset): none of it is
        # passed on. A HEAD answer, a 204 or a 304 is all head: the client's
        # connection serves its next request. A 200 whose content-length: 0
        # makes it complete is a response with a body, found broken after
        # its head: the client's connection is closed after it.
        for name, method, respond, status, length, goes_on in [
                ("HEAD answered with DATA", "HEAD",
                 lambda w: w.head(S200, ("content-length", "5")).data(b"hello", end_stream=True), 200, "5", True),
                ("204 with DATA", "GET", lambda w: w.head((":status", "204")).data(b"hello", end_stream=True), 204,
                 None, True),
                ("304 with DATA", "GET", lambda w: w.head((":status", "304")).data(b"hello", end_stream=True), 304,
                 None, True),
                ("content-length: 0 with DATA", "GET",
                 lambda w: w.head(S200, ("content-length", "0")).data(b"hello", end_stream=True), 200, "0", False)]:
            with self.subTest(case=name):
                origin, proxy = self.through(respond)
                with h.Conn(proxy.port()) as c:
                    r = c.request(method, "/case", host="svc.test")
                    self.assertEqual((r.status, r.header("content-length"), r.body), (status, length, b""))
                    if goes_on:
                        self.fine_after(origin, proxy, c)
                    else:
                        self.assertTrue(c.closed_by_peer(3.0), "the client connection stayed open")
                        self.assertEqual(bytes(c.reader.buf), b"")
                        self.fine_after(origin, proxy)
                self.assertEqual((origin.resets, origin.goaways), ([(1, 1, PROTOCOL_ERROR)], []))
                self.assertEqual(self.record(proxy), (str(status), "upstream_reset", "1"))

    def test_a_204_with_content_length_0_is_served_without_it(self):
        r, _, proxy = self.served(lambda w: w.head((":status", "204"), ("content-length", "0"), end_stream=True))
        self.assertEqual((r.status, r.body, r.header("content-length")), (204, b"", None))
        self.assertEqual(self.record(proxy), ("204", "-", "1"))
        # An HTTP/2 client gets it without content-length too.
        c = RawH2Client(proxy.port())
        self.addCleanup(c.close)
        c.headers(1, replaced(GET, ":path", "/case"))
        self.assertEqual(c.outcome(1), ("answered", 204, [("via", "2 onelayer")], b""))

    def test_heads_without_a_body_that_announce_a_length_are_served(self):
        for name, method, status in [("HEAD", "HEAD", 200), ("304", "GET", 304)]:
            with self.subTest(case=name):
                r, _, _ = self.served(lambda w: w.head((":status", str(status)), ("content-length", "5"),
                                                       end_stream=True), method=method)
                self.assertEqual((r.status, r.header("content-length"), r.body), (status, "5", b""))

    # -- trailers --------------------------------------------------------------

    def test_malformed_response_trailers_cut_the_response(self):
        for name, respond in [
                ("trailers without END_STREAM", lambda w: w.head(S200).data(b"ok").head(("x-t", "v"))),
                ("a pseudo-header in trailers", lambda w: w.head(S200).data(b"ok").head((":status", "200"),
                                                                                       end_stream=True)),
                ("an upper-case name in trailers", lambda w: w.head(S200).data(b"ok").head(("X-T", "v"),
                                                                                          end_stream=True)),
                ("connection in trailers", lambda w: w.head(S200).data(b"ok").head(("connection", "close"),
                                                                                  end_stream=True)),
                ("DATA after trailers", lambda w: w.head(S200).data(b"ok").head(("x-t", "v")).data(
                    b"more", end_stream=True))]:
            with self.subTest(case=name):
                got, rec = self.cut(respond, headers=[("TE", "trailers")])
                self.assertEqual((got.status, got.header("transfer-encoding"), got.body), (200, "chunked", b"ok"))
                self.assertEqual(rec, ("200", "upstream_reset", "1"))

    def test_valid_response_trailers_reach_the_client(self):
        r, _, _ = self.served(lambda w: w.head(S200).data(b"ok").head(("x-t", "v"), end_stream=True),
                              headers=[("TE", "trailers")])
        self.assertEqual((r.status, r.body, r.header("transfer-encoding")), (200, b"ok", "chunked"))
        self.assertEqual([(k.lower(), v) for k, v in r.trailers], [("x-t", "v")])

    def test_content_length_in_response_trailers_never_reaches_the_client(self):
        # NOTE: nghttp2 (onelayer at HEAD) takes the trailer and onelayer
        # drops it: 200 "ok" served whole; the working tree's
        # H2MessageRules resets the stream: the response is cut. Either
        # way no content-length trailer reaches the client.
        origin, proxy = self.through(lambda w: w.head(S200).data(b"ok").head(("content-length", "2"),
                                                                              end_stream=True))
        raw, _ = h.raw_exchange(proxy.port(), h.build_request("GET", "/case", host="svc.test",
                                                              headers=[("TE", "trailers")]), timeout=5, responses=1)
        self.assertTrue(raw.startswith(b"HTTP/1.1 200 OK\r\n"), raw)
        self.assertTrue(raw.split(b"\r\n\r\n", 1)[1].startswith(b"2\r\nok\r\n"), raw)
        self.assertNotIn(b"content-length", raw.lower())

    # -- retries and accounting --------------------------------------------------

    def test_a_get_with_a_malformed_response_is_retried_and_a_post_is_not(self):
        retry = {"max_attempts": 3, "backoff": {"base": "1ms", "cap": "5ms", "jitter": "none"}}
        origin, proxy = self.through(lambda w: w.head(("x-a", "b")).data(b"ok", end_stream=True), retry=retry)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/case", host="svc.test")
            self.assertProxyError(r, 502, "upstream_reset")
            self.assertEqual(r.header("x-retry-exhausted"), "3")
            r = c.request("POST", "/post", host="svc.test", body=b"x")
            self.assertProxyError(r, 502, "upstream_reset")
            self.assertIsNone(r.header("x-retry-exhausted"))
        self.assertEqual([(q.conn_id, q.stream, q.method, q.path, q.field("x-retry-attempt"))
                          for q in origin.snapshot()],
                         [(1, 1, "GET", "/case", "1"), (1, 3, "GET", "/case", "2"), (1, 5, "GET", "/case", "3"),
                          (1, 7, "POST", "/post", "1")])
        self.assertTrue(h.wait_until(lambda: len(origin.resets) == 4, 3), origin.resets)
        self.assertEqual(origin.resets, [(1, s, PROTOCOL_ERROR) for s in (1, 3, 5, 7)])
        recs = ops.access_records(proxy, 2, lambda r: r.get("path") in ("/case", "/post"))
        self.assertEqual([(r["path"], r["status"], r["error"], r["attempts"], r["retry_reasons"], r["declined"])
                          for r in recs],
                         [("/case", "502", "upstream_reset", "3", "reset,reset", "attempts_exhausted"),
                          ("/post", "502", "upstream_reset", "1", "-", "not_idempotent")])

    def test_twenty_malformed_responses_on_one_connection_then_the_next_ends_it(self):
        # The upstream session counts malformed responses as stream errors
        # too: the 21st ends the connection (GOAWAY PROTOCOL_ERROR, no
        # RST_STREAM for its stream) and the next request opens another.
        origin, proxy = self.through(lambda w: w.head(S200, ("connection", "close")).data(b"ok", end_stream=True))
        with h.Conn(proxy.port()) as c:
            for i in range(22):
                r = c.request("GET", "/bad%d" % i, host="svc.test")
                self.assertProxyError(r, 502, "upstream_reset")
            r = c.request("GET", "/fine", host="svc.test")
            self.assertEqual((r.status, r.body), (200, b"fine"))
        self.assertEqual([(q.conn_id, q.stream) for q in origin.snapshot()],
                         [(1, 1 + 2 * i) for i in range(21)] + [(2, 1), (2, 3)])
        self.assertTrue(h.wait_until(lambda: origin.goaways == [(1, PROTOCOL_ERROR)], 3), origin.goaways)
        self.assertEqual(origin.resets, [(1, 1 + 2 * i, PROTOCOL_ERROR) for i in range(20)] + [(2, 1, PROTOCOL_ERROR)])


if __name__ == "__main__":
    unittest.main()
