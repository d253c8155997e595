#!/usr/bin/env python3
"""Bounded soak of onelayer over HTTP/2: for a fixed time, HTTP/2 clients
(python3-h2, several streams at once on each connection, some of them
cancelled part way, some with their window kept shut for a while, now and
then a connection closed with streams open or not read for a moment) and
HTTP/1.1 keep-alive clients send mixed requests
through one listener to an h2c upstream whose origin (tests/integration/
h2_origin.py) injects a fault chosen per attempt: 503 with and without
Retry-After, 500, RST_STREAM REFUSED_STREAM, RST_STREAM before and after the
response head, no answer (the per-try timeout), slow bodies, bodies
larger than a stream window (192 KiB), trailers,
bodies longer than their content-length or on a HEAD answer (which onelayer
refuses with RST_STREAM PROTOCOL_ERROR), and
now and then a GOAWAY or a dropped connection, which ends every other
stream on that connection too. A second endpoint refuses connections.

It fails (exit 1) when the proxy crashes; a stream or request gets no
answer, or a bare RST_STREAM before any head; an outcome is not explained by
what happened to the request's attempts at the origin; a response carries
another request's id (in its x-echo-id field, body or trailers); a key-less
POST/PATCH is processed twice (a refused stream does not count: it was not
processed); a request body (some 48 or 96 KiB long) reaches the origin
other than it was sent; a request reaches the origin more than max_attempts times plus
the one re-send of a refused stream; a client stops on an exception or a
request never ends at its client; the slow readers never filled a stream
window; the proxy's client connections are not all gone a few seconds
after the clients close them; RSS or descriptors grow (as soak.py).

Usage: soak_h2.py [--seconds N] [--short] [--seed N]
  --short        20-second mode for CI (same as --seconds 20)
Environment: SOAK_SECONDS (default 120), SOAK_SEED (default 4242),
ONELAYER_BIN, ONELAYER_SANITIZED=1 (memory growth not judged).
"""

import gc
import os
import random
import re
import select
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import harness as h  # noqa: E402
from h2_origin import CANCEL, H2Origin  # noqa: E402  (it finds Debian's python3-h2)
import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.events  # noqa: E402
import h2.exceptions  # noqa: E402
from soak_checks import (MAX_ATTEMPTS, FaultPlan, check_every_request_ended, drive, http1_client,  # noqa: E402
                         options, report, stop_proxy)

FAULTS = [("ok", 52), ("ok-trailers", 6), ("503", 8), ("503-retry-after", 3), ("500", 3),
          ("refuse", 5), ("reset-before-head", 5), ("reset-after-head", 3), ("timeout", 2),
          ("slow-body", 5), ("big", 3), ("malformed", 2), ("goaway", 0.4), ("drop", 0.4)]
METHODS = ["GET", "GET", "GET", "HEAD", "PUT", "DELETE", "POST", "POST", "PATCH"]
H2_CONNECTIONS = 6
H2_STREAMS = 8          # at once on each client connection
HTTP1_CLIENTS = 4
CANCEL_SHARE = 0.03     # HTTP/2 requests the client resets part way
BIG_BODY = 192 * 1024   # the "big" answer: three stream windows
HOLD_SHARE = 0.15       # HTTP/2 streams whose window the client keeps shut for a while
HOLD_S = (0.05, 0.3)    # how long (uniform), from the stream's first DATA
READ_PAUSE_EVERY_S = (1.0, 3.0)  # each HTTP/2 client connection stops reading now and then
READ_PAUSE_S = (0.05, 0.25)      # for this long
STREAM_WINDOW = 65535   # the client's (python3-h2's default)
UPLOAD_SHARE = 0.08     # POST/PUT/PATCH requests with a large body, one of UPLOAD_SIZES
UPLOAD_SIZES = (48 * 1024, 96 * 1024)  # under and over the route's buffer_limit (64 KiB): replayed or streamed
ABANDON_SHARE = 0.01    # HTTP/2 requests whose client then closes its connection at once
STREAM_LIMIT_S = 10.0   # a stream unanswered this long is a hang
PER_TRY_TIMEOUT = "500ms"
LATE_S = 0.4            # an answer this long after the client sent its request may come too late

# What happened to one attempt at the origin (its fate), beyond the faults:
# "refused": above the last-stream-id of a GOAWAY (not processed);
# "lost": on a connection that ended before it was answered (processed or
# not, nobody knows); "lost-after-head": the same once its head was sent;
# "incomplete": its request never ended (the client cancelled it).
NOT_PROCESSED = {"refuse", "refused"}
# A response cut after its head: the client saw the head and then a reset
# (HTTP/2) or a close (HTTP/1.1), also when the upstream's reset came in the
# same read as its head (onelayer holds its RST_STREAM until that head is
# written: nghttp2 drops a HEADERS frame not yet written when its stream is
# reset).
CUT = {"cut"}
FINAL = {"ok": {200}, "ok-trailers": {200}, "slow-body": {200}, "big": {200}, "500": {500},
         "reset-after-head": CUT, "lost-after-head": CUT, "malformed": CUT}


def fate(req, sent_at):
    """What happened to attempt `req` of a request its client sent at
    `sent_at` (time.monotonic())."""
    fault = getattr(req, "fault", None)
    if fault == "drop":
        return "lost"
    if req.finished:
        # Answered so long after the client sent the request that the
        # attempt's per-try timeout may have ended it before: "late-".
        return "late-" + fault if req.finished_at - sent_at > LATE_S else fault
    last = req.goaway_last_stream_id
    if last is not None and req.stream_id > last:
        return "refused"
    if req.connection_ending:
        return "lost-after-head" if req.processed else "lost"
    return fault or "incomplete"


def expected_outcomes(method, fates):
    """The outcomes a correct proxy may give after these attempts."""
    if not fates:
        return {502, 504}  # never reached the origin (refused endpoint, deadline)
    last = fates[-1]
    late = last.startswith("late-")
    final = FINAL.get(last[5:] if late else last)
    if final is CUT and method == "HEAD":
        final = {200}  # a HEAD answer is whole with its head: a reset after it takes nothing
    # A retryable failure as the last attempt (or an answer that may have
    # come after its per-try timeout): retries stopped (attempts, budget,
    # deadline, method not safe to repeat) and the failure went back.
    if late or final is None:
        return (final or set()) | {502, 503, 504}
    return final


def answer(req, fault, rid):
    """Runs on the origin connection's thread."""
    head = [("x-echo-id", rid)]
    no_body = req.method == "HEAD"

    def body(b):
        return b"" if no_body else b

    ok_body = body(b"ok " + rid.encode())
    if fault == "ok":
        req.respond(200, head + [("content-length", str(len(ok_body)))], ok_body)
    elif fault == "ok-trailers":
        req.respond(200, head, ok_body, trailers=[("x-echo-trailer", rid)])
    elif fault in ("503", "503-retry-after"):
        extra = [("retry-after", "0")] if fault == "503-retry-after" else []
        req.respond(503, head + extra, body(b"busy"))
    elif fault == "500":
        req.respond(500, head, body(b"broken"))
    elif fault == "refuse":
        req.refuse()
    elif fault == "reset-before-head":
        req.reset()
    elif fault == "reset-after-head":
        req.respond_then_reset(200, head, body(b"partial"))
    elif fault == "timeout":
        pass  # never answered: onelayer's per-try timeout cancels it
    elif fault == "slow-body":
        if no_body:
            req.respond(200, head)
        else:
            req.respond_slowly(200, head, [b"slow ", rid.encode(), b" end"], 0.01)
    elif fault == "big":
        # Larger than the client's stream window: onelayer must hold the
        # origin's stream to what its client drains (some clients keep
        # their windows shut or stop reading for a while).
        big = body(big_body(rid))
        req.respond(200, head + [("content-length", str(BIG_BODY))], big)
    elif fault == "malformed":
        # More body than content-length says, or a body on a HEAD answer.
        req.respond(200, head + [("content-length", "2")], b"longer than 2")
    elif fault == "goaway":
        # Refuses what the origin has not started to answer, this stream
        # included; the connection then closes, ending the others.
        started = [r.stream_id for r in req.connection_requests() if r.processed]
        req.goaway(max(started, default=0))
    elif fault == "drop":
        req.drop_connection()


def naming(word, rid, size):
    """`size` bytes that name `rid` all along, "<word> <rid> " over and over
    (a piece of another request's bytes in them would show)."""
    line = ("%s %s " % (word, rid)).encode()
    return (line * (size // len(line) + 1))[:size]


def big_body(rid):
    return naming("big", rid, BIG_BODY)


def request_body(rid, size):
    """A request's body: short, or `size` bytes that name `rid` all along."""
    return naming("up", rid, size) if size else b"payload " + rid.encode()


def body_whole(req, rid):
    """Whether the origin got a body the client sent for `rid`, whole and
    unmixed (none for a method without one). Its length says which of the
    sizes it must be."""
    if req.method not in ("POST", "PUT", "PATCH"):
        return req.body == b""
    return req.body == request_body(rid, len(req.body) if len(req.body) in UPLOAD_SIZES else 0)


def plan_give_up(rng, cancel_share, abandon_share):
    """Whether an HTTP/2 client gives up on a request, and after how long:
    ("cancel", s) resets its stream, ("abandon", s) closes its connection
    with its streams open; None for most."""
    x = rng.random()
    if x >= cancel_share + abandon_share:
        return None
    return ("cancel" if x < cancel_share else "abandon", rng.uniform(0, 0.05))


def slow_reading_counts():
    """What H2ClientConnection's slow readers did, shared by the connections."""
    return {"held": 0, "held_full": 0, "read_pauses": 0}


def judge_slow_reading(counts, seconds, failures):
    """Prints `counts` and fails a run of 20 s or more in which no held
    window filled or no read pause happened: those checks would have tested
    nothing."""
    print("soak: HTTP/2 clients kept %d stream windows shut for a while (%d of them full, the proxy "
          "holding the rest) and stopped reading %d times" % (
              counts["held"], counts["held_full"], counts["read_pauses"]))
    if seconds >= 20 and not (counts["held_full"] and counts["read_pauses"]):
        failures.append("the slow readers never made the proxy wait: %r" % counts)


def expected_body(fault, rid, method):
    if method == "HEAD":
        return b""
    if fault == "big":
        return big_body(rid)
    return {"ok": b"ok " + rid.encode(), "ok-trailers": b"ok " + rid.encode(),
            "slow-body": b"slow " + rid.encode() + b" end"}.get(fault)


class H2ClientConnection:
    """One HTTP/2 client connection with up to H2_STREAMS requests on it at
    once, new ones as others end, until `stop`; then it waits for its open
    streams and closes. A lost connection ends its open streams ("closed",
    or "goaway" above a GOAWAY's last-stream-id) and another is opened."""

    def __init__(self, port, stop, next_request, record, rng, counts):
        self.port, self.stop, self.next_request, self.record, self.rng = port, stop, next_request, record, rng
        self.counts = counts  # held, held_full, read_pauses: shared by the connections

    def connect(self):
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        self.sock.setblocking(False)
        self.conn = h2.connection.H2Connection(
            config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.out = bytearray()
        self.streams = {}  # sid -> dict

    def flush(self):
        self.out += self.conn.data_to_send()
        while self.out:
            try:
                n = self.sock.send(self.out)
            except BlockingIOError:
                select.select([], [self.sock], [], 1.0)
                continue
            del self.out[:n]

    def start(self):
        rid, method, headers, body, give_up = self.next_request(self.rng)
        sid = self.conn.get_next_available_stream_id()
        fields = [(":method", method), (":scheme", "http"), (":authority", "soak.test"),
                  (":path", "/soak/" + rid)] + [(n.lower(), v) for n, v in headers]
        if body:
            fields.append(("content-length", str(len(body))))
        self.conn.send_headers(sid, fields, end_stream=not body)
        now = time.monotonic()
        hold = self.rng.uniform(*HOLD_S) if self.rng.random() < HOLD_SHARE else None
        self.streams[sid] = {"rid": rid, "head": None, "body": bytearray(), "trailers": None, "started": now,
                             "give_up": None if give_up is None else (give_up[0], now + give_up[1]),
                             "hold": hold, "held_until": None, "unacked": 0,
                             "upload": memoryview(body) if body else None}
        self.send_uploads()

    def send_uploads(self):
        """Request bodies, as far as the proxy's windows let them go; the
        rest waits for its WINDOW_UPDATE."""
        for sid, s in self.streams.items():
            left = s["upload"]
            try:
                while left is not None and len(left):
                    n = min(len(left), self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
                    if n <= 0:
                        break
                    self.conn.send_data(sid, left[:n].tobytes(), end_stream=n == len(left))
                    left = left[n:]
            except h2.exceptions.StreamClosedError:
                left = None  # answered (or reset) before its body was all sent
            s["upload"] = left if left is not None and len(left) else None

    def release_held(self, now):
        """Reopens the windows of held streams whose time is up."""
        for sid, s in self.streams.items():
            if s["held_until"] is None or now < s["held_until"]:
                continue
            s["hold"] = s["held_until"] = None
            self.counts["held"] += 1
            if s["unacked"] >= STREAM_WINDOW:
                self.counts["held_full"] += 1  # the proxy had to stop this stream
            if s["unacked"]:
                try:
                    self.conn.increment_flow_control_window(s["unacked"], stream_id=sid)
                except h2.exceptions.StreamClosedError:
                    pass  # it ended meanwhile, in bytes not read yet
                s["unacked"] = 0

    def end(self, sid, outcome):
        s = self.streams.pop(sid)
        self.record(s["rid"], outcome, s)

    def run(self):
        self.connect()
        # Now and then the client stops reading its socket for a moment:
        # what the proxy has for it waits in the proxy, whose upstream
        # streams must then wait as well.
        paused_until = 0.0
        next_pause = time.monotonic() + self.rng.uniform(*READ_PAUSE_EVERY_S)
        while True:
            if not self.stop.is_set():
                while len(self.streams) < H2_STREAMS:
                    self.start()
            elif not self.streams:
                break
            now = time.monotonic()
            for sid, s in list(self.streams.items()):
                if sid not in self.streams:
                    continue  # abandoned with its connection just now
                if s["give_up"] is not None and now >= s["give_up"][1]:
                    if s["give_up"][0] == "cancel":
                        self.cancel(sid, "cancelled")
                    else:  # the client goes away: its connection closes with its streams open
                        self.lost("abandoned")
                elif now - s["started"] > STREAM_LIMIT_S:
                    self.cancel(sid, "hung")
            self.release_held(now)
            self.send_uploads()
            self.flush()
            if now >= next_pause:
                self.counts["read_pauses"] += 1
                paused_until = now + self.rng.uniform(*READ_PAUSE_S)
                next_pause = paused_until + self.rng.uniform(*READ_PAUSE_EVERY_S)
            if now < paused_until:
                time.sleep(0.01)
                continue
            r, _, _ = select.select([self.sock], [], [], 0.01)
            if not r:
                continue
            try:
                data = self.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                self.lost("closed")
                continue
            for ev in self.conn.receive_data(data):
                self.on_event(ev)
            self.flush()
        self.sock.close()

    def cancel(self, sid, outcome):
        try:
            self.conn.reset_stream(sid, error_code=CANCEL)
        except h2.exceptions.StreamClosedError:
            pass  # it ended meanwhile, in bytes not read yet
        self.end(sid, outcome)

    def lost(self, outcome):
        """The connection ends with what is open on it (`outcome`), and a
        new one starts: the client closed it ("abandoned"), or the proxy
        closed it or sent GOAWAY (it has no reason to in a soak)."""
        for sid in list(self.streams):
            self.end(sid, outcome)
        self.sock.close()
        self.connect()

    def on_event(self, ev):
        s = self.streams.get(getattr(ev, "stream_id", None))
        if isinstance(ev, h2.events.ConnectionTerminated):
            self.lost("goaway:%d" % ev.error_code)
            return
        if s is None:
            if isinstance(ev, h2.events.DataReceived) and ev.flow_controlled_length:
                # A stream this client ended (cancelled) still had DATA on
                # the way: the connection's window must get it back.
                self.conn.increment_flow_control_window(ev.flow_controlled_length)
            return
        if isinstance(ev, h2.events.ResponseReceived):
            s["head"] = dict(ev.headers)
        elif isinstance(ev, h2.events.DataReceived):
            s["body"] += ev.data
            n = ev.flow_controlled_length
            if s["hold"] is not None and s["held_until"] is None:
                s["held_until"] = time.monotonic() + s["hold"]
            if s["hold"] is not None:
                # The stream's window stays shut until held_until (the
                # connection's reopens): the proxy must stop this stream's
                # upstream side, not the others on the connection.
                if n:
                    self.conn.increment_flow_control_window(n)
                s["unacked"] += n
            else:
                self.conn.acknowledge_received_data(n, ev.stream_id)
        elif isinstance(ev, h2.events.TrailersReceived):
            s["trailers"] = dict(ev.headers)
        elif isinstance(ev, h2.events.StreamEnded):
            self.end(ev.stream_id, int(s["head"][":status"]))
        elif isinstance(ev, h2.events.StreamReset):
            self.end(ev.stream_id, "cut" if s["head"] else "reset:%d" % ev.error_code)


def main():
    args = options(__doc__, HERE)
    seconds = args.seconds
    print("soak: HTTP/2, %.0fs, %d h2c connections x %d streams and %d HTTP/1.1 clients to an h2c "
          "upstream, seed %d (SOAK_SEED=%d to replay), binary %s" % (
              seconds, H2_CONNECTIONS, H2_STREAMS, HTTP1_CLIENTS, args.seed, args.seed, args.binary), flush=True)

    # The origin keeps every request it saw, and each holds its connection's
    # python3-h2 state: the collector's full passes over that heap stopped
    # every thread here for longer than the per-try timeout (around the
    # 30,000th request), which the proxy then rightly reported as timeouts.
    # Nothing here needs the collector within a run.
    gc.disable()

    lock = threading.Lock()
    bad_bodies = []  # requests whose body reached the origin cut, mixed or padded
    seed = args.seed
    plan_faults = FaultPlan(FAULTS, seed)

    def handler(req):
        rid = req.field("x-request-id") or "?"
        fault = plan_faults.next(rid)
        if req.connection_ending:
            return  # it came behind a GOAWAY or a drop: nothing can answer it
        if not body_whole(req, rid):
            with lock:
                bad_bodies.append((rid, req.method, len(req.body), bytes(req.body[:40])))
        req.fault = fault
        try:
            answer(req, fault, rid)
        except (h2.exceptions.StreamClosedError, h2.exceptions.StreamIDTooLowError):
            # The proxy reset it (its per-try timeout, its client gone) in
            # frames this read brought before its end.
            pass

    origin = H2Origin(handler, max_concurrent_streams=100)
    refused_port, refused_sock = h.closed_port()
    config = h.simple_config(
        origin.port, endpoints=["127.0.0.1:%d" % origin.port, "127.0.0.1:%d" % refused_port], timeout="2s",
        retry={"max_attempts": MAX_ATTEMPTS, "per_try_timeout": PER_TRY_TIMEOUT,
               "backoff": {"base": "5ms", "cap": "50ms", "jitter": "full"}},
        upstream={"protocol": "h2c", "connect_timeout": "300ms",
                  "retry_budget": {"ratio": 0.5, "min_per_second": 200}},
        limits={"idle_timeout": "5s", "header_timeout": "2s"})
    proxy = h.Proxy(config, binary=args.binary)
    failures = []
    mismatches, dup_keyless, too_many = [], [], []
    try:
        proxy.start()
        port = proxy.port()
        counter = [0]
        plan = {}
        outcomes = {}
        responses = {}
        plan_lock = threading.Lock()

        def next_request(rng, http2=True):
            with plan_lock:
                i = counter[0]
                counter[0] += 1
            method = rng.choice(METHODS)
            keyed = method in ("POST", "PATCH") and rng.random() < 0.5
            give_up = plan_give_up(rng, CANCEL_SHARE, ABANDON_SHARE) if http2 else None
            rid = "s%07d" % i
            with plan_lock:
                plan[rid] = (method, keyed, time.monotonic())
            headers = [("X-Request-Id", rid)] + ([("Idempotency-Key", "k-" + rid)] if keyed else [])
            body = b""
            if method in ("POST", "PUT", "PATCH"):
                size = rng.choice(UPLOAD_SIZES) if rng.random() < UPLOAD_SHARE else 0
                body = request_body(rid, size)
            return rid, method, headers, body, give_up

        def record(rid, outcome, response):
            with lock:
                outcomes[rid] = outcome
                responses[rid] = response

        slow_reading = slow_reading_counts()

        def h2_client(n):
            return lambda stop: H2ClientConnection(port, stop, next_request, record,
                                                   random.Random(seed * 1000 + n), slow_reading).run()

        def h1_client(n):
            rng = random.Random(seed * 1000 + 500 + n)
            return lambda stop: http1_client(port, stop, lambda: next_request(rng, http2=False)[:4], record)

        clients = [h2_client(n) for n in range(H2_CONNECTIONS)] + [h1_client(n) for n in range(HTTP1_CLIENTS)]
        watch, t0, stopped_at = drive(proxy, clients, args, failures, STREAM_LIMIT_S + 20)
        elapsed = time.monotonic() - t0

        metrics = ""
        if proxy.running():
            health = proxy.admin_get("/healthz").status
            if health != 200:
                failures.append("/healthz answered %d at the end" % health)
            # Every client connection is closed now: the proxy's must go too.
            left = None
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                metrics = proxy.admin_get("/metrics").body.decode("utf-8", "replace")
                left = sum(float(v) for v in re.findall(
                    r'^onelayer_downstream_connections_active\{[^}]*\} ([0-9.e+]+)$', metrics, re.M))
                if left == 0:
                    break
                time.sleep(0.1)
            if left != 0:
                failures.append("%s client connections still open 5 s after the clients closed theirs" % left)

        arrivals = origin.snapshot()
        by_rid = {}
        for a in arrivals:
            by_rid.setdefault(a.field("x-request-id"), []).append(a)
        crossed, counts = [], {}
        for rid, outcome in outcomes.items():
            method, keyed, sent_at = plan[rid]
            arr = by_rid.get(rid, [])
            fates = [fate(a, sent_at) for a in arr]
            counts[outcome] = counts.get(outcome, 0) + 1
            if outcome in ("cancelled", "abandoned"):
                pass  # the client gave up; what it got is not judged
            elif outcome not in expected_outcomes(method, fates):
                mismatches.append((rid, method, keyed, fates, outcome, where(arr, sent_at),
                                   "sent at %.1f s of %.1f" % (sent_at - t0, stopped_at - t0)))
            elif outcome == 200 and (why := crosses(responses.get(rid), rid, fates[-1], method)):
                crossed.append((rid, fates, why))
            processed = [f for f in fates if f.replace("late-", "") not in NOT_PROCESSED]
            if method in ("POST", "PATCH") and not keyed and len(processed) > 1:
                dup_keyless.append((rid, fates, where(arr, sent_at)))
            refused_once = len(processed) < len(fates)
            if len(arr) > MAX_ATTEMPTS + (1 if refused_once else 0):
                too_many.append((rid, fates))
        injected = {}
        for a in arrivals:
            f = fate(a, plan[a.field("x-request-id")][2])
            injected[f] = injected.get(f, 0) + 1
        print("soak: %d requests in %.0fs (%.0f/s), %d origin arrivals on %d connections" % (
            len(outcomes), elapsed, len(outcomes) / max(elapsed, 1e-9), len(arrivals), origin.accepted))
        print("soak: attempts by what happened to them %s" % dict(sorted(injected.items())))
        print("soak: outcomes %s" % dict(sorted(counts.items(), key=lambda kv: str(kv[0]))))
        judge_slow_reading(slow_reading, seconds, failures)
        watch.judge(failures)
        unanswered = {k: v for k, v in counts.items()
                      if str(k).startswith(("error:", "closed", "goaway", "reset:", "hung")) and k not in CUT}
        if unanswered:
            failures.append("requests without an answer: %r" % unanswered)
        check_every_request_ended(plan, outcomes, failures)
        if mismatches:
            failures.append("%d outcomes not explained by what happened at the origin, e.g. %r" % (
                len(mismatches), mismatches[:12]))
        if crossed:
            failures.append("%d answers that are not their request's, e.g. %r" % (len(crossed), crossed[:5]))
        if dup_keyless:
            failures.append("key-less POST/PATCH processed twice: %r" % dup_keyless[:5])
        uploads = sum(1 for a in arrivals if len(a.body) > 1024)
        print("soak: %d attempts carried a request body of 48 or 96 KiB" % uploads)
        if bad_bodies:
            failures.append("%d request bodies reached the origin not as sent: %r" % (
                len(bad_bodies), bad_bodies[:5]))
        if seconds >= 20 and not uploads:
            failures.append("no large request body reached the origin")
        if too_many:
            failures.append("more than %d attempts (+1 re-send): %r" % (MAX_ATTEMPTS, too_many[:5]))
        # The proxy may close a connection while the origin writes to it (once
        # its streams are done on a connection that refused one, say).
        origin_errors = [e for e in origin.errors if not re.search(r"BrokenPipeError|ConnectionResetError", e)]
        if origin_errors:
            failures.append("the origin failed: %r" % origin_errors[:5])
        stop_proxy(proxy, failures)
    except Exception as e:  # report, never hang the CI step
        failures.append("soak aborted: %r" % e)
    finally:
        diagnostics = proxy.diagnostics() if failures else ""
        if failures:
            noted = [ln for ln in proxy.stderr().splitlines() if re.search(r"\b(warn|warning|error)\b", ln)]
            diagnostics += "\n--- onelayer's warnings and errors (%d, the first 20):\n%s" % (
                len(noted), "\n".join(noted[:20]))
        if failures and (mismatches or dup_keyless or too_many):
            # The access log lines of the requests in question, by path.
            wanted = {"path=/soak/%s " % m[0] for m in mismatches[:12] + dup_keyless[:5] + too_many[:5]}
            lines = [ln for ln in proxy.stdout().splitlines() if any(w in ln for w in wanted)]
            diagnostics += "\n--- access log of the unexplained requests:\n" + "\n".join(lines)
        proxy.cleanup()
        origin.stop()
        origin.shut_connections()
        refused_sock.close()
    return report(failures, diagnostics)


def where(arrivals, sent_at):
    """Where each attempt went at the origin and when it ended there."""
    out = []
    for a in arrivals:
        text = "conn %d stream %d" % (a.conn_id, a.stream_id)
        if a.goaway_last_stream_id is not None:
            text += " (its GOAWAY: last %d)" % a.goaway_last_stream_id
        if a.finished_at is not None:
            text += " answered at +%.0f ms" % ((a.finished_at - sent_at) * 1000)
        out.append(text)
    return out


def crosses(response, rid, last_fate, method):
    """Why a 200 is not the answer to `rid` (None when it is): another
    request's id in its x-echo-id field or trailers, or a body that is not
    the one the origin sent for it."""
    if isinstance(response, dict):  # HTTP/2: head, body, trailers
        echo = response["head"].get("x-echo-id")
        trailer = (response["trailers"] or {}).get("x-echo-trailer")
        body = bytes(response["body"])
    else:  # HTTP/1.1: harness Response
        echo = response.header("x-echo-id")
        trailer = None
        body = response.body
    if echo != rid:
        return "x-echo-id %r" % echo
    if trailer not in (None, rid):
        return "trailer %r" % trailer
    want = expected_body(last_fate, rid, method)
    if want is not None and body != want:
        return "body %r" % body[:60]
    return None


if __name__ == "__main__":
    sys.exit(main())
