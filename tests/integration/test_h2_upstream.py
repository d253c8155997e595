"""HTTP/2 to upstreams (``protocol: h2c``, cleartext with prior knowledge,
and ``protocol: h2`` over TLS) through the real onelayer: HTTP/1.1 clients
in front, NGINX (nginx-light, ``listen ... http2``, in clear and with TLS)
and scripted python3-h2 origins behind. Bodies both
ways, trailers, many requests multiplexed on one connection, REFUSED_STREAM
and GOAWAY retried without duplicating a processed request, a stalled
stream beside a flowing one, and a reset mid-body."""

import os
import re
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import harness as h
from harness import IntegrationTest
import h2_origin
from h2_origin import H2Origin
import ops_helpers as ops
from test_h2_downstream import H2Client
import tls_helpers as tls


def answer_when(gate, request):
    """200 "ok" once ``gate`` is set (checked on the origin's loop)."""
    if gate.is_set():
        request.respond(200, [], b"ok")
    else:
        request.later(0.02, lambda: answer_when(gate, request))


def refuse_on_the_first_connection(request):
    """REFUSED_STREAM on connection 1, "took <body>" on the others."""
    if request.conn_id == 1:
        request.refuse()
    else:
        request.respond(200, [], b"took " + request.body)


def get(port, target, host="svc.test"):
    with h.Conn(port) as c:
        return c.request("GET", target, host=host)


class H2UpstreamTest(IntegrationTest):

    def proxy_to(self, port, *, retry=None, upstream=None, **kw):
        up = {"protocol": "h2c"}
        up.update(upstream or {})
        return self.start_proxy(h.simple_config(port, upstream=up, retry=retry, workers=1, **kw))

    def h2origin(self, handler=None, **kw):
        o = H2Origin(handler, **kw)
        self.addCleanup(o.stop)
        self.addCleanup(lambda: self.assertEqual(o.errors, [], "the h2 origin failed"))
        return o

    def nginx(self, **kw):
        n = tls.Nginx(None, **kw)  # cleartext HTTP/2, prior knowledge
        self.addCleanup(n.stop)
        return n

    def h2load_answered_2xx(self, proxy, requests):
        """h2load's GETs through `proxy`, 16 connections x 32 streams: every
        one answered 2xx; returns /metrics once all are counted."""
        out = subprocess.run(["h2load", "-n", str(requests), "-c", "16", "-m", "32",
                              "http://127.0.0.1:%d/" % proxy.port()],
                             capture_output=True, text=True, errors="replace", timeout=180)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("status codes: %d 2xx" % requests, out.stdout)
        return ops.settled_metrics(self, proxy, "default", requests)

    # -- requests and responses ------------------------------------------
    def test_a_get_reaches_nginx_over_http2_and_the_answer_comes_back(self):
        n = self.nginx(locations='location /hello { return 200 "ok $request_uri\\n"; }')
        proxy = self.proxy_to(n.port)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/hello?x=1", headers=[("Host", "svc.test")])
            self.assertEqual((r.status, r.body), (200, b"ok /hello?x=1\n"))
            self.assertEqual(r.header("content-length"), "14")
        lines = h.wait_for_lines(n.access_lines, 1)  # NGINX logs after it answered
        self.assertEqual(len(lines), 1, lines)
        self.assertEqual((tls.field(lines[0], "http"), lines[0].split()[:2]), ("HTTP/2.0", ["GET", "/hello?x=1"]))

    def test_a_post_body_goes_up_and_the_echo_comes_back_whole(self):
        o = self.h2origin()
        proxy = self.proxy_to(o.port)
        body = bytes(range(256)) * 1024  # 256 KiB: several windows' worth each way
        with h.Conn(proxy.port()) as c:
            r = c.request("POST", "/echo", headers=[("Host", "svc.test"), ("X-Trace", "t1")], body=body)
            self.assertEqual(r.status, 200)
            self.assertEqual(r.body, body)
            # A chunked request body: no content-length upstream, the end is END_STREAM.
            r = c.request("POST", "/echo", headers=[("Host", "svc.test")], body=b"abc" * 5000, chunked=True)
            self.assertEqual((r.status, r.body), (200, b"abc" * 5000))
        reqs = o.snapshot()
        self.assertEqual(len(reqs), 2)
        first, second = reqs
        self.assertEqual((first.method, first.path, first.field(":authority"), first.field(":scheme")),
                         ("POST", "/echo", "svc.test", "http"))
        self.assertEqual(first.field("content-length"), str(len(body)))
        self.assertEqual(first.field("x-trace"), "t1")
        self.assertIsNone(first.field("host"))
        self.assertIsNone(second.field("content-length"))
        self.assertIsNone(second.field("transfer-encoding"))
        self.assertEqual(second.body, b"abc" * 5000)
        # Both requests rode one connection, as two streams.
        self.assertEqual((o.accepted, first.conn_id, second.conn_id), (1, 1, 1))
        self.assertEqual((first.stream_id, second.stream_id), (1, 3))

    def test_response_trailers_reach_a_chunked_http11_client_and_are_dropped_for_a_length(self):
        def handler(r):
            if r.path == "/sized":
                r.respond(200, [("content-length", "4")], b"data", trailers=[("x-checksum", "abc")])
            else:
                r.respond(200, [], b"data", trailers=[("x-checksum", "abc")])
        o = self.h2origin(handler)
        proxy = self.proxy_to(o.port)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/chunked", headers=[("Host", "svc.test"), ("TE", "trailers")])
            self.assertEqual((r.status, r.body), (200, b"data"))
            self.assertEqual(r.header("transfer-encoding"), "chunked")
            self.assertEqual([(k.lower(), v) for k, v in r.trailers], [("x-checksum", "abc")])
            r = c.request("GET", "/sized", headers=[("Host", "svc.test")])
            self.assertEqual((r.status, r.body, r.header("content-length")), (200, b"data", "4"))
            self.assertIsNone(r.header("x-checksum"))
        self.assertEqual(o.snapshot()[0].field("te"), "trailers")

    def test_an_http2_client_reaches_an_h2c_origin_with_a_body_and_gets_its_trailers(self):
        def handler(r):
            r.respond(200, [("content-type", "text/plain")], b"echo:" + r.body, trailers=[("x-checksum", "abc")])
        o = self.h2origin(handler)
        proxy = self.proxy_to(o.port)
        body = b"0123456789" * 9000  # 90,000 bytes: more than one stream window
        fd, path = tempfile.mkstemp(prefix="onelayer-h2-body-")
        self.addCleanup(os.unlink, path)
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        base = "http://127.0.0.1:%d" % proxy.port()
        r = subprocess.run(["nghttp", "-d", path, base + "/up"], capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout == b"echo:" + body, "the echo came back cut or changed (%d bytes)" % len(r.stdout))
        (req,) = o.snapshot()
        self.assertEqual((req.method, req.path, req.body == body), ("POST", "/up", True))
        self.assertEqual(req.field(":authority"), "127.0.0.1:%d" % proxy.port())
        # The origin's trailers reach the HTTP/2 client as a trailing HEADERS.
        r = subprocess.run(["nghttp", "-v", base + "/small"], capture_output=True, text=True, errors="replace",
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(":status: 200", r.stdout)
        self.assertIn(") x-checksum: abc", r.stdout)
        # 50 streams of one client connection become 50 streams of one
        # upstream connection.
        r = subprocess.run(["nghttp", "-n", "-m", "50", base + "/many"], capture_output=True, text=True,
                           errors="replace", timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(o.snapshot()), 52)
        self.assertEqual(o.accepted, 1)

    def test_fields_new_on_every_request_are_never_indexed_and_the_others_are(self):
        # baggage (its attempt id) and trace ids change on every request:
        # indexed, each would push the fields that repeat out of the HPACK
        # table. The first request of the connection is the exception: it
        # puts their names in the table (for the later ones to refer to), so
        # it sends them with indexing. The time left is never indexed only
        # when it is not the value the request before carried.
        o = self.h2origin(lambda r: r.respond(200, [], b"ok"))
        proxy = self.proxy_to(o.port, retry={"max_attempts": 2})
        with h.Conn(proxy.port()) as c:
            for i in range(3):
                r = c.request("GET", "/ids", headers=[("Host", "svc.test"), ("User-Agent", "probe/1"),
                                                      ("traceparent", "00-%032x-%016x-01" % (i + 1, i + 1))])
                self.assertEqual(r.status, 200)
        self.assertEqual(o.accepted, 1)
        previous_left = None
        for i, req in enumerate(o.snapshot()):
            for name in ("baggage", "traceparent"):
                self.assertEqual(req.never_indexed(name), i > 0, "%s of request %d" % (name, i))
            left = req.field("x-request-timeout-ms")
            self.assertEqual(req.never_indexed("x-request-timeout-ms"), i > 0 and left != previous_left,
                             "x-request-timeout-ms %s of request %d after %s" % (left, i, previous_left))
            previous_left = left
            for name in ("user-agent", "x-retry-owner", "via"):
                self.assertFalse(req.never_indexed(name), "%s came as never indexed" % name)

    def test_a_renamed_request_timeout_header_is_the_one_never_indexed(self):
        # headers.request_timeout_ms names the field the HTTP/2 connection
        # keeps out of the HPACK table when its value changes: the name of
        # the config the attempt runs under, not the default.
        o = self.h2origin(lambda r: r.respond(200, [], b"ok"))
        proxy = self.proxy_to(o.port, retry={"max_attempts": 2}, headers={"request_timeout_ms": "x-deadline-ms"})
        with h.Conn(proxy.port()) as c:
            for deadline in ("9000", "7000", "5000"):
                r = c.request("GET", "/left", headers=[("Host", "svc.test"), ("X-Deadline-Ms", deadline)])
                self.assertEqual(r.status, 200)
        self.assertEqual(o.accepted, 1)
        sent = o.snapshot()
        self.assertEqual(len(sent), 3)
        lefts = [req.field("x-deadline-ms") for req in sent]
        self.assertEqual(len(set(lefts)), 3, "the time left differs on every request: %s" % lefts)
        for i, req in enumerate(sent):
            self.assertIsNone(req.field("x-request-timeout-ms"))
            self.assertEqual(req.never_indexed("x-deadline-ms"), i > 0, "x-deadline-ms of request %d" % i)

    # -- multiplexing ----------------------------------------------------
    def test_a_hundred_concurrent_requests_share_one_connection_to_nginx(self):
        n = self.nginx()
        proxy = self.proxy_to(n.port)
        results = h.concurrent_gets(proxy.port(), 100, concurrency=100, target="/item")
        self.assertEqual([status for _, status, _ in results], [200] * 100)
        lines = h.wait_for_lines(n.access_lines, 100)
        self.assertEqual(len(lines), 100)
        conns = {tls.field(l, "conn") for l in lines}
        self.assertEqual(len(conns), 1, "nginx saw %d connections for 100 requests" % len(conns))

    def test_a_hundred_concurrent_slow_requests_are_in_flight_together_on_one_connection(self):
        # Answered only once all 100 are open at once: proves they are
        # streams of one connection, not requests one after another.
        handler, seen = self.all_in_flight_then_ok(100)
        o = self.h2origin(handler, max_concurrent_streams=100)
        proxy = self.proxy_to(o.port)
        results = h.concurrent_gets(proxy.port(), 100, concurrency=100, target="/slow")
        self.assertEqual([status for _, status, _ in results], [200] * 100)
        self.assertTrue(seen.is_set(), "the origin never had 100 streams open at once")
        self.assertEqual(len(o.snapshot()), 100)
        self.assertEqual(o.accepted, 1)
        self.assertEqual(len({r.stream_id for r in o.snapshot()}), 100)

    def all_in_flight_then_ok(self, count):
        """A handler that answers once `count` requests are open at once."""
        seen = threading.Event()
        in_flight = []
        lock = threading.Lock()

        def handler(r):
            with lock:
                in_flight.append(r)
                if len(in_flight) == count:
                    seen.set()
            answer_when(seen, r)
        return handler, seen

    def test_more_than_a_hundred_streams_share_one_connection_when_the_peer_allows_them(self):
        # The peer allows 300; the pool's own cap (pool.max_concurrent_streams,
        # default 1000) is above it. 200 requests on a connection that knows
        # the peer's SETTINGS all go on it (a cap of 100 opened a second).
        handler, seen = self.all_in_flight_then_ok(201)
        o = self.h2origin(handler, max_concurrent_streams=300)
        proxy = self.proxy_to(o.port)
        first = threading.Thread(target=lambda: get(proxy.port(), "/first"))
        first.start()  # opens the connection; answered with the 200 others
        self.assertTrue(h.wait_until(lambda: len(o.snapshot()) == 1, 5))
        results = h.concurrent_gets(proxy.port(), 200, concurrency=200, target="/slow")
        first.join(10)
        self.assertEqual([status for _, status, _ in results], [200] * 200)
        self.assertTrue(seen.is_set(), "the origin never had 201 streams open at once")
        self.assertEqual(o.accepted, 1)

    def test_pool_max_concurrent_streams_caps_the_streams_per_connection_below_the_peers(self):
        handler, seen = self.all_in_flight_then_ok(6)
        o = self.h2origin(handler, max_concurrent_streams=100)
        proxy = self.proxy_to(o.port, upstream={"pool": {"max_concurrent_streams": 2}})
        results = h.concurrent_gets(proxy.port(), 6, concurrency=6, target="/slow")
        self.assertEqual([status for _, status, _ in results], [200] * 6)
        per_conn = {}
        for r in o.snapshot():
            per_conn[r.conn_id] = per_conn.get(r.conn_id, 0) + 1
        self.assertEqual(sorted(per_conn.values()), [2, 2, 2], per_conn)
        self.assertEqual(o.accepted, 3)

    def test_the_peers_stream_limit_opens_more_connections(self):
        gate = threading.Event()

        o = self.h2origin(lambda r: answer_when(gate, r), max_concurrent_streams=2)
        proxy = self.proxy_to(o.port)
        done = []
        threads = [threading.Thread(target=lambda: done.append(get(proxy.port(), "/x"))) for _ in range(6)]
        for t in threads:
            t.start()
        self.assertTrue(h.wait_until(lambda: len(o.snapshot()) == 6, 5), "got %d" % len(o.snapshot()))
        gate.set()
        for t in threads:
            t.join(10)
        self.assertEqual([r.status for r in done], [200] * 6)
        # Streams open only once the peer's SETTINGS are known: 2 per
        # connection, never more (python3-h2 would fail the connection).
        per_conn = {}
        for r in o.snapshot():
            per_conn[r.conn_id] = per_conn.get(r.conn_id, 0) + 1
        self.assertEqual(sorted(per_conn.values()), [2, 2, 2], per_conn)
        self.assertEqual(o.accepted, 3)

    def test_a_stream_moved_to_a_connection_that_freed_a_slot_meanwhile_is_sent(self):
        # Connection 1 is full (limit 2) with two held requests; three more
        # wait on connection 2, whose SETTINGS come late. Meanwhile the two
        # are answered. When connection 2's SETTINGS say 2, the third of its
        # streams moves to connection 1, connected with free slots: it must
        # go out there at once, not wait for a SETTINGS frame that came long
        # ago (it hung until the route's deadline).
        gate = threading.Event()
        o = self.h2origin(lambda r: answer_when(gate, r), max_concurrent_streams=2,
                          settings_delay={2: 1.5})
        proxy = self.proxy_to(o.port, timeout="20s", upstream={"connect_timeout": "5s"})
        done = []

        def start(n):
            threads = [threading.Thread(target=lambda: done.append(get(proxy.port(), "/x"))) for _ in range(n)]
            for t in threads:
                t.start()
            return threads

        threads = start(2)
        self.assertTrue(h.wait_until(lambda: len(o.snapshot()) == 2, 5))
        threads += start(3)
        self.assertTrue(h.wait_until(lambda: o.accepted == 2, 5), "no second connection")
        time.sleep(0.3)  # the three are on connection 2, still waiting for its SETTINGS
        gate.set()
        self.assertTrue(h.wait_until(lambda: len(done) == 2, 5), "connection 1's two were not answered")
        began = time.monotonic()
        for t in threads:
            t.join(8)
        self.assertEqual(sorted(r.status for r in done), [200] * 5, "a moved stream was never sent")
        self.assertLess(time.monotonic() - began, 5)
        per_conn = {}
        for r in o.snapshot():
            per_conn[r.conn_id] = per_conn.get(r.conn_id, 0) + 1
        self.assertEqual(per_conn, {1: 3, 2: 2})
        self.assertEqual(o.accepted, 2)

    # -- refused and GOAWAY: sent again, never duplicated --------------------
    def test_a_refused_stream_is_retried_on_another_connection_even_for_a_post(self):
        o = self.h2origin(refuse_on_the_first_connection)
        proxy = self.proxy_to(o.port, retry={"max_attempts": 3})
        with h.Conn(proxy.port()) as c:
            r = c.request("POST", "/orders", headers=[("Host", "svc.test")], body=b"one order")
        self.assertEqual((r.status, r.body), (200, b"took one order"))
        reqs = o.snapshot()
        self.assertEqual([(q.conn_id, q.processed) for q in reqs], [(1, False), (2, True)])
        self.assertEqual(o.accepted, 2)
        # A re-send: the same attempt again, the refused one never reached the app.
        self.assertEqual([q.field("x-retry-attempt") for q in reqs], ["1", "1"])

    def test_a_refused_stream_is_sent_again_at_once_without_backoff_or_a_retry(self):
        # The backoff (2 s) would show if the re-send waited; the route
        # allows one attempt, and the re-send is still made (the origin
        # never processed the refused stream).
        o = self.h2origin(refuse_on_the_first_connection)
        proxy = self.proxy_to(o.port, retry={"max_attempts": 1, "backoff": {"base": "2s", "cap": "2s"}})
        t0 = time.monotonic()
        with h.Conn(proxy.port()) as c:
            r = c.request("POST", "/orders", headers=[("Host", "svc.test")], body=b"one order")
        elapsed = time.monotonic() - t0
        self.assertEqual((r.status, r.body), (200, b"took one order"))
        self.assertLess(elapsed, 1.5)
        self.assertEqual([(q.conn_id, q.processed) for q in o.snapshot()], [(1, False), (2, True)])
        text = ops.settled_metrics(self, proxy, "default", 1)
        self.assertEqual(ops.value(text, "onelayer_refused_resends_total", route="default"), 1)
        self.assertEqual(ops.value(text, "onelayer_retries_total", route="default", reason="refused-stream"), None)
        self.assertEqual(ops.value(text, "onelayer_attempt_failures_total", route="default", attempt="first",
                                   outcome="refused-stream"), None)
        self.assertTrue(h.wait_until(lambda: "retry_reasons=resend " in proxy.stdout(), 5), proxy.stdout())

    def test_a_re_send_carries_the_attempt_number_of_the_stream_it_sends_again(self):
        # The refused stream never reached the application, so the re-send
        # is that attempt, not another: x-retry-attempt and the baggage
        # member stay at 1, and a later retry is attempt 2, not 3.
        answered = []

        def handler(request):
            if request.conn_id == 1:
                request.refuse()
            else:
                answered.append(request)
                request.respond(503 if len(answered) == 1 else 200, [], b"busy" if len(answered) == 1 else b"ok")
        o = self.h2origin(handler)
        proxy = self.proxy_to(o.port, retry={"max_attempts": 3, "retry_on": [503],
                                             "backoff": {"base": "10ms", "cap": "10ms"}})
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/orders", headers=[("Host", "svc.test")])
        self.assertEqual((r.status, r.body), (200, b"ok"))
        seen = o.snapshot()
        self.assertEqual([(q.conn_id > 1, q.field("x-retry-attempt")) for q in seen], [(False, "1"), (True, "1"), (True, "2")])
        members = [dict(m.split("=", 1) for m in q.field("baggage").split(","))["retry-attempt"] for q in seen]
        request_id = members[0].rsplit(".", 1)[0]
        self.assertEqual(members, [request_id + ".1", request_id + ".1", request_id + ".2"])
        self.assertTrue(h.wait_until(lambda: "retry_reasons=resend,503 " in proxy.stdout(), 5), proxy.stdout())

    def test_nginx_closing_connections_after_n_requests_fails_no_request_and_opens_no_breaker(self):
        # NGINX ends an HTTP/2 connection after keepalive_requests streams
        # with a GOAWAY that refuses the streams above it. Those are re-sent,
        # not failures: a breaker that opened on them (5 in a row) would
        # answer 503 for open_for.
        #
        # Three attempts: refusals cost none, and a request that fails for
        # another reason (a connection lost with it in flight) goes again.
        # With two, one request of the 2,000 was answered 5xx in one CI run
        # on a loaded machine (not reproduced in 60 runs since); failed
        # requests are listed if it happens again.
        n = self.nginx(locations="keepalive_requests 100;")
        proxy = self.proxy_to(n.port, retry={"max_attempts": 3},
                              upstream={"circuit_breaker": {"consecutive_failures": 5, "open_for": "30s"}},
                              listener={"protocols": ["http1", "h2c"]})
        # 32 streams in flight over one upstream connection at a time: each
        # GOAWAY refuses up to 31 of them.
        out = subprocess.run(["h2load", "-n", "2000", "-c", "4", "-m", "8", "http://127.0.0.1:%d/" % proxy.port()],
                             capture_output=True, text=True, errors="replace", timeout=60)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        failed = [line for line in proxy.access_log() if re.search(r" status=[^2]", line)]
        self.assertIn("2000 succeeded, 0 failed", out.stdout, "\n".join(failed[:20]))
        self.assertIn("status codes: 2000 2xx", out.stdout)
        text = ops.settled_metrics(self, proxy, "default", 2000)
        self.assertGreater(ops.value(text, "onelayer_refused_resends_total", route="default"), 0)
        self.assertEqual(ops.value(text, "onelayer_circuit_breaker_state", upstream="origin"), 0)
        self.assertGreater(ops.value(text, "onelayer_upstream_connections_total", protocol="h2"), 2000 // 100 - 1)

    def test_a_refused_request_goes_again_on_a_connection_opened_since_the_refusal(self):
        # 512 streams in flight need four connections of NGINX's 128; opened
        # together, they reach keepalive_requests together. A request that
        # one of them refused and that went again on a sibling was refused
        # again (a retry with backoff, or a 502 once max_attempts ran out);
        # it now goes on a connection opened since the refusal, which has
        # served too few requests to close, and which takes no more re-sends
        # than NGINX's stream limit when several connections refuse at once.
        n = self.nginx(locations="keepalive_requests 300;")
        proxy = self.proxy_to(n.port, retry={"max_attempts": 2}, listener={"protocols": ["http1", "h2c"]})
        requests = 100000
        text = self.h2load_answered_2xx(proxy, requests)
        resends = ops.value(text, "onelayer_refused_resends_total", route="default")
        self.assertGreater(resends, requests // 300, "NGINX refused too few streams for the test to mean anything")
        self.assertEqual(ops.value(text, "onelayer_retries_total", route="default", reason="refused-stream"), None,
                         "a re-sent request was refused again (of %d re-sends)" % resends)
        # One new connection replaces each refusing one: the pool does not
        # keep extra ones opened for re-sends until their idle timeout.
        self.assertLessEqual(ops.value(text, "onelayer_upstream_connections_active", protocol="h2"), 8)

    def test_max_requests_per_connection_at_nginx_keepalive_requests_avoids_every_refusal(self):
        # onelayer stops opening streams on a connection after 300, NGINX's
        # own limit: NGINX never gets a stream above its GOAWAY, so nothing
        # is refused and nothing is sent twice.
        n = self.nginx(locations="keepalive_requests 300;")
        proxy = self.proxy_to(n.port, retry={"max_attempts": 2}, listener={"protocols": ["http1", "h2c"]},
                              upstream={"pool": {"max_requests_per_connection": 300}})
        requests = 30000
        text = self.h2load_answered_2xx(proxy, requests)
        self.assertEqual(ops.value(text, "onelayer_refused_resends_total", route="default") or 0, 0)
        self.assertGreaterEqual(ops.value(text, "onelayer_upstream_connections_total", protocol="h2"), requests // 300)
        self.assertLessEqual(ops.value(text, "onelayer_upstream_connections_active", protocol="h2"), 8)

    def test_origin_reloads_under_load_fail_no_request(self):
        # An NGINX reload: the old worker sends each of its connections a
        # GOAWAY and finishes the streams below it; the streams above it
        # were not processed and go again on a connection to the new worker.
        n = tls.Nginx(None, master=True)
        self.addCleanup(n.stop)
        proxy = self.proxy_to(n.port, retry={"max_attempts": 2}, listener={"protocols": ["http1", "h2c"]})
        requests = 100000
        load = subprocess.Popen(["h2load", "-n", str(requests), "-c", "16", "-m", "32", "http://127.0.0.1:%d/" % proxy.port()],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        self.addCleanup(lambda: load.poll() is None and load.kill())
        self.assertTrue(h.wait_until(lambda: ops.route_requests(ops.metrics(self, proxy), "default") >= 1000, 30))
        for _ in range(3):
            n.reload()
            time.sleep(0.15)
        out, _ = load.communicate(timeout=180)
        self.assertEqual(load.returncode, 0, out)
        self.assertGreaterEqual(n.reloads_seen(), 3, n.error_log())
        self.assertIn("status codes: %d 2xx" % requests, out)
        text = ops.settled_metrics(self, proxy, "default", requests)
        # Each reload closed the connections open then: new ones replaced them.
        self.assertGreater(ops.value(text, "onelayer_upstream_connections_total", protocol="h2"), 4)

    def test_goaway_below_an_inflight_stream_retries_it_and_never_repeats_the_processed_one(self):
        lock = threading.Lock()
        first_conn = []

        def handler(r):
            if r.conn_id != 1:
                r.respond(200, [], b"second conn " + r.body)
                return
            with lock:
                first_conn.append(r)
                if len(first_conn) < 2:
                    return  # waits for the other request
            a, b = sorted(first_conn, key=lambda q: q.stream_id)
            a.respond(200, [], b"first conn " + a.body)
            a.goaway(a.stream_id)  # b is above last-stream-id: not processed
        o = self.h2origin(handler)
        proxy = self.proxy_to(o.port, retry={"max_attempts": 3})
        out = {}

        def post(name):
            with h.Conn(proxy.port()) as c:
                out[name] = c.request("POST", "/" + name, host="svc.test", body=name.encode())
        ta = threading.Thread(target=post, args=("a",))
        ta.start()
        self.assertTrue(h.wait_until(lambda: len(o.snapshot()) == 1, 5))
        tb = threading.Thread(target=post, args=("b",))
        tb.start()
        ta.join(10)
        tb.join(10)
        bodies = sorted(resp.body for resp in out.values())
        self.assertEqual([resp.status for resp in out.values()], [200, 200])
        self.assertEqual(bodies, [b"first conn a", b"second conn b"])
        processed = [(q.path, q.conn_id) for q in o.processed()]
        self.assertEqual(sorted(processed), [("/a", 1), ("/b", 2)], "a request was processed twice or lost")

    # -- flow control and cuts ------------------------------------------------
    def test_a_stalled_stream_does_not_hold_up_another_on_the_same_connection(self):
        big = b"z" * (8 * 1024 * 1024)

        def handler(r):
            r.respond(200, [("content-length", str(len(big)))] if r.path == "/big" else [],
                      big if r.path == "/big" else b"small")
        o = self.h2origin(handler)
        proxy = self.proxy_to(o.port)
        # A client that never reads, with a small receive buffer (set before
        # connecting, so the TCP window stays small): the big response stops
        # at its stream's flow-control window upstream.
        slow = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(("127.0.0.1", proxy.port()))
        self.addCleanup(slow.close)
        slow.sendall(h.build_request("GET", "/big", host="svc.test"))

        def held_back():
            with o.lock:
                left = o.unsent.get((1, 1))
            return left is not None and left > 0
        self.assertTrue(h.wait_until(held_back, 5), "the big response was never held back")
        time.sleep(0.3)
        with o.lock:
            stalled_at = o.unsent[(1, 1)]
        self.assertGreater(stalled_at, len(big) // 2, "the stalled stream kept flowing")
        t0 = time.monotonic()
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/small", host="svc.test")
        self.assertEqual((r.status, r.body), (200, b"small"))
        self.assertLess(time.monotonic() - t0, 2.0)
        self.assertEqual(o.accepted, 1, "the small request should share the connection")
        self.assertEqual([q.stream_id for q in o.snapshot()], [1, 3])
        with o.lock:
            self.assertEqual(o.unsent[(1, 1)], stalled_at, "the big stream moved while its client slept")
        # The slow client goes away: its upstream stream is cancelled, the
        # connection stays.
        slow.close()
        self.assertTrue(h.wait_until(lambda: (1, 1, h2_origin.CANCEL) in o.resets, 5), o.resets)
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/small", host="svc.test").status, 200)
        self.assertEqual(o.accepted, 1)

    def test_an_origin_reset_mid_body_cuts_the_client_response(self):
        def handler(r):
            r.respond_then_reset(200, [("content-length", "100000")], b"p" * 1000)
        o = self.h2origin(handler)
        proxy = self.proxy_to(o.port)
        raw, closed = h.raw_exchange(proxy.port(), h.build_request("GET", "/cut", host="svc.test"), timeout=5.0)
        self.assertTrue(closed, "the client connection must end: the body cannot be completed")
        self.assertTrue(raw.startswith(b"HTTP/1.1 200"), raw[:100])
        body = raw[raw.index(b"\r\n\r\n") + 4:]
        self.assertEqual(body, b"p" * 1000, "the client must see the cut: fewer bytes than announced")

    def test_an_origin_reset_right_after_the_head_gives_an_http11_client_the_head_then_the_close(self):
        # HEADERS and RST_STREAM come in one read, no body between: the head
        # was still held for the first body bytes when the reset came. The
        # client must see it and then the truncation, not a connection
        # closed on no answer, which it could take as never served.
        o = self.h2origin(lambda r: r.respond_then_reset(200, [("content-length", "100")], b""))
        proxy = self.proxy_to(o.port)
        for i in range(5):
            raw, closed = h.raw_exchange(proxy.port(), h.build_request("GET", "/cut%d" % i, host="svc.test"),
                                         timeout=5.0)
            self.assertTrue(closed, "the client connection must end: the body cannot be completed")
            self.assertTrue(raw.startswith(b"HTTP/1.1 200"), raw[:100])
            self.assertTrue(raw.endswith(b"\r\n\r\n"), "nothing after the head: %r" % raw[-40:])
            self.assertIn(b"content-length: 100\r\n", raw.lower())
        recs = ops.access_records(proxy, 5)
        self.assertEqual({(r["status"], r["error"]) for r in recs}, {("200", "upstream_reset")})

    def test_an_origin_reset_right_after_a_head_without_length_gives_an_http2_client_the_head_then_the_reset(self):
        # A head without a length is held for what follows it (it might end
        # the stream in one HEADERS frame). The origin's reset coming next
        # must not swallow it: the HTTP/2 client sees the status, then
        # RST_STREAM INTERNAL_ERROR, and its connection goes on.
        o = self.h2origin(lambda r: r.respond_then_reset(200, [("x-answered", "yes")], b"")
                          if r.path.startswith("/cut") else r.respond(200, [], b"fine"))
        proxy = self.proxy_to(o.port)
        c = H2Client(proxy.port())
        self.addCleanup(c.close)
        for i in range(3):
            sid = c.request("GET", "/cut%d" % i, authority="svc.test")
            self.assertTrue(c.pump(c.done(sid), timeout=5.0))
            s = c.streams[sid]
            self.assertEqual((c.status(sid), s["reset"], s["ended"]), (200, h2_origin.INTERNAL_ERROR, False))
            self.assertEqual(c.header(sid, "x-answered"), "yes")
            self.assertEqual(bytes(s["data"]), b"")
        sid = c.request("GET", "/after", authority="svc.test")
        self.assertTrue(c.pump(c.done(sid), timeout=5.0))
        self.assertEqual((c.status(sid), bytes(c.streams[sid]["data"])), (200, b"fine"))
        recs = ops.access_records(proxy, 3, lambda x: x.get("path", "").startswith("/cut"))
        self.assertEqual({(r["status"], r["error"]) for r in recs}, {("200", "upstream_reset")})

    def test_a_head_answer_reset_after_its_head_is_whole_and_the_connection_goes_on(self):
        # A response to HEAD (as a 204 or a 304) is all head: an origin that
        # resets the stream after it takes nothing from it. The client gets
        # it whole and its connection serves the next request.
        def handler(r):
            if r.method == "HEAD":
                r.respond_then_reset(200, [("content-length", "5")], b"")
            else:
                r.respond(200, [], b"after")
        o = self.h2origin(handler)
        proxy = self.proxy_to(o.port)
        with h.Conn(proxy.port()) as c:
            r = c.request("HEAD", "/head", host="svc.test")
            self.assertEqual((r.status, r.header("content-length"), r.body), (200, "5", b""))
            r = c.request("GET", "/next", host="svc.test")
            self.assertEqual((r.status, r.body), (200, b"after"))
        # An HTTP/2 client gets its stream ended, not reset.
        c = H2Client(proxy.port())
        self.addCleanup(c.close)
        sid = c.request("HEAD", "/head2", authority="svc.test")
        self.assertTrue(c.pump(c.done(sid), timeout=5.0))
        self.assertEqual((c.status(sid), c.streams[sid]["ended"], c.streams[sid]["reset"]), (200, True, None))
        recs = ops.access_records(proxy, 2, lambda x: x.get("path") in ("/head", "/head2"))
        self.assertEqual([(x["status"], x["error"]) for x in recs], [("200", "upstream_reset")] * 2)

    def test_streams_reset_while_the_connection_writes_leave_its_frames_whole(self):
        # A HEAD answered with a body is refused with RST_STREAM
        # PROTOCOL_ERROR, and that stream closes as the RST_STREAM is
        # written, while DATA of large uploads beside it waits in the same
        # output (the origin's windows let it go bit by bit). The attempt
        # ending then must not start a second write of the session's output
        # from inside the first: that sent frames twice and cut others, and
        # the origin saw garbage and failed the connection.
        def handler(r):
            if r.method == "HEAD":
                r.respond(200, [("content-length", "6")], b"broken")
            else:
                r.respond(200, [], b"took %d" % len(r.body))
        o = self.h2origin(handler)
        proxy = self.proxy_to(o.port)
        clients = [H2Client(proxy.port()) for _ in range(3)]
        for c in clients:
            self.addCleanup(c.close)
        upload = b"u" * 16000  # one DATA frame; the nine of a round pass the origin's 64 KiB window
        for round_ in range(15):  # one HEAD each: fewer than max_stream_errors (20) in all
            sent = []  # (client, stream, is a POST)
            for n, c in enumerate(clients):
                for i in range(3):
                    sent.append((c, c.request("POST", "/up%d-%d-%d" % (round_, n, i), authority="svc.test",
                                              body=upload), True))
                    if n == 0 and i == 0:
                        sent.append((c, c.request("HEAD", "/head%d" % round_, authority="svc.test"), False))
            deadline = time.monotonic() + 10
            while not all(c.done(sid)() for c, sid, _ in sent) and time.monotonic() < deadline:
                for c in clients:
                    c.pump(c.done(*[sid for cc, sid, _ in sent if cc is c]), timeout=0.05)
            for c, sid, is_post in sent:
                s = c.streams[sid]
                self.assertEqual((round_, c.status(sid), s["reset"]), (round_, 200, None))
                if is_post:
                    self.assertEqual(bytes(s["data"]), b"took 16000")
        self.assertEqual(o.errors, [], "the origin received broken frames")
        self.assertEqual(o.accepted, 1, "one upstream connection carried every stream")

    def test_a_lost_connection_fails_its_streams_a_get_is_retried_and_a_post_is_not(self):
        seen = set()

        def handler(r):
            if r.path not in seen:  # the first try arrives, then its connection is lost
                seen.add(r.path)
                r.drop_connection()
            else:
                r.respond(200, [], b"second try")
        o = self.h2origin(handler)
        proxy = self.proxy_to(o.port, retry={"max_attempts": 2})
        with h.Conn(proxy.port()) as c:
            r = c.request("POST", "/order", host="svc.test", body=b"x")
        self.assertProxyError(r, 502, "upstream_reset")
        self.assertEqual([(q.path, q.conn_id) for q in o.snapshot()], [("/order", 1)], "a POST was repeated")
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/item", host="svc.test")
        self.assertEqual((r.status, r.body), (200, b"second try"))
        self.assertEqual([(q.path, q.conn_id) for q in o.snapshot()][1:], [("/item", 2), ("/item", 3)])

    def test_an_origin_that_breaks_the_protocol_gets_goaway_a_warning_and_a_get_goes_again_elsewhere(self):
        # On its first connection the origin answers with a zero-increment
        # WINDOW_UPDATE (a connection error, RFC 9113 6.9): onelayer ends
        # that connection with GOAWAY PROTOCOL_ERROR, says so in a warning,
        # and the GET in flight, failed as a reset, goes again on a new one.
        def handler(r):
            if r.conn_id == 1:
                r._conn.sock.sendall(b"\x00\x00\x04\x08\x00\x00\x00\x00\x00" + b"\x00\x00\x00\x00")
            else:
                r.respond(200, [], b"second connection")
        o = self.h2origin(handler)
        proxy = self.proxy_to(o.port, retry={"max_attempts": 2})
        r = get(proxy.port(), "/item")
        self.assertEqual((r.status, r.body), (200, b"second connection"))
        self.assertEqual([(q.path, q.conn_id) for q in o.snapshot()], [("/item", 1), ("/item", 2)])
        line = ("upstream 127.0.0.1:%d: HTTP/2 connection ended by onelayer: GOAWAY code 1 "
                "(WINDOW_UPDATE: window_size_increment == 0); its streams fail as resets" % o.port)
        self.assertTrue(h.wait_until(lambda: line in proxy.stderr(), 3.0), proxy.stderr()[-2000:])
        self.assertEqual(proxy.stderr().count("HTTP/2 connection ended by onelayer"), 1)
        # The GOAWAY itself reached the origin before the connection closed.
        self.assertEqual(h.wait_for_lines(lambda: o.goaways, 1), [(1, h2_origin.PROTOCOL_ERROR)])

    def test_a_response_length_above_2_53_is_a_502_bad_upstream_response(self):
        # (Some body, then a reset: a HEADERS that ended the stream with a
        # length would be refused by the HTTP/2 layer itself.)
        o = self.h2origin(lambda r: r.respond_then_reset(200, [("content-length", "9007199254740992")], b"p"))
        proxy = self.proxy_to(o.port, retry={"max_attempts": 1})
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/huge", host="svc.test")
            self.assertProxyError(r, 502, "bad_upstream_response")
            self.assertNotIn("9007199254740992", str(r.headers))
        # One below is a length like any other: the head reaches the client.
        o2 = self.h2origin(lambda r: r.respond_then_reset(200, [("content-length", "9007199254740991")], b"p"))
        proxy2 = self.proxy_to(o2.port, retry={"max_attempts": 1})
        raw, _ = h.raw_exchange(proxy2.port(), h.build_request("GET", "/big", host="svc.test"), timeout=5.0)
        self.assertIn(b"9007199254740991", raw[:400])

    def test_an_origin_reset_before_the_head_is_a_502_upstream_reset(self):
        o = self.h2origin(lambda r: r._conn.reset(r.stream_id, h2_origin.INTERNAL_ERROR))
        proxy = self.proxy_to(o.port, retry={"max_attempts": 1})
        with h.Conn(proxy.port()) as c:
            r = c.request("POST", "/x", headers=[("Host", "svc.test")], body=b"x")
        self.assertProxyError(r, 502, "upstream_reset")

    # -- pooling --------------------------------------------------------------
    # -- active health checks --------------------------------------------
    def test_active_health_checks_speak_http2_and_eject_and_return_an_h2c_endpoint(self):
        health = {"status": 503}

        def sick_handler(r):
            r.respond(health["status"] if r.path == "/healthz" else 200, [], b"hc" if r.path == "/healthz" else b"ok")

        good = self.h2origin()
        sick = self.h2origin(sick_handler)
        endpoints = ["127.0.0.1:%d" % good.port, "127.0.0.1:%d" % sick.port]
        proxy = self.proxy_to(good.port, endpoints=endpoints, upstream={
            "health_check": {"path": "/healthz", "interval": "100ms", "timeout": "100ms",
                             "unhealthy": 2, "healthy": 2}})
        sick_ep = endpoints[1]

        def ejected(ep):
            return ops.value(ops.metrics(self, proxy), "onelayer_endpoint_ejected", upstream="origin", endpoint=ep)

        def logged(text):
            return h.wait_until(lambda: text in proxy.stderr(), 5)

        self.assertTrue(logged("endpoint %s ejected (health_check: 2 failed checks in a row), until checks pass"
                               % sick_ep), proxy.stderr()[-3000:])
        self.assertEqual(ejected(sick_ep), 1.0)
        self.assertEqual(ejected(endpoints[0]), 0.0, "the healthy h2c endpoint passes its checks")
        served_before = len([r for r in sick.snapshot() if r.path != "/healthz"])
        for i in range(10):
            self.assertEqual(get(proxy.port(), "/item%d" % i).status, 200)
        self.assertEqual(len([r for r in sick.snapshot() if r.path != "/healthz"]), served_before)
        health["status"] = 200
        self.assertTrue(logged("endpoint %s returned (health_check: 2 passed checks in a row)" % sick_ep),
                        proxy.stderr()[-3000:])
        self.assertEqual(ejected(sick_ep), 0.0)
        checks = [r for r in sick.snapshot() if r.path == "/healthz"]
        self.assertGreaterEqual(len(checks), 4)
        self.assertEqual({(r.method, r.field(":scheme"), r.field(":authority"), r.field("user-agent"))
                          for r in checks}, {("GET", "http", sick_ep, "onelayer-health-check")})

    def test_an_idle_connection_closes_after_the_pool_idle_timeout_and_a_new_one_opens(self):
        o = self.h2origin()
        proxy = self.proxy_to(o.port, upstream={"pool": {"idle_timeout": "500ms"}})

        def active():
            return ops.value(ops.metrics(self, proxy), "onelayer_upstream_connections_active", protocol="h2")
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/1", host="a").status, 200)
            self.assertEqual(c.request("GET", "/2", host="a").status, 200)
            self.assertEqual(o.accepted, 1)
            # The idle HTTP/2 connection counts as an open upstream connection.
            self.assertEqual(active(), 1)
            self.assertEqual(ops.value(ops.metrics(self, proxy), "onelayer_upstream_connections_total", protocol="h2"), 1)
            self.assertTrue(h.wait_until(lambda: active() == 0, 3), "the idle connection never closed")
            self.assertEqual(c.request("GET", "/3", host="a").status, 200)
        self.assertEqual(o.accepted, 2)
        self.assertEqual([q.conn_id for q in o.snapshot()], [1, 1, 2])


class H2TlsUpstreamTest(tls.PkiTest):
    """``protocol: h2``: HTTP/2 over TLS, ALPN h2, against NGINX with a
    certificate made at test time."""

    def nginx(self, **kw):
        n = tls.Nginx(self.pki, **kw)
        self.addCleanup(n.stop)
        return n

    def proxy_to(self, nginx, tls_block, retry=None):
        up = {"protocol": "h2", "tls": tls_block}
        return self.start_proxy(h.simple_config(nginx.port, upstream=up, retry=retry, workers=1))

    def test_requests_go_over_tls_with_alpn_h2_and_share_one_connection(self):
        n = self.nginx(http2=True)
        proxy = self.proxy_to(n, {"sni": "origin.test", "ca_file": self.pki.path("ca.pem")})
        r = get(proxy.port(), "/first")
        self.assertEqual((r.status, r.body), (200, b"ok sni=origin.test alpn=h2\n"))
        results = h.concurrent_gets(proxy.port(), 40, concurrency=20, target="/many")
        self.assertEqual([status for _, status, _ in results], [200] * 40)
        lines = h.wait_for_lines(n.access_lines, 41)
        self.assertEqual(len(lines), 41)
        self.assertEqual({(tls.field(l, "alpn"), tls.field(l, "http")) for l in lines}, {("h2", "HTTP/2.0")})
        self.assertEqual(len({tls.field(l, "conn") for l in lines}), 1, "one HTTP/2 connection for all")

    def test_after_a_reload_to_a_wrong_ca_the_pooled_connection_is_not_used(self):
        n = self.nginx(http2=True)
        good = {"sni": "origin.test", "ca_file": self.pki.path("ca.pem")}
        proxy = self.proxy_to(n, good)
        self.assertEqual(get(proxy.port(), "/before").status, 200)
        self.assertEqual(ops.value(ops.metrics(self, proxy), "onelayer_upstream_connections_active", protocol="h2"), 1)
        up = {"protocol": "h2", "tls": dict(good, ca_file=self.pki.path("other-ca.pem"))}
        ops.rewrite_config(proxy, h.simple_config(n.port, upstream=up, workers=1))
        self.assertEqual(ops.admin(proxy, "POST", "/reload").status, 200)
        # The new context does not verify nginx: a stream on the old
        # connection would have answered 200.
        self.assertProxyError(get(proxy.port(), "/after"), 502, "upstream_tls")
        self.assertEqual([l.split()[1] for l in h.wait_for_lines(n.access_lines, 1)], ["/before"])
        self.assertEqual(ops.value(ops.metrics(self, proxy), "onelayer_upstream_connections_active", protocol="h2"), 0,
                         "the stale idle connection was closed")

    def test_a_server_that_does_not_choose_h2_is_a_connect_failure(self):
        n = self.nginx(http2=False)
        proxy = self.proxy_to(n, {"sni": "origin.test", "ca_file": self.pki.path("ca.pem")},
                              retry={"max_attempts": 2})
        r = get(proxy.port(), "/x")
        self.assertProxyError(r, 502, "connect_failure")
        self.assertEqual(n.access_lines(), [], "no request may reach a server that would not speak h2")

    def test_health_checks_speak_http2_over_tls_to_h2_and_what_alpn_chose_to_auto(self):
        # h2: HTTP/2 with ALPN h2; auto: the check's own handshake decides
        # (HTTP/2 to an origin with http2, HTTP/1.1 to one without); h2 to
        # origins without http2 fail their checks as their requests would
        # (one of two is ejected: the last one never is).
        ok = 'location = /healthz { return 200 "healthy\\n"; }'
        cases = [("h2", True, ("h2", "HTTP/2.0")), ("auto", True, ("h2", "HTTP/2.0")),
                 ("auto", False, ("http/1.1", "HTTP/1.1")), ("h2", False, None)]
        for protocol, http2, expect in cases:
            n, other = self.nginx(http2=http2, locations=ok), self.nginx(http2=http2, locations=ok)
            up = {"protocol": protocol, "tls": {"sni": "origin.test", "ca_file": self.pki.path("ca.pem")},
                  "health_check": {"interval": "100ms", "timeout": "90ms", "unhealthy": 1},
                  "outlier_detection": {"max_ejected_percent": 100}}
            proxy = self.start_proxy(h.simple_config(n.port, upstream=up, workers=1, endpoints=[
                "127.0.0.1:%d" % n.port, "127.0.0.1:%d" % other.port]))

            def ejected():
                text = ops.metrics(self, proxy)
                return sum(ops.value(text, "onelayer_endpoint_ejected", upstream="origin",
                                     endpoint="127.0.0.1:%d" % x.port) for x in (n, other))
            if expect is None:
                self.assertTrue(h.wait_until(lambda: ejected() == 1.0, 5), proxy.stderr()[-2000:])
                self.assertEqual(n.access_lines() + other.access_lines(), [],
                                 "no check went to a server that would not speak h2")
                continue
            checks = n.wait_lines(3)
            self.assertEqual({(l.split()[1], tls.field(l, "alpn"), tls.field(l, "http")) for l in checks},
                             {("/healthz",) + expect}, (protocol, http2, checks))
            self.assertEqual(ejected(), 0.0, (protocol, http2))

    def test_a_certificate_that_does_not_verify_is_final_upstream_tls(self):
        n = self.nginx(http2=True)
        proxy = self.proxy_to(n, {"sni": "other.test", "ca_file": self.pki.path("ca.pem")},
                              retry={"max_attempts": 3})
        r = get(proxy.port(), "/x")
        self.assertProxyError(r, 502, "upstream_tls")
        self.assertEqual(n.access_lines(), [])


if __name__ == "__main__":
    unittest.main()
