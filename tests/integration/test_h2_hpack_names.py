"""How the real onelayer HPACK-encodes the upstream request fields whose
value is new on every request (``baggage``, ``x-request-timeout-ms``, trace
ids), read off the wire by an h2c origin that parses the frames itself: the
first request of a connection sends them with incremental indexing, which
puts their names in onelayer's encoder table; every later one sends them as
literals never indexed whose name is an index into that table, and they
still decode, with Debian's python3-hpack, to that request's values. The
time left is the exception when it repeats the value before it: then it
goes indexed."""

import socketserver
import sys
import threading
import unittest

try:
    import hpack
except ImportError:  # python3-hpack is Debian's; ctest's interpreter may be another 3.11
    sys.path.append("/usr/lib/python3/dist-packages")
    import hpack  # noqa: E402

import harness as h
from harness import IntegrationTest
from hpack_reading import INCREMENTAL, INDEXED, NEVER_INDEXED, STATIC_TABLE_ENTRIES, header_block_fragment, representations

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, SETTINGS, PING, GOAWAY, CONTINUATION = 0x0, 0x1, 0x4, 0x6, 0x7, 0x9
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4


def frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


class EncodedField:
    def __init__(self, field, sent):
        self.name, self.value = field[0], field[1]
        self.decoder_saw_never_indexed = isinstance(field, hpack.NeverIndexedHeaderTuple)
        self.form, self.name_index = sent.form, sent.name_index


class RawH2Origin:
    """An h2c origin on 127.0.0.1:0 that reads frames itself: it keeps each
    request's fields as encoded (decoded with one hpack.Decoder per
    connection) and answers every request 200 without a body."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []  # per request, in arrival order: [EncodedField]
        self.connections = 0
        self.errors = []
        origin = self

        class Connection(socketserver.BaseRequestHandler):
            def handle(self):
                origin._serve(self.request)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Connection)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def _serve(self, s):
        with self.lock:
            self.connections += 1
        try:
            self._converse(s)
        except Exception as e:  # noqa: BLE001  (recorded, asserted by the test)
            with self.lock:
                self.errors.append(repr(e))

    @staticmethod
    def _read(s, n):
        data = b""
        while len(data) < n:
            more = s.recv(n - len(data))
            if not more:
                raise EOFError
            data += more
        return data

    def _converse(self, s):
        if self._read(s, len(PREFACE)) != PREFACE:
            raise ValueError("no HTTP/2 preface")
        s.sendall(frame(SETTINGS, 0, 0))
        decoder = hpack.Decoder()
        block, block_stream, block_ends = b"", 0, False
        while True:
            try:
                head = self._read(s, 9)
            except EOFError:
                return
            length, kind, flags = int.from_bytes(head[:3], "big"), head[3], head[4]
            stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            payload = self._read(s, length)
            if kind == SETTINGS and not flags & ACK:
                s.sendall(frame(SETTINGS, ACK, 0))
            elif kind == PING and not flags & ACK:
                s.sendall(frame(PING, ACK, 0, payload))
            elif kind == GOAWAY:
                return
            elif kind == DATA and flags & END_STREAM:
                s.sendall(frame(HEADERS, END_HEADERS | END_STREAM, stream, b"\x88"))  # :status 200
            elif kind in (HEADERS, CONTINUATION):
                if kind == HEADERS:
                    payload = header_block_fragment(flags, payload)
                    block, block_stream, block_ends = b"", stream, bool(flags & END_STREAM)
                block += payload
                if flags & END_HEADERS:
                    self._keep(decoder, block)
                    if block_ends:
                        s.sendall(frame(HEADERS, END_HEADERS | END_STREAM, block_stream, b"\x88"))

    def _keep(self, decoder, block):
        fields = decoder.decode(block)
        forms = representations(block)
        if len(fields) != len(forms):
            raise ValueError("%d fields decoded, %d representations" % (len(fields), len(forms)))
        with self.lock:
            self.requests.append([EncodedField(f, r) for f, r in zip(fields, forms)])

    def snapshot(self):
        with self.lock:
            return list(self.requests)


def field_named(request, name):
    for f in request:
        if f.name == name:
            return f
    raise KeyError(name)


class H2HpackNamesTest(IntegrationTest):

    def test_per_request_fields_refer_to_their_name_in_the_table_after_the_first_request(self):
        o = RawH2Origin()
        self.addCleanup(o.stop)
        self.addCleanup(lambda: self.assertEqual(o.errors, [], "the raw origin failed"))
        proxy = self.start_proxy(h.simple_config(o.port, upstream={"protocol": "h2c"}, retry={"max_attempts": 2},
                                                 timeout="15s", workers=1))
        with h.Conn(proxy.port()) as c:
            for i in range(8):
                r = c.request("GET", "/ids/%d" % i, headers=[("Host", "svc.test"), ("User-Agent", "probe/1")])
                self.assertEqual(r.status, 200)
        self.assertEqual(o.connections, 1)
        requests = o.snapshot()
        self.assertEqual(len(requests), 8)
        attempts = set()
        previous_left, lefts_in_table, repeats = None, set(), 0
        for i, req in enumerate(requests):
            baggage, left = field_named(req, "baggage"), field_named(req, "x-request-timeout-ms")
            members = dict(m.split("=", 1) for m in baggage.value.split(","))
            self.assertEqual(members["retry-owner"], "itest")
            attempts.add(members["retry-attempt"])
            self.assertTrue(0 < int(left.value) <= 15000, left.value)
            if i == 0:
                # The seed: each name goes in onelayer's table (and the
                # origin's), with this request's value.
                for f in (baggage, left):
                    self.assertEqual((f.form, f.name_index), (INCREMENTAL, 0), "%s of the first request" % f.name)
                    self.assertFalse(f.decoder_saw_never_indexed)
                lefts_in_table.add(left.value)
            else:
                self.assert_never_indexed_by_dynamic_name(baggage, i)
                # The time left is the route timeout less the time the
                # request took to reach the upstream: mostly the same
                # milliseconds from one request to the next. A value that
                # repeats the one before goes indexed (found whole once it
                # entered the table); another is never indexed.
                if left.value != previous_left:
                    self.assert_never_indexed_by_dynamic_name(left, i)
                elif left.value in lefts_in_table:
                    self.assertEqual(left.form, INDEXED, "time left %s of request %d" % (left.value, i))
                    repeats += 1
                else:
                    repeats += 1
                    self.assertEqual(left.form, INCREMENTAL, "time left %s of request %d" % (left.value, i))
                    self.assertGreater(left.name_index, STATIC_TABLE_ENTRIES)
                    lefts_in_table.add(left.value)
            previous_left = left.value
            # A field that repeats is still found whole in the table.
            self.assertEqual(field_named(req, "x-retry-owner").form, INCREMENTAL if i == 0 else INDEXED)
        self.assertEqual(len(attempts), 8, "each request has its own attempt id")
        # A repeat is what the rule is about: with none the run tells nothing.
        self.assertGreater(repeats, 0, "the time left of 8 requests in a row never repeated: %s"
                           % [field_named(r, "x-request-timeout-ms").value for r in requests])

    def assert_never_indexed_by_dynamic_name(self, f, i):
        self.assertEqual(f.form, NEVER_INDEXED, "%s of request %d" % (f.name, i))
        self.assertGreater(f.name_index, STATIC_TABLE_ENTRIES, "%s of request %d" % (f.name, i))
        self.assertTrue(f.decoder_saw_never_indexed)


if __name__ == "__main__":
    unittest.main()
