"""A scripted HTTP/2 cleartext (prior knowledge) origin on 127.0.0.1:0 built
on Debian's python3-h2: one thread per connection, every request recorded
(connection, stream id, fields, body, trailers), and a handler that decides what each
complete request gets (a response with a body and trailers, REFUSED_STREAM,
a reset part way through the body, a GOAWAY, a delay). Response bodies go
out as the client's flow-control windows allow."""

import select
import socket
import sys
import threading
import time

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

REFUSED_STREAM = 0x7
CANCEL = 0x8
PROTOCOL_ERROR = 0x1
INTERNAL_ERROR = 0x2


class Request:
    """One request as the origin received it. ``fields``: (name, value)
    pairs in order, pseudo-header fields included."""

    def __init__(self, conn, conn_id, stream_id, fields):
        self._conn = conn
        self.conn_id = conn_id
        self.stream_id = stream_id
        self.fields = fields
        self.body = b""
        self.trailers = None  # the request's trailing HEADERS, (name, value) pairs
        self.processed = False  # the handler answered it (not refused)
        self.finished = False  # its last frame (END_STREAM or RST_STREAM) went out
        self.arrived_at = time.monotonic()  # its HEADERS were read
        self.finished_at = None

    def finish(self):
        self.finished = True
        self.finished_at = time.monotonic()

    def field(self, name, default=None):
        for n, v in self.fields:
            if n == name:
                return v
        return default

    def never_indexed(self, name):
        """Whether field `name` came as an HPACK literal never indexed
        (RFC 7541 6.2.3): hpack gives those as NeverIndexedHeaderTuple."""
        for f in self.fields:
            if f[0] == name:
                return type(f).__name__ == "NeverIndexedHeaderTuple"
        raise KeyError(name)

    @property
    def method(self):
        return self.field(":method")

    @property
    def path(self):
        return self.field(":path")

    # What the handler may do with it (on the connection's thread).
    def respond(self, status=200, headers=(), body=b"", trailers=None):
        self.processed = True
        self._conn.respond(self.stream_id, status, headers, body, trailers)

    def respond_then_reset(self, status, headers, partial, code=INTERNAL_ERROR):
        """A head and ``partial`` body bytes, then RST_STREAM ``code``."""
        self.processed = True
        self._conn.respond(self.stream_id, status, headers, partial, None, reset=code)

    def respond_slowly(self, status, headers, pieces, pause):
        """The head now, then each of ``pieces`` as a DATA frame ``pause``
        seconds after the one before, END_STREAM with the last. Nothing
        more goes once the connection is ending."""
        self.processed = True
        self._conn.h2.send_headers(self.stream_id, [(":status", str(status))] + list(headers))

        def piece(i=0):
            if self._conn.closing:
                return
            try:
                self._conn.h2.send_data(self.stream_id, pieces[i], end_stream=i == len(pieces) - 1)
            except Exception:  # the stream went away (reset by the client)
                return
            if i == len(pieces) - 1:
                self.finish()
            else:
                self.later(pause, lambda: piece(i + 1))
        self.later(pause, piece)

    def refuse(self):
        """RST_STREAM REFUSED_STREAM: not processed (RFC 9113 8.7)."""
        self.reset(REFUSED_STREAM)

    def reset(self, code=INTERNAL_ERROR):
        """RST_STREAM ``code`` before any response."""
        self._conn.reset(self.stream_id, code)
        self.finish()

    def connection_requests(self):
        """Every request its connection received so far, itself included."""
        return list(self._conn.requests.values())

    @property
    def connection_ending(self):
        """Whether its connection sent GOAWAY or is being dropped: nothing
        can be answered on it any more."""
        return self._conn.closing

    @property
    def goaway_last_stream_id(self):
        """The last-stream-id of the GOAWAY its connection sent, or None."""
        return self._conn.goaway_last

    def later(self, seconds, fn):
        self._conn.later(seconds, fn)

    def drop_connection(self):
        """The connection ends (FIN) without GOAWAY, streams still open."""
        self._conn.closing = True

    def goaway(self, last_stream_id, close=True):
        """GOAWAY NO_ERROR naming ``last_stream_id``, then (``close``) the
        socket is closed once the output is written."""
        self._conn.goaway(last_stream_id, close)


class _Connection:
    def __init__(self, origin, sock, conn_id):
        self.origin = origin
        self.sock = sock
        self.conn_id = conn_id
        cfg = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.h2 = h2.connection.H2Connection(config=cfg)
        self.h2.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: origin.max_concurrent_streams,
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 65535,
        })
        self.requests = {}
        self.pending = {}  # stream id -> [bytes left, trailers, reset code]
        self.timers = []   # (when, fn)
        self.closing = False
        self.goaway_last = None

    def respond(self, sid, status, headers, body, trailers, reset=None):
        fields = [(":status", str(status))] + list(headers)
        no_body = not body and trailers is None and reset is None
        self.h2.send_headers(sid, fields, end_stream=no_body)
        if no_body:
            self.requests[sid].finish()
        else:
            self.pending[sid] = [memoryview(bytes(body)), trailers, reset]
        self.pump()

    def reset(self, sid, code):
        self.h2.reset_stream(sid, error_code=code)

    def later(self, seconds, fn):
        self.timers.append((time.monotonic() + seconds, fn))

    def goaway(self, last_stream_id, close):
        self.h2.close_connection(error_code=0, last_stream_id=last_stream_id)
        self.goaway_last = last_stream_id
        self.closing = close

    def pump(self):
        for sid in list(self.pending):
            left, trailers, reset = self.pending[sid]
            try:
                while left:
                    window = min(self.h2.local_flow_control_window(sid), self.h2.max_outbound_frame_size)
                    if window <= 0:
                        break
                    self.h2.send_data(sid, bytes(left[:window]))
                    left = left[window:]
            except Exception:  # the stream went away (the client reset it)
                del self.pending[sid]
                continue
            self.pending[sid][0] = left
            with self.origin.lock:
                self.origin.unsent[(self.conn_id, sid)] = len(left)
            if left:
                continue
            del self.pending[sid]
            if reset is not None:
                self.h2.reset_stream(sid, error_code=reset)
            elif trailers is not None:
                self.h2.send_headers(sid, list(trailers), end_stream=True)
            else:
                self.h2.end_stream(sid)
            self.requests[sid].finish()

    def flush(self):
        out = self.h2.data_to_send()
        if out:
            self.sock.sendall(out)

    def run(self):
        delay = self.origin.settings_delay.get(self.conn_id, 0)
        if delay:  # the client's preface waits in the socket meanwhile
            time.sleep(delay)
        self.h2.initiate_connection()
        self.flush()
        while not self.origin.stopping:
            now = time.monotonic()
            due = [t for t in self.timers if t[0] <= now]
            self.timers = [t for t in self.timers if t[0] > now]
            for _, fn in due:
                fn()
            self.pump()
            self.flush()
            if self.closing:
                self.linger()
                return
            wait = min([t[0] for t in self.timers] + [now + 0.05]) - now
            r, _, _ = select.select([self.sock], [], [], max(0.0, wait))
            if not r:
                continue
            data = self.sock.recv(65536)
            if not data:
                return
            for ev in self.h2.receive_data(data):
                self.on_event(ev)
            self.flush()

    def linger(self):
        """Ends the connection the way servers do: FIN first, then what the
        client still sends is read (for up to a second) so the close never
        turns into an RST that could discard responses already sent."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                r, _, _ = select.select([self.sock], [], [], deadline - time.monotonic())
                if r and not self.sock.recv(65536):
                    return
        except OSError:
            pass

    def on_event(self, ev):
        if isinstance(ev, h2.events.RequestReceived):
            req = Request(self, self.conn_id, ev.stream_id, list(ev.headers))
            self.requests[ev.stream_id] = req
            with self.origin.lock:
                self.origin.requests.append(req)
            if ev.stream_ended or self.origin.answers_at_head:
                self.origin.handler(req)
        elif isinstance(ev, h2.events.DataReceived):
            req = self.requests.get(ev.stream_id)
            if req:
                req.body += ev.data
            if self.origin.reads_bodies:
                self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            if ev.stream_ended and req and not self.origin.answers_at_head:
                self.origin.handler(req)
        elif isinstance(ev, h2.events.TrailersReceived):
            req = self.requests.get(ev.stream_id)
            if req:
                req.trailers = list(ev.headers)
            if ev.stream_ended and req and not self.origin.answers_at_head:
                self.origin.handler(req)
        elif isinstance(ev, h2.events.StreamReset):
            self.pending.pop(ev.stream_id, None)
            with self.origin.lock:
                self.origin.resets.append((self.conn_id, ev.stream_id, ev.error_code))
        elif isinstance(ev, h2.events.ConnectionTerminated):
            with self.origin.lock:
                self.origin.goaways.append((self.conn_id, ev.error_code))
            self.closing = True


class LoopbackServer:
    """A TCP server on 127.0.0.1 (port 0, read back) that serves each
    connection it accepts on a thread of its own. A subclass sets its state,
    calls ``listen()`` and defines ``converse(sock, conn_id)``; an exception
    from that is recorded in ``errors`` (the tests assert on it) unless the
    server is stopping. ``requests`` is what ``snapshot()`` returns."""

    def listen(self, backlog=256):
        self.lock = threading.Lock()
        self.requests = []
        self.accepted = 0  # connections
        self.socks = []    # every accepted one
        self.stopping = False
        self.errors = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._accept_loop, daemon=True)
        self.thread.start()

    def _accept_loop(self):
        while not self.stopping:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.accepted += 1
                conn_id = self.accepted
                self.socks.append(s)
            threading.Thread(target=self._serve, args=(s, conn_id), daemon=True).start()

    def _serve(self, s, conn_id):
        try:
            self.converse(s, conn_id)
        except Exception as e:  # noqa: BLE001  (recorded, asserted by the tests)
            if not self.stopping:
                with self.lock:
                    self.errors.append("connection %d: %r" % (conn_id, e))
        finally:
            s.close()

    def snapshot(self):
        with self.lock:
            return list(self.requests)

    def stop(self):
        """Stops accepting; open connections stay (see shut_connections)."""
        self.stopping = True
        try:
            self.sock.close()
        except OSError:
            pass

    def shut_connections(self):
        with self.lock:
            socks = list(self.socks)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class H2Origin(LoopbackServer):
    """``handler(request)`` runs on the connection's thread once a request is
    complete; the default answers 200 with the request body echoed.
    ``settings_delay`` maps a connection number (from 1) to seconds its
    first SETTINGS frame waits. With ``reads_bodies=False`` it never gives
    back the windows of the request bodies it receives: a client can send
    it no more than one window's worth on a connection. With
    ``answers_at_head`` the handler runs as soon as a request's HEADERS
    arrive, its body still to come."""

    def __init__(self, handler=None, max_concurrent_streams=100, settings_delay=None, reads_bodies=True,
                 answers_at_head=False):
        self.handler = handler or (lambda r: r.respond(200, [("content-type", "text/plain")], r.body))
        self.reads_bodies = reads_bodies
        self.answers_at_head = answers_at_head
        self.max_concurrent_streams = max_concurrent_streams
        self.settings_delay = dict(settings_delay or {})
        self.resets = []   # (connection, stream id, error code) the client sent
        self.goaways = []  # (connection, error code) of each GOAWAY the client sent
        self.unsent = {}   # (connection, stream id) -> response bytes its window holds back
        self.listen()

    def converse(self, s, conn_id):
        _Connection(self, s, conn_id).run()

    def processed(self):
        return [r for r in self.snapshot() if r.processed]
