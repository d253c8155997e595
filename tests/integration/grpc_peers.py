"""Real gRPC peers for the integration tests: Debian's python3-grpcio.

* ``GrpcServer``: a grpc.server on 127.0.0.1:0 with generic handlers (bytes
  in, bytes out: no generated code). Each call takes the next ``Reply`` of
  the method's script (or the method's default) and the server records
  every arrival (``Call``): its metadata, the deadline it arrived with, when.
* ``GrpcClient``: an insecure channel with gRPC's own retries switched off
  (``grpc.enable_retries: 0``), so every retry seen is onelayer's.

* ``H2ScriptedServer``: a python3-h2 server scripted per stream with what a
  real gRPC server will not do on demand: ``refuse()`` (REFUSED_STREAM),
  ``go_away()`` (GOAWAY below the stream), ``answer(status, trailers)``.
* ``raw_grpc_call``: one call over h2c and the frames that came back.

Replies: ``ok(payload)``, ``fail(code, message, headers_first=False,
pushback=None, trailers=())`` (Trailers-Only, or with ``headers_first`` the
response headers go out first and the status follows in the trailers with
no message between), ``stream(messages, then_code)`` for server-streaming
methods (the messages, then the status), ``slow(seconds, then)``.

python3-grpcio is installed by ``deploy/install-deps.sh test``; it lives in
Debian's dist-packages, which a Python from elsewhere does not search.
"""

from __future__ import annotations

import sys
import threading
import time
from concurrent import futures

try:
    import grpc
except ImportError:  # a Python that does not search Debian's packages
    sys.path.append("/usr/lib/python3/dist-packages")
    import grpc  # noqa: E402  (missing: deploy/install-deps.sh test installs python3-grpcio)

UNARY = "/onelayer.test.Echo/Get"
STREAM = "/onelayer.test.Echo/List"


class Call:
    """One call as the server saw it."""

    def __init__(self, index, method, metadata, time_remaining, arrived):
        self.index = index
        self.method = method
        self.metadata = metadata            # [(key, value)] as received (lower-case keys)
        self.time_remaining = time_remaining  # seconds, None without a deadline
        self.arrived = arrived              # time.monotonic()

    def header(self, name, default=None):
        for k, v in self.metadata:
            if k == name:
                return v
        return default

    def __repr__(self):
        return "Call(%d %s remaining=%r)" % (self.index, self.method, self.time_remaining)


class Reply:
    def run(self, request, context):
        raise NotImplementedError


class _Ok(Reply):
    def __init__(self, payload):
        self.payload = payload

    def run(self, request, context):
        return self.payload


class _Fail(Reply):
    def __init__(self, code, message, headers_first, pushback, trailers):
        self.code, self.message = code, message
        self.headers_first = headers_first
        self.trailers = list(trailers)
        if pushback is not None:
            self.trailers.append(("grpc-retry-pushback-ms", str(pushback)))

    def run(self, request, context):
        if self.headers_first:
            context.send_initial_metadata(())
        if self.trailers:
            context.set_trailing_metadata(tuple(self.trailers))
        context.abort(self.code, self.message)


class _Stream(Reply):
    def __init__(self, messages, then_code):
        self.messages, self.then_code = list(messages), then_code

    def run(self, request, context):
        def gen():
            for m in self.messages:
                yield m
            if self.then_code != grpc.StatusCode.OK:
                context.abort(self.then_code, "stream failed")
        return gen()


class _Slow(Reply):
    def __init__(self, seconds, then):
        self.seconds, self.then = seconds, then

    def run(self, request, context):
        time.sleep(self.seconds)
        return self.then.run(request, context)


def ok(payload=b"ok"):
    return _Ok(payload)


def fail(code=None, message="unavailable", *, headers_first=False, pushback=None, trailers=()):
    return _Fail(code or grpc.StatusCode.UNAVAILABLE, message, headers_first, pushback, trailers)


def stream(messages, then_code=None):
    return _Stream(messages, then_code or grpc.StatusCode.OK)


def slow(seconds, then=None):
    return _Slow(seconds, then or ok())


class GrpcServer:
    """A real gRPC server on 127.0.0.1:0 serving UNARY and STREAM."""

    def __init__(self, default=None, stream_default=None):
        self._lock = threading.Lock()
        self._scripts = {UNARY: [], STREAM: []}
        self._defaults = {UNARY: default or ok(), STREAM: stream_default or stream([b"a", b"b"])}
        self.calls = []
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        handlers = {
            "Get": grpc.unary_unary_rpc_method_handler(self._unary),
            "List": grpc.unary_stream_rpc_method_handler(self._stream),
        }
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("onelayer.test.Echo", handlers),))
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        if self.port == 0:
            raise AssertionError("the gRPC server could not bind 127.0.0.1:0")
        self._server.start()

    @property
    def endpoint(self):
        return "127.0.0.1:%d" % self.port

    def push(self, *replies, method=UNARY):
        with self._lock:
            self._scripts[method].extend(replies)

    def count(self, method=None):
        with self._lock:
            return len([c for c in self.calls if method is None or c.method == method])

    def _record(self, method, context):
        with self._lock:
            call = Call(len(self.calls), method, [(k, v) for k, v in context.invocation_metadata()],
                        context.time_remaining(), time.monotonic())
            self.calls.append(call)
            script = self._scripts[method]
            return script.pop(0) if script else self._defaults[method]

    def _unary(self, request, context):
        return self._record(UNARY, context).run(request, context)

    def _stream(self, request, context):
        result = self._record(STREAM, context).run(request, context)
        yield from result

    def stop(self):
        self._server.stop(grace=None).wait(5)


class GrpcClient:
    """An insecure channel to `port` whose own retries are off."""

    def __init__(self, port):
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % port, options=[("grpc.enable_retries", 0)])
        self._unary = self.channel.unary_unary(UNARY)
        self._stream = self.channel.unary_stream(STREAM)

    def call(self, payload=b"req", *, timeout=5.0, metadata=()):
        """(status code, response or None, details, trailing metadata dict)."""
        try:
            resp, c = self._unary.with_call(payload, timeout=timeout, metadata=metadata)
            return grpc.StatusCode.OK, resp, "", dict(c.trailing_metadata() or ())
        except grpc.RpcError as e:
            return e.code(), None, e.details(), dict(e.trailing_metadata() or ())

    def call_with_initial(self, payload=b"req", *, timeout=5.0, metadata=()):
        """As call(), plus the initial metadata dict."""
        future = self._unary.future(payload, timeout=timeout, metadata=metadata)
        try:
            resp = future.result()
            code, details = grpc.StatusCode.OK, ""
        except grpc.RpcError:
            resp, code, details = None, future.code(), future.details()
        return code, resp, details, dict(future.initial_metadata() or ()), dict(future.trailing_metadata() or ())

    def list(self, payload=b"req", *, timeout=5.0, metadata=()):
        """(status code, [messages received])."""
        got = []
        it = self._stream(payload, timeout=timeout, metadata=metadata)
        try:
            for m in it:
                got.append(m)
            return grpc.StatusCode.OK, got
        except grpc.RpcError as e:
            return e.code(), got

    def close(self):
        self.channel.close()


# --------------------------------------------------------------------------
# A raw HTTP/2 view of one gRPC call (python3-h2): which frames carried what.

try:
    import h2.config
    import h2.connection
    import h2.events
except ImportError:
    sys.path.append("/usr/lib/python3/dist-packages")
    import h2.config  # noqa: E402  (missing: deploy/install-deps.sh test installs python3-h2)
    import h2.connection  # noqa: E402
    import h2.events  # noqa: E402


def grpc_frame(payload):
    """One length-prefixed gRPC message (not compressed)."""
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


def raw_grpc_call(port, method=UNARY, payload=b"req", headers=(), timeout=5.0):
    """Sends one gRPC call over h2c prior knowledge and returns what came
    back, in order: ("headers", {name: value}, end_stream), ("data", bytes),
    ("trailers", {name: value}), ("reset", error_code), ("goaway",
    last_stream_id)."""
    import socket
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    fields = [(":method", "POST"), (":scheme", "http"), (":path", method), (":authority", "grpc.test"),
              ("content-type", "application/grpc"), ("te", "trailers")] + list(headers)
    conn.send_headers(sid, fields)
    conn.send_data(sid, grpc_frame(payload), end_stream=True)
    sock.sendall(conn.data_to_send())
    out, done = [], False
    deadline = time.monotonic() + timeout
    try:
        while not done and time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                break
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    out.append(("headers", dict(ev.headers), ev.stream_ended is not None))
                elif isinstance(ev, h2.events.DataReceived):
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    if ev.data:
                        out.append(("data", ev.data))
                elif isinstance(ev, h2.events.TrailersReceived):
                    out.append(("trailers", dict(ev.headers)))
                elif isinstance(ev, h2.events.StreamReset):
                    out.append(("reset", ev.error_code))
                    done = True
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    out.append(("goaway", ev.last_stream_id))
                    done = True
                elif isinstance(ev, h2.events.StreamEnded):
                    done = True
            try:
                sock.sendall(conn.data_to_send())
            except (BrokenPipeError, ConnectionResetError):
                # The peer closed after its last frame (a GOAWAY, say): what
                # it sent is all there is; acknowledgements have no reader.
                break
    finally:
        sock.close()
    return out


# --------------------------------------------------------------------------
# A scripted HTTP/2 server (python3-h2) for what a real gRPC server will not
# do on demand: refuse a stream, go away with streams in flight, or put an
# x-retry-exhausted in its trailers.

class H2Arrival:
    def __init__(self, conn_id, stream_id, headers):
        self.conn_id, self.stream_id, self.headers = conn_id, stream_id, headers


def refuse():
    """RST_STREAM REFUSED_STREAM: the request was not processed."""
    return ("refuse",)


def go_away():
    """GOAWAY with a last-stream-id below this stream, then close."""
    return ("goaway",)


def answer(status="0", trailers=(), message=b"ok"):
    """A gRPC answer: headers, the message (if any), trailers with `status`."""
    return ("answer", status, list(trailers), message)


class H2ScriptedServer:
    def __init__(self, *script, default=None):
        import socket
        self._lock = threading.Lock()
        self._script = list(script)
        self._default = default or answer()
        self.arrivals = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self._stopped = False
        self._conns = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def count(self):
        with self._lock:
            return len(self.arrivals)

    def connections(self):
        with self._lock:
            return len({a.conn_id for a in self.arrivals})

    def stop(self):
        self._stopped = True
        try:
            self._sock.close()
        except OSError:
            pass

    def _accept(self):
        while not self._stopped:
            try:
                s, _ = self._sock.accept()
            except OSError:
                return
            self._conns += 1
            threading.Thread(target=self._serve, args=(s, self._conns), daemon=True).start()

    def _next(self, conn_id, stream_id, headers):
        with self._lock:
            self.arrivals.append(H2Arrival(conn_id, stream_id, headers))
            return self._script.pop(0) if self._script else self._default

    @staticmethod
    def _close_gracefully(s):
        """FIN after the GOAWAY, then read to the peer's close: closing with
        unread bytes would send an RST, which can discard the GOAWAY before
        the peer reads it."""
        import socket
        s.shutdown(socket.SHUT_WR)
        s.settimeout(2.0)
        try:
            while s.recv(65536):
                pass
        except OSError:
            pass

    def _serve(self, s, conn_id):
        import h2.errors
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        s.sendall(conn.data_to_send())
        pending = {}  # stream id -> action, run at the end of the request
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    return
                for ev in conn.receive_data(data):
                    if isinstance(ev, h2.events.RequestReceived):
                        pending[ev.stream_id] = self._next(conn_id, ev.stream_id, dict(ev.headers))
                    elif isinstance(ev, h2.events.DataReceived):
                        conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id in pending:
                        action = pending.pop(ev.stream_id)
                        if action[0] == "refuse":
                            conn.reset_stream(ev.stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
                        elif action[0] == "goaway":
                            conn.close_connection(last_stream_id=ev.stream_id - 2 if ev.stream_id > 2 else 0)
                            s.sendall(conn.data_to_send())
                            self._close_gracefully(s)
                            return
                        else:
                            _, status, trailers, message = action
                            sid = ev.stream_id
                            conn.send_headers(sid, [(":status", "200"), ("content-type", "application/grpc")])
                            if message:
                                conn.send_data(sid, grpc_frame(message))
                            conn.send_headers(sid, [("grpc-status", status)] + trailers, end_stream=True)
                s.sendall(conn.data_to_send())
        except OSError:
            return
        finally:
            s.close()
