"""Hostile and broken upstreams (docs/security.md), and the randomized "nothing lost,
nothing duplicated" test.

Environment:
  FAULT_SEED      seed of the randomized test (default 20261129; printed)
  FAULT_REQUESTS  requests in the randomized test (default 3000)
  FAULT_CLIENTS   concurrent client connections there (default 16)
"""

import os
import random
import re
import socket
import sys
import threading
import time
import unittest
import zlib

import fault_origin as fo
import harness as h
from harness import IntegrationTest, fd_count, wait_until

# Under AddressSanitizer the quarantine keeps freed memory: RSS growth is
# not a leak signal there (LeakSanitizer checks leaks at exit instead).
SANITIZED = os.environ.get("ONELAYER_SANITIZED") == "1"
RETRY = {"max_attempts": 3, "per_try_timeout": "300ms",
         "backoff": {"base": "10ms", "cap": "50ms", "jitter": "full"},
         "retry_after": {"honor": True, "max": "1s"}}
BUDGET = {"retry_budget": {"ratio": 1.0, "min_per_second": 1000}}


class FaultTestBase(IntegrationTest):
    def start_fault_origin(self, handler=None, **kw):
        origin = fo.FaultOrigin(handler, **kw)
        self.addCleanup(origin.stop)
        self.addCleanup(self._check_fault_origin, origin)
        return origin

    def _check_fault_origin(self, origin):
        if origin.errors and not self._failed():
            raise AssertionError("%s received malformed HTTP from the proxy: %s" % (
                origin.name, origin.errors[:5]))

    def proxy_with(self, origin, retry=RETRY, timeout="2s", endpoints=None, upstream=None, **kw):
        up = dict(BUDGET)
        up.update(upstream or {})
        port = origin.port if origin is not None else None
        return self.start_proxy(h.simple_config(port, endpoints=endpoints, retry=retry,
                                                timeout=timeout, upstream=up, **kw))

    def get(self, proxy, target="/", method="GET", headers=None, body=b"", timeout=10.0):
        with h.Conn(proxy.port(), timeout=timeout) as c:
            return c.request(method, target, headers=headers, body=body)

    def assertHealthy(self, proxy):
        self.assertTrue(proxy.running(), "the proxy died")
        self.assertEqual(proxy.admin_get("/healthz").status, 200)


class BrokenResponseTest(FaultTestBase):
    """Responses that cannot be forwarded become 502 bad_upstream_response."""

    def check_bad_response(self, data, attempts_max=3):
        origin = self.start_fault_origin(lambda a: fo.raw(data, close=True))
        proxy = self.proxy_with(origin)
        raw = h.raw_request(proxy.port(), h.build_request("GET", "/bad"), responses=1)
        try:
            r = h.parse_responses(raw)[0]
        except (h.ProtocolError, h.IncompleteMessage, IndexError) as e:
            self.fail("the proxy forwarded a response the client cannot parse (%s): %r" % (e, raw[:300]))
        self.assertProxyError(r, 502, "bad_upstream_response")
        self.assertLessEqual(origin.count(), attempts_max)
        self.assertHealthy(proxy)
        return r

    def test_garbage_status_line_gives_502(self):
        self.check_bad_response(b"HTTX/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    def test_binary_garbage_gives_502(self):
        self.check_bad_response(bytes(range(256)) * 4)

    def test_status_code_below_100_gives_502(self):
        # llhttp accepts "HTTP/1.1 0 X" and "099": status-code is 3DIGIT >= 100.
        self.check_bad_response(b"HTTP/1.1 099 Weird\r\nContent-Length: 0\r\n\r\n")

    def test_status_code_zero_gives_502(self):
        self.check_bad_response(b"HTTP/1.1 0 Zero\r\nContent-Length: 0\r\n\r\n")

    def test_oversized_response_headers_give_502(self):
        self.check_bad_response(b"HTTP/1.1 200 OK\r\n" + b"X-Big: " + b"h" * (200 * 1024) +
                                b"\r\nContent-Length: 0\r\n\r\n")

    def test_too_many_response_headers_give_502(self):
        self.check_bad_response(b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(2000))
                                + b"Content-Length: 0\r\n\r\n")

    def test_invalid_content_length_gives_502(self):
        self.check_bad_response(b"HTTP/1.1 200 OK\r\nContent-Length: 12abc\r\n\r\nhello")

    def test_two_different_content_lengths_give_502(self):
        self.check_bad_response(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")

    def test_content_length_with_chunked_gives_502(self):
        self.check_bad_response(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked"
                                b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n")

    def test_bare_cr_in_response_header_value_is_never_forwarded(self):
        self.check_bad_response(b"HTTP/1.1 200 OK\r\nX-A: a\rSet-Cookie: evil=1\r\nContent-Length: 0\r\n\r\n")

    def test_bare_lf_in_response_header_value_is_never_forwarded(self):
        self.check_bad_response(b"HTTP/1.1 200 OK\r\nX-A: a\nSet-Cookie: evil=1\r\nContent-Length: 0\r\n\r\n")

    def test_nul_in_response_header_value_gives_502(self):
        self.check_bad_response(b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n")

    def test_obs_fold_in_response_never_splits_the_downstream_response(self):
        origin = self.start_fault_origin(lambda a: fo.raw(
            b"HTTP/1.1 200 OK\r\nX-A: a\r\n Set-Cookie: evil=1\r\nContent-Length: 2\r\n\r\nok",
            close=True))
        proxy = self.proxy_with(origin)
        raw = h.raw_request(proxy.port(), h.build_request("GET", "/fold"), responses=1)
        resps = h.parse_responses(raw)  # strict: a split header line fails here
        self.assertEqual(len(resps), 1)
        self.assertEqual(resps[0].header_all("set-cookie"), [], "obs-fold became a new field")
        self.assertIn(resps[0].status, (200, 502))
        for line in raw.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
            self.assertFalse(line.startswith((b" ", b"\t")), "obs-fold forwarded: %r" % raw[:300])

    def test_control_characters_in_response_header_values_are_not_forwarded(self):
        origin = self.start_fault_origin(lambda a: fo.raw(
            b"HTTP/1.1 200 OK\r\nX-Ctl: a\x01b\r\nX-Del: a\x7fb\r\nX-Good: yes\r\nContent-Length: 2\r\n\r\nok",
            close=True))
        proxy = self.proxy_with(origin)
        raw = h.raw_request(proxy.port(), h.build_request("GET", "/ctl"), responses=1)
        head = raw.split(b"\r\n\r\n", 1)[0]
        self.assertNotIn(b"\x01", head)
        self.assertNotIn(b"\x7f", head)


class TruncatedResponseTest(FaultTestBase):
    def test_response_truncated_mid_body_closes_downstream_and_is_not_retried(self):
        origin = self.start_fault_origin(lambda a: fo.head_then_close(200, 100000, b"x" * 500, rst=False))
        proxy = self.proxy_with(origin)
        with h.Conn(proxy.port()) as c:
            c.send(h.build_request("GET", "/cut"))
            with self.assertRaises(h.IncompleteMessage) as cm:
                c.read_response()
        partial = cm.exception.partial
        self.assertIsNotNone(partial, "no response head reached the client")
        self.assertEqual(partial.status, 200)
        self.assertLess(partial.body_len, 100000)
        time.sleep(0.3)
        self.assertEqual(origin.count(), 1, "retried after response bytes went downstream")
        self.assertHealthy(proxy)

    def test_response_reset_mid_body_closes_downstream_and_is_not_retried(self):
        origin = self.start_fault_origin(lambda a: fo.head_then_close(200, 100000, b"x" * 500, rst=True))
        proxy = self.proxy_with(origin)
        t0 = time.monotonic()
        with h.Conn(proxy.port()) as c:
            c.send(h.build_request("GET", "/rst"))
            with self.assertRaises(h.IncompleteMessage):
                c.read_response()
        self.assertLess(time.monotonic() - t0, 3.0, "the client was left hanging")
        time.sleep(0.3)
        self.assertEqual(origin.count(), 1)

    def test_chunked_response_truncated_closes_downstream(self):
        origin = self.start_fault_origin(lambda a: fo.raw(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nonly-part", close=True))
        proxy = self.proxy_with(origin)
        with h.Conn(proxy.port()) as c:
            c.send(h.build_request("GET", "/chunk-cut"))
            with self.assertRaises(h.IncompleteMessage):
                c.read_response()
        self.assertEqual(origin.count(), 1)

    def test_response_stalling_mid_body_is_cut_not_left_hanging(self):
        # Cut by the route deadline (1 s) or the listener's idle timeout (2 s).
        origin = self.start_fault_origin(lambda a: fo.raw(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nsome", close=False))
        proxy = self.proxy_with(origin, timeout="1s", limits={"idle_timeout": "2s"})
        t0 = time.monotonic()
        with h.Conn(proxy.port(), timeout=10) as c:
            c.send(h.build_request("GET", "/stall"))
            try:
                c.read_response()
                self.fail("a stalled body completed?")
            except (h.IncompleteMessage, socket.timeout):
                pass
        elapsed = time.monotonic() - t0
        self.assertLess(elapsed, 5.0, "a stalled upstream body held the client %.1fs" % elapsed)


class HeadRequestTest(FaultTestBase):
    """A response to HEAD has no body (RFC 9110 9.3.2), including the ones the
    proxy makes itself: a body there desynchronizes the connection."""

    def test_proxy_made_error_for_head_has_no_body_and_the_next_response_is_intact(self):
        refused_port, sock = h.closed_port()
        self.addCleanup(sock.close)
        proxy = self.proxy_with(None, endpoints=["127.0.0.1:%d" % refused_port])
        raw = h.raw_request(proxy.port(), h.build_request("HEAD", "/head") +
                            h.build_request("GET", "/next", headers=[("Connection", "close")]),
                            timeout=5)
        try:
            resps = h.parse_responses(raw, methods=["HEAD", "GET"])
        except (h.ProtocolError, h.IncompleteMessage) as e:
            self.fail("responses out of sync after a HEAD (%s): %r" % (e, raw[:400]))
        self.assertEqual(len(resps), 2, repr(raw[:400]))
        self.assertProxyError(resps[0], 502, "connect_failure")
        self.assertProxyError(resps[1], 502, "connect_failure")

    def test_no_route_answer_to_head_has_no_body_and_the_next_response_is_intact(self):
        origin = self.start_fault_origin()
        proxy = self.proxy_with(origin, route={"match": {"path_prefix": "/api"}})
        raw = h.raw_request(proxy.port(), h.build_request("HEAD", "/elsewhere") +
                            h.build_request("GET", "/api/next", headers=[("Connection", "close")]),
                            timeout=5)
        try:
            resps = h.parse_responses(raw, methods=["HEAD", "GET"])
        except (h.ProtocolError, h.IncompleteMessage) as e:
            self.fail("responses out of sync after a HEAD (%s): %r" % (e, raw[:400]))
        self.assertEqual([r.status for r in resps], [404, 200], repr(raw[:400]))

    def test_upstream_head_response_is_forwarded_without_body(self):
        origin = self.start_fault_origin(lambda a: fo.respond(
            200, [("Content-Length", "1234")], b"") if a.method == "HEAD" else fo.respond(200, body=b"ok"))
        proxy = self.proxy_with(origin)
        raw = h.raw_request(proxy.port(), h.build_request("HEAD", "/h") +
                            h.build_request("GET", "/g", headers=[("Connection", "close")]), timeout=5)
        resps = h.parse_responses(raw, methods=["HEAD", "GET"])
        self.assertEqual([r.status for r in resps], [200, 200])


class SilentUpstreamTest(FaultTestBase):
    def test_upstream_that_never_answers_hits_the_per_try_timeout(self):
        origin = self.start_fault_origin(lambda a: fo.hang())
        proxy = self.proxy_with(origin, retry=dict(RETRY, max_attempts=2), timeout="3s")
        t0 = time.monotonic()
        r = self.get(proxy, "/silent")
        elapsed = time.monotonic() - t0
        self.assertEqual(r.status, 504, repr(r))
        self.assertEqual(r.header("x-onelayer-error"), "deadline_exceeded")
        self.assertEqual(origin.count(), 2, "GET not retried after a per-try timeout")
        self.assertGreaterEqual(elapsed, 0.55)
        self.assertLess(elapsed, 2.0, "per-try timeout 300ms x 2 took %.2fs" % elapsed)

    def test_post_without_key_is_not_retried_after_a_timeout(self):
        origin = self.start_fault_origin(lambda a: fo.hang())
        proxy = self.proxy_with(origin)
        r = self.get(proxy, "/silent-post", method="POST", body=b"pay once")
        self.assertEqual(r.status, 504)
        time.sleep(0.3)
        self.assertEqual(origin.count(), 1, "a key-less POST was sent twice")

    def test_accepting_but_never_reading_upstream_times_out(self):
        # A listener that never accepts: the kernel completes the handshake.
        lst = socket.socket()
        lst.bind(("127.0.0.1", 0))
        lst.listen(16)
        self.addCleanup(lst.close)
        proxy = self.proxy_with(None, endpoints=["127.0.0.1:%d" % lst.getsockname()[1]],
                                retry=dict(RETRY, max_attempts=2))
        t0 = time.monotonic()
        r = self.get(proxy, "/never-accepted")
        self.assertEqual(r.status, 504)
        self.assertLess(time.monotonic() - t0, 2.0)


class EarlyAndClosingUpstreamTest(FaultTestBase):
    def test_upstream_answering_before_reading_the_body(self):
        origin = self.start_fault_origin(early_handler=lambda a: fo.early(
            fo.respond(413, body=b"too big for me", close=True)) if a.method == "POST" else None)
        proxy = self.proxy_with(origin)
        body = b"b" * (2 << 20)  # 2 MiB, past buffer_limit: it streams
        t0 = time.monotonic()
        with h.Conn(proxy.port(), timeout=10) as c:
            c.sock.setblocking(True)
            sender = threading.Thread(target=lambda: _send_quietly(c.sock, h.build_request(
                "POST", "/early", body=body)), daemon=True)
            sender.start()
            r = c.read_response("POST")
            sender.join(10)
        self.assertEqual(r.status, 413)
        self.assertEqual(r.body, b"too big for me")
        self.assertLess(time.monotonic() - t0, 5.0)
        self.assertHealthy(proxy)
        self.assertEqual(self.get(proxy, "/after").status, 200)

    def test_upstream_closing_every_connection_after_each_response(self):
        origin = self.start_fault_origin(lambda a: fo.respond(200, body=b"ok", close=True))
        proxy = self.proxy_with(origin)
        with h.Conn(proxy.port()) as c:
            for i in range(30):
                r = c.request("GET", "/close/%d" % i)
                self.assertEqual(r.status, 200, "request %d: %r" % (i, r))
                self.assertFalse(r.wants_close(), "the upstream's close leaked downstream")
        self.assertEqual(origin.count(), 30, "a request was retried or lost")
        self.assertEqual(origin.connections_accepted, 30)

    def test_post_to_upstream_closing_every_connection_never_duplicates(self):
        origin = self.start_fault_origin(lambda a: fo.respond(201, body=b"made", close=True))
        proxy = self.proxy_with(origin)
        with h.Conn(proxy.port()) as c:
            for i in range(30):
                self.assertEqual(c.request("POST", "/p/%d" % i, body=b"x").status, 201)
        self.assertEqual(sorted(a.target for a in origin.snapshot()),
                         sorted("/p/%d" % i for i in range(30)))

    def test_upstream_resetting_pooled_connections_at_random(self):
        rng = random.Random(7)
        origin = self.start_fault_origin(lambda a: fo.respond(200, body=b"ok"), idle_reset=(0.3, rng))
        proxy = self.proxy_with(origin)
        statuses = []
        with h.Conn(proxy.port()) as c:
            for i in range(300):
                statuses.append(c.request("GET", "/pool/%d" % i).status)
                # Mostly longer than the origin's reset delay (0-10 ms), so
                # most chosen connections are reset while idle, some while a
                # request is on its way: about 60 resets, not a handful that a
                # loaded machine's late timers can push under the check below.
                time.sleep(rng.uniform(0, 0.02))
        self.assertGreater(origin.idle_resets, 10, "the fault was not exercised")
        self.assertEqual(statuses.count(200), 300,
                         "GETs failed when pooled connections were reset: %r" %
                         {s: statuses.count(s) for s in set(statuses)})
        self.assertEqual(len({a.target for a in origin.snapshot()}), 300)

    def test_keyless_posts_on_randomly_reset_pooled_connections_never_arrive_twice(self):
        rng = random.Random(8)
        origin = self.start_fault_origin(lambda a: fo.respond(200, body=b"ok"), idle_reset=(0.3, rng))
        proxy = self.proxy_with(origin)
        with h.Conn(proxy.port()) as c:
            for i in range(200):
                try:
                    c.request("POST", "/post/%d" % i, body=b"once")
                except h.IncompleteMessage:
                    c.close()
                    c = h.Conn(proxy.port())
                time.sleep(rng.uniform(0, 0.01))
        targets = [a.target for a in origin.snapshot()]
        dups = sorted({t for t in targets if targets.count(t) > 1})
        self.assertEqual(dups, [], "key-less POSTs arrived twice")


class DnsFailureTest(FaultTestBase):
    def test_endpoint_name_that_does_not_resolve_gives_502_connect_failure(self):
        proxy = self.proxy_with(None, endpoints=["nonexistent.invalid:80"],
                                upstream={"connect_timeout": "1s"})
        t0 = time.monotonic()
        r = self.get(proxy, "/dns")
        self.assertProxyError(r, 502, "connect_failure")
        self.assertLess(time.monotonic() - t0, 5.0)
        self.assertTrue(wait_until(lambda: "nonexistent.invalid" in proxy.stderr(), 3.0),
                        "no log line names the failing host")
        # Again: the failure is not cached into a hang.
        self.assertProxyError(self.get(proxy, "/dns2"), 502, "connect_failure")
        self.assertHealthy(proxy)

    def test_dns_failure_on_one_endpoint_retries_the_other(self):
        origin = self.start_fault_origin()
        proxy = self.proxy_with(origin, endpoints=["nonexistent.invalid:80", origin.endpoint])
        for i in range(6):
            self.assertEqual(self.get(proxy, "/dns-mixed/%d" % i, method="POST", body=b"x").status, 200)
        self.assertEqual(origin.count(), 6)


class RetryAfterTest(FaultTestBase):
    def check(self, value, expect_arrivals_max=3, max_seconds=2.5):
        origin = self.start_fault_origin(lambda a: fo.respond(503, [("Retry-After", value)], b"later"))
        proxy = self.proxy_with(origin, timeout="2s")
        t0 = time.monotonic()
        r = self.get(proxy, "/ra")
        elapsed = time.monotonic() - t0
        self.assertEqual(r.status, 503, repr(r))
        self.assertLessEqual(origin.count(), expect_arrivals_max)
        self.assertLess(elapsed, max_seconds, "Retry-After %r held the request %.2fs" % (value, elapsed))
        self.assertHealthy(proxy)
        return r, origin

    def test_absurdly_large_delay_seconds_returns_the_503_at_once(self):
        r, origin = self.check("99999999999999999999999999999", expect_arrivals_max=1, max_seconds=1.0)
        self.assertIsNotNone(r.header("x-retry-exhausted"))

    def test_date_in_year_9999_returns_the_503_at_once(self):
        self.check("Fri, 31 Dec 9999 23:59:59 GMT", expect_arrivals_max=1, max_seconds=1.0)

    def test_negative_value_is_ignored(self):
        self.check("-5")

    def test_garbage_value_is_ignored(self):
        self.check("soon, promise")

    def test_date_in_the_past_means_retry_now(self):
        self.check("Sun, 06 Nov 1994 08:49:37 GMT")

    def test_huge_header_value_is_ignored(self):
        self.check("9" * 10000)


def _send_quietly(sock, data):
    try:
        sock.sendall(data)
    except OSError:
        pass


# --------------------------------------------------------------------------
# Nothing lost, nothing duplicated.

FAULTS = [  # (name, weight)
    ("ok", 50), ("503", 8), ("503-retry-after", 4), ("429", 2), ("500", 3),
    ("rst-before-head", 6), ("close-before-head", 4), ("rst-after-head", 4),
    ("timeout", 3), ("slow-body", 5), ("close-after-response", 5), ("garbage", 2),
]
# Faults after which the response (or part of it) went downstream: final.
FINAL_ONCE_SENT = {"ok", "500", "rst-after-head", "slow-body", "close-after-response"}
METHODS = ["GET", "GET", "HEAD", "PUT", "DELETE", "POST", "POST", "PATCH"]
MAX_ATTEMPTS = 3


def fault_for(seed, rid, attempt):
    """Deterministic fault for (request id, attempt number at the origin)."""
    r = random.Random(zlib.crc32(("%d/%s/%d" % (seed, rid, attempt)).encode()))
    total = sum(w for _, w in FAULTS)
    x = r.uniform(0, total)
    for name, w in FAULTS:
        if x < w:
            return name
        x -= w
    return "ok"


def action_for(name, rid):
    echo = [("X-Echo-Id", rid)]
    if name == "ok":
        return fo.respond(200, echo, b"ok " + rid.encode())
    if name == "503":
        return fo.respond(503, echo, b"busy")
    if name == "503-retry-after":
        return fo.respond(503, echo + [("Retry-After", "0")], b"busy")
    if name == "429":
        return fo.respond(429, echo, b"slow down")
    if name == "500":
        return fo.respond(500, echo, b"broken")
    if name == "rst-before-head":
        return fo.close(rst=True)
    if name == "close-before-head":
        return fo.close(rst=False)
    if name == "rst-after-head":
        return fo.head_then_close(200, 5000, b"partial", rst=True, pause=0.005)
    if name == "timeout":
        return fo.hang()
    if name == "slow-body":
        return fo.slow_body(200, b"slow " + rid.encode() * 20, pieces=3, pause=0.01, headers=echo)
    if name == "close-after-response":
        return fo.respond(200, echo, b"bye " + rid.encode(), close=True)
    if name == "garbage":
        return fo.raw(b"HTTP/1.1 2OO OK\r\n\r\n", close=True)
    raise ValueError(name)


class NothingLostNothingDuplicatedTest(FaultTestBase):
    def test_randomized_faults_every_request_gets_exactly_one_response_and_no_unsafe_duplicates(self):
        seed = int(os.environ.get("FAULT_SEED", "20261129"))
        n = int(os.environ.get("FAULT_REQUESTS", "3000"))
        clients = int(os.environ.get("FAULT_CLIENTS", "16"))
        sys.stderr.write("\n[nothing-lost] seed=%d requests=%d clients=%d (FAULT_SEED=%d to replay)\n" % (
            seed, n, clients, seed))
        attempts_seen = {}
        lock = threading.Lock()

        def handler(arrival):
            rid = arrival.header("x-request-id") or "?"
            with lock:
                attempts_seen[rid] = attempts_seen.get(rid, 0) + 1
                k = attempts_seen[rid]
            arrival.rid = rid
            arrival.attempt = k
            arrival.fault = fault_for(seed, rid, k)
            return action_for(arrival.fault, rid)

        origin = self.start_fault_origin(handler)
        refused_port, refused_sock = h.closed_port()
        self.addCleanup(refused_sock.close)
        proxy = self.proxy_with(origin, endpoints=[origin.endpoint, "127.0.0.1:%d" % refused_port],
                                retry=dict(RETRY, max_attempts=MAX_ATTEMPTS), timeout="3s",
                                upstream={"connect_timeout": "500ms"})
        plan_rng = random.Random(seed)
        plan = []
        for i in range(n):
            method = plan_rng.choice(METHODS)
            keyed = method in ("POST", "PATCH") and plan_rng.random() < 0.5
            plan.append(("r%05d" % i, method, keyed))

        outcomes = {}      # rid -> list of outcomes seen by the client
        problems = []
        next_index = [0]
        warm = {"rss": None, "fds": None}
        warm_at = max(1, n // 10)

        def take():
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i == warm_at:
                # Warm-up done: the baseline for the leak checks.
                warm["rss"] = proxy.rss_kb()
                warm["fds"] = fd_count(proxy.proc.pid)
            return plan[i] if i < n else None

        def client():
            conn = None
            while True:
                item = take()
                if item is None:
                    break
                rid, method, keyed = item
                headers = [("X-Request-Id", rid)]
                if keyed:
                    headers.append(("Idempotency-Key", "key-" + rid))
                body = b"body of " + rid.encode() if method in ("POST", "PUT", "PATCH") else b""
                if conn is None:
                    conn = h.Conn(proxy.port(), timeout=15)
                try:
                    r = conn.request(method, "/n/" + rid, headers=headers, body=body)
                    outcome = r.status
                    echo = r.header("x-echo-id")
                    if echo is not None and echo != rid:
                        problems.append("%s got the response of %s" % (rid, echo))
                    if r.wants_close():
                        conn.close()
                        conn = None
                except h.IncompleteMessage as e:
                    outcome = "cut" if e.partial is not None else "closed-without-response"
                    conn.close()
                    conn = None
                except socket.timeout:
                    outcome = "no-response"
                    conn.close()
                    conn = None
                except (OSError, h.ProtocolError) as e:
                    outcome = "error:%r" % e
                    if conn is not None:
                        conn.close()
                    conn = None
                with lock:
                    outcomes.setdefault(rid, []).append(outcome)
            if conn is not None:
                conn.close()

        t0 = time.monotonic()
        threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        elapsed = time.monotonic() - t0
        self.assertFalse(any(t.is_alive() for t in threads), "clients still running after 120 s")
        time.sleep(0.5)  # late arrivals (a retry racing the end) would show now
        rss_end = proxy.rss_kb()
        fds_end = fd_count(proxy.proc.pid)

        arrivals = origin.snapshot()
        by_rid = {}
        for a in arrivals:
            by_rid.setdefault(getattr(a, "rid", a.header("x-request-id")), []).append(a)
        methods = {rid: (m, k) for rid, m, k in plan}
        faults_hit = {}
        for a in arrivals:
            faults_hit[getattr(a, "fault", "?")] = faults_hit.get(getattr(a, "fault", "?"), 0) + 1
        status_mix = {}
        for rid, outs in outcomes.items():
            for o in outs:
                status_mix[o] = status_mix.get(o, 0) + 1
        sys.stderr.write("[nothing-lost] %d requests in %.1fs, %d arrivals; faults %r; outcomes %r\n" % (
            n, elapsed, len(arrivals), faults_hit, status_mix))

        # 1. Every downstream request got exactly one response (a cut response
        #    is one: its head arrived and the connection was closed).
        lost = [rid for rid, _, _ in plan if rid not in outcomes]
        self.assertEqual(lost, [], "requests never answered")
        multi = {rid: o for rid, o in outcomes.items() if len(o) != 1}
        self.assertEqual(multi, {}, "requests with more than one outcome")
        bad = {rid: o[0] for rid, o in outcomes.items()
               if not isinstance(o[0], int) and o[0] != "cut"}
        self.assertEqual(bad, {}, "requests without a response")
        self.assertEqual(problems, [])
        for rid, arr in by_rid.items():
            m, keyed = methods.get(rid, ("?", False))
            faults = [a.fault for a in arr]
            # 2. No key-less POST/PATCH arrived twice.
            if m in ("POST", "PATCH") and not keyed:
                self.assertLessEqual(len(arr), 1, "%s %s (no key) arrived %d times: %r" % (
                    m, rid, len(arr), faults))
            # 3. Attempts never exceed max_attempts.
            self.assertLessEqual(len(arr), MAX_ATTEMPTS, "%s: %d attempts %r" % (rid, len(arr), faults))
            # 4. No retry after response bytes went downstream.
            for i, a in enumerate(arr[:-1]):
                self.assertNotIn(a.fault, FINAL_ONCE_SENT,
                                 "%s %s retried after %r had sent response bytes: %r" % (
                                     m, rid, a.fault, faults))
            # The proxy numbers its attempts (it owns retries on this route);
            # attempts that hit the refused endpoint never show up here.
            numbers = [int(a.header("x-retry-attempt") or 0) for a in arr]
            self.assertEqual(numbers, sorted(set(numbers)), "%s: attempt numbers %r" % (rid, numbers))
            self.assertTrue(all(1 <= x <= MAX_ATTEMPTS for x in numbers), "%s: %r" % (rid, numbers))
            # A final answer from the origin reached the client as is.
            last = arr[-1]
            if last.fault in ("ok", "500", "close-after-response", "slow-body") and \
                    outcomes[rid][0] != "cut":
                expect = {"ok": 200, "500": 500, "close-after-response": 200, "slow-body": 200}
                self.assertEqual(outcomes[rid][0], expect[last.fault], "%s: %r" % (rid, faults))
        self.assertEqual(origin.errors, [])
        # 5. No growth: RSS and descriptors back near their warm-up values.
        self.assertIsNotNone(warm["rss"])
        sys.stderr.write("[nothing-lost] RSS %d KiB after warm-up, %d KiB at the end; fds %d -> %d\n" % (
            warm["rss"], rss_end, warm["fds"], fds_end))
        if not SANITIZED:
            margin_kb = max(8 * 1024, warm["rss"] // 4)
            self.assertLess(rss_end, warm["rss"] + margin_kb,
                            "RSS grew from %d KiB (warm) to %d KiB" % (warm["rss"], rss_end))
        self.assertLess(fds_end, warm["fds"] + 80,
                        "descriptors grew from %d (warm) to %d" % (warm["fds"], fds_end))
        self.assertHealthy(proxy)


if __name__ == "__main__":
    unittest.main()
