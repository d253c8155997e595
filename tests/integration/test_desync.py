"""Desync and integrity: the exact byte shapes of an independent attack run.

For each request shape the test checks what the upstream received, byte for
byte (nothing at all, or exactly one request), using an origin that "acts on
the head": it answers as soon as a request head is in, the way an upstream
that executes on the head would. For each response shape it checks what the
client received.
"""

import socket
import threading
import time
import unittest

import harness as h
from harness import IntegrationTest, wait_until


class WireOrigin:
    """A raw upstream on 127.0.0.1:<port> that records every byte each
    connection sent it and how the connection ended ("fin", "rst" or "open").
    After each request head (the bytes up to CRLF CRLF) it writes `answer`,
    a function of the connection's bytes so far, without reading any body:
    an upstream that acts on the head."""

    def __init__(self, answer=None, close_after_answer=False):
        self.close_after_answer = close_after_answer
        self.answer = answer or (lambda seen: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        self.conns = []  # dicts: data (bytearray), end, heads
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(0.1)
        self.port = self._sock.getsockname()[1]
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self):
        while not self._stop.is_set():
            try:
                c, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            rec = {"data": bytearray(), "end": "open", "heads": 0, "sock": c}
            with self._lock:
                self.conns.append(rec)
            t = threading.Thread(target=self._serve, args=(c, rec), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, c, rec):
        c.settimeout(0.1)
        answered_upto = 0
        while not self._stop.is_set():
            try:
                chunk = c.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                rec["end"] = "rst"
                break
            except OSError:
                break
            if not chunk:
                rec["end"] = "fin"
                break
            with self._lock:
                rec["data"] += chunk
            # Answer each new head at once, body or not.
            while True:
                end = bytes(rec["data"]).find(b"\r\n\r\n", answered_upto)
                if end < 0:
                    break
                answered_upto = end + 4
                rec["heads"] += 1
                try:
                    c.sendall(self.answer(bytes(rec["data"])))
                    if self.close_after_answer:
                        c.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
        c.close()

    def send_on(self, index, data):
        """Writes `data` on the index-th connection, asked for or not."""
        with self._lock:
            sock = self.conns[index]["sock"]
        sock.sendall(data)

    def received(self):
        """The bytes of every connection that received any, in order."""
        with self._lock:
            return [bytes(r["data"]) for r in self.conns if r["data"]]

    def ends(self):
        with self._lock:
            return [r["end"] for r in self.conns if r["data"]]

    def stop(self):
        self._stop.set()
        self._sock.close()
        for t in self._threads:
            t.join(2)


def responses_of(raw, methods=None):
    return h.parse_responses(raw, methods=methods)


class DesyncTestBase(IntegrationTest):
    limits = {"max_header_bytes": "8KiB", "header_timeout": "2s", "idle_timeout": "10s"}
    listener = None
    retry = None
    answer = None

    def setUp(self):
        self.origin = WireOrigin(self.answer)
        self.addCleanup(self.origin.stop)
        self.proxy = self.start_proxy(h.simple_config(self.origin.port, limits=self.limits,
                                                      listener=self.listener, retry=self.retry))
        self.port = self.proxy.port()
        # An idle pooled connection waits, as in a busy proxy: anything sent
        # from the head callback would reach the upstream at once.
        raw, _ = h.raw_exchange(self.port, b"GET /warm-up HTTP/1.1\r\nHost: a\r\n\r\n", timeout=3,
                                responses=1)
        self.assertEqual(responses_of(raw)[0].status, 200)
        self.warm = len(b"".join(self.origin.received()))

    def new_bytes(self, settle=0.4):
        time.sleep(settle)
        return b"".join(self.origin.received())[self.warm:]

    def assertRefusedAndNothingForwarded(self, data, status=400, reason="bad_request", method="POST"):
        raw, closed = h.raw_exchange(self.port, data, timeout=5)
        resps = responses_of(raw, methods=[method])
        self.assertEqual(len(resps), 1, "expected one answer, got %r" % raw[:400])
        self.assertEqual(resps[0].status, status, repr(resps[0]))
        self.assertEqual(resps[0].header("x-onelayer-error"), reason)
        self.assertTrue(closed, "connection left open after a refused request")
        self.assertEqual(self.new_bytes(), b"", "the upstream received bytes of a refused request")
        return resps[0]

    def assertExactlyOneRequestForwarded(self, data, method="GET"):
        raw, _ = h.raw_exchange(self.port, data, timeout=5, responses=1, methods=[method])
        resps = responses_of(raw, methods=[method] * 4)
        got = self.new_bytes()
        self.assertEqual(got.count(b" HTTP/1.1\r\n"), 1, "upstream got %r" % got)
        return resps, got


class ObsFoldTest(DesyncTestBase):
    def test_content_length_folded_after_an_empty_first_line_is_refused_and_nothing_smuggled(self):
        self.assertRefusedAndNothingForwarded(
            b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n 5\r\n\r\nhello"
            b"GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n")

    def test_transfer_encoding_folded_after_an_empty_first_line_is_refused(self):
        self.assertRefusedAndNothingForwarded(
            b"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n")

    def test_host_folded_after_an_empty_first_line_is_refused(self):
        self.assertRefusedAndNothingForwarded(b"GET / HTTP/1.1\r\nHost:\r\n a\r\n\r\n", method="GET")

    def test_fold_split_across_reads_is_refused(self):
        data = b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n 5\r\n\r\nhello"
        cut = data.index(b"\r\n 5") + 2
        raw, closed = h.raw_exchange(self.port, pieces=[data[:cut], data[cut:]], pause=0.1, timeout=5)
        resps = responses_of(raw, methods=["POST"])
        self.assertEqual([r.status for r in resps], [400])
        self.assertTrue(closed)
        self.assertEqual(self.new_bytes(), b"")


class BareLfTest(DesyncTestBase):
    def test_bare_lf_after_the_request_line_is_refused(self):
        self.assertRefusedAndNothingForwarded(b"GET / HTTP/1.1\nHost: a\r\n\r\n", method="GET")

    def test_bare_lf_ending_the_head_is_refused(self):
        self.assertRefusedAndNothingForwarded(
            b"GET / HTTP/1.1\r\nHost: a\r\n\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n", method="GET")

    def test_bare_lf_in_a_pipelined_second_request_refuses_only_that_one(self):
        raw, closed = h.raw_exchange(
            self.port, b"GET /one HTTP/1.1\r\nHost: a\r\n\r\nGET /two HTTP/1.1\nHost: a\r\n\r\n", timeout=5)
        resps = responses_of(raw, methods=["GET", "GET"])
        self.assertEqual([r.status for r in resps], [200, 400])
        got = self.new_bytes()
        self.assertIn(b"GET /one HTTP/1.1\r\n", got)
        self.assertNotIn(b"/two", got)


class BodyValidatedBeforeForwardingTest(DesyncTestBase):
    def test_malformed_chunk_is_refused_before_a_byte_goes_upstream(self):
        self.assertRefusedAndNothingForwarded(
            b"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nZZ\r\n")

    def test_malformed_chunk_arriving_later_is_refused_before_a_byte_goes_upstream(self):
        raw, closed = h.raw_exchange(self.port, pieces=[
            b"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
            b"ZZ\r\n"], pause=0.3, timeout=5)
        self.assertEqual([r.status for r in responses_of(raw, methods=["POST"])], [400])
        self.assertEqual(self.new_bytes(), b"")

    def test_transfer_encoding_in_the_trailer_is_refused_before_a_byte_goes_upstream(self):
        self.assertRefusedAndNothingForwarded(
            b"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")

    def test_content_length_body_is_forwarded_only_once_complete(self):
        raw, _ = h.raw_exchange(self.port, pieces=[
            b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nhello",
            b"world"], pause=0.4, timeout=5, responses=1, methods=["POST"])
        self.assertEqual([r.status for r in responses_of(raw, methods=["POST"])], [200])
        got = self.new_bytes()
        self.assertTrue(got.endswith(b"\r\n\r\nhelloworld"), got)
        self.assertEqual(got.count(b"POST /p"), 1)

    def test_client_vanishing_mid_body_leaves_the_upstream_untouched(self):
        s = socket.create_connection(("127.0.0.1", self.port))
        s.sendall(b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nhalf")
        time.sleep(0.3)
        s.close()
        self.assertEqual(self.new_bytes(), b"")


class MaxBodyTest(DesyncTestBase):
    limits = dict(DesyncTestBase.limits, max_body_bytes="32KiB")

    def test_chunked_body_over_max_body_bytes_within_buffer_limit_never_reaches_the_upstream(self):
        body = h.encode_chunked(b"c" * 40000, 8192)
        self.assertRefusedAndNothingForwarded(
            b"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + body,
            status=413, reason="body_too_large")


class StreamedBodyTest(DesyncTestBase):
    """Bodies past buffer_limit stream: a malformed one is cut with a reset,
    and the client's answer and the log say that part of it went upstream."""
    retry = {"buffer_limit": "1KiB"}
    limits = dict(DesyncTestBase.limits, max_body_bytes="64KiB")
    # Answers the warm-up GET; a POST waits for its body like most upstreams.
    answer = staticmethod(lambda seen: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                          if seen.rfind(b"GET ") > seen.rfind(b"POST ") else b"")

    def assertPartlyForwardedAndReset(self, pieces, status, reason):
        raw, closed = h.raw_exchange(self.port, pieces=pieces, pause=0.3, timeout=5)
        resps = responses_of(raw, methods=["POST"])
        self.assertEqual([r.status for r in resps], [status], raw[:300])
        self.assertEqual(resps[0].header("x-onelayer-error"), reason)
        self.assertEqual(resps[0].header("x-onelayer-forwarded"), "partial")
        self.assertTrue(closed)
        self.assertTrue(wait_until(lambda: self.origin.ends()[-1] != "open", 3.0))
        self.assertEqual(self.origin.ends()[-1], "rst", "the upstream saw a clean end")
        got = self.new_bytes()
        self.assertEqual(got.count(b"POST /p"), 1)
        self.assertFalse(got.endswith(b"0\r\n\r\n"), "a terminal chunk reached the upstream")
        self.assertTrue(wait_until(lambda: any("already forwarded" in l for l in self.proxy.stderr().splitlines()), 3.0),
                        "no log line says the request was partly forwarded")

    def test_malformed_chunk_after_the_body_streamed_resets_the_upstream(self):
        self.assertPartlyForwardedAndReset([
            b"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
            + h.encode_chunked(b"s" * 4096, 2048)[:-5],  # without the terminal chunk
            b"5\r\nhello\r\nZZ\r\n"], 400, "bad_request")

    def test_chunked_body_over_max_body_bytes_after_streaming_resets_the_upstream(self):
        self.assertPartlyForwardedAndReset([
            b"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
            + h.encode_chunked(b"s" * 4096, 2048)[:-5],
            h.encode_chunked(b"t" * 70000, 8192)], 413, "body_too_large")


class AbsoluteFormTest(DesyncTestBase):
    def test_absolute_form_authority_replaces_the_host_header(self):
        _, got = self.assertExactlyOneRequestForwarded(
            b"GET http://public/adm HTTP/1.1\r\nHost: internal.admin\r\n\r\n")
        self.assertIn(b"\r\nHost: public\r\n", got)
        self.assertNotIn(b"internal.admin", got)

    def test_absolute_form_without_host_on_http10_sends_the_authority_as_host(self):
        _, got = self.assertExactlyOneRequestForwarded(b"GET http://public:8080/x HTTP/1.0\r\n\r\n")
        self.assertIn(b"\r\nHost: public:8080\r\n", got)
        self.assertEqual(got.lower().count(b"\r\nhost:"), 1)


class HostRoutesTest(IntegrationTest):
    """A host-based route cannot be reached by naming its host in Host while
    the absolute-form target names another one."""

    def test_absolute_form_routes_by_its_authority_not_by_host(self):
        public = WireOrigin(lambda seen: b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\npublic")
        admin = WireOrigin(lambda seen: b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nadmin")
        self.addCleanup(public.stop)
        self.addCleanup(admin.stop)
        cfg = h.to_yaml({
            "admin": {"listen": "127.0.0.1:0"},
            "listeners": [{"name": "main", "listen": "127.0.0.1:0", "routes": [
                {"name": "admin", "match": {"host": "internal.admin"}, "upstream": "admin"},
                {"name": "public", "match": {"host": "public"}, "upstream": "public"}]}],
            "upstreams": [{"name": "admin", "endpoints": ["127.0.0.1:%d" % admin.port]},
                          {"name": "public", "endpoints": ["127.0.0.1:%d" % public.port]}]})
        proxy = self.start_proxy(cfg + "\n")
        raw, _ = h.raw_exchange(proxy.port(), b"GET http://public/adm HTTP/1.1\r\nHost: internal.admin\r\n\r\n",
                                responses=1)
        resps = responses_of(raw)
        self.assertEqual([r.body for r in resps], [b"public"])
        time.sleep(0.2)
        self.assertEqual(admin.received(), [])
        self.assertIn(b"Host: public\r\n", public.received()[0])


class ContentLengthBoundTest(DesyncTestBase):
    def test_content_length_of_2_to_the_64_minus_1_is_refused(self):
        self.assertRefusedAndNothingForwarded(
            b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551615\r\n\r\n"
            b"GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n")

    def test_content_length_of_2_to_the_63_is_refused(self):
        self.assertRefusedAndNothingForwarded(
            b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775808\r\n\r\n")

    def test_content_length_just_above_2_to_the_53_is_refused(self):
        self.assertRefusedAndNothingForwarded(
            b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 9007199254740992\r\n\r\n")


class UnderscoreDropTest(DesyncTestBase):
    def test_underscore_names_are_dropped_by_default_and_logged(self):
        _, got = self.assertExactlyOneRequestForwarded(
            b"POST /p HTTP/1.1\r\nHost: a\r\nTransfer_Encoding: chunked\r\nContent_Length: 0\r\n"
            b"Content-Length: 5\r\n\r\nhello", method="POST")
        self.assertNotIn(b"_encoding", got.lower())
        self.assertNotIn(b"content_length", got.lower())
        self.assertTrue(got.endswith(b"Content-Length: 5\r\n\r\nhello"), got)
        self.assertTrue(wait_until(lambda: any("underscore" in l for l in self.proxy.stderr().splitlines()), 3.0))


class UnderscoreRejectTest(DesyncTestBase):
    listener = {"headers_with_underscores": "reject"}

    def test_underscore_names_are_refused_with_reject(self):
        self.assertRefusedAndNothingForwarded(
            b"GET / HTTP/1.1\r\nHost: a\r\nX_Real_IP: 1.2.3.4\r\n\r\n", method="GET")


class UnderscoreAllowTest(DesyncTestBase):
    listener = {"headers_with_underscores": "allow"}

    def test_underscore_names_pass_with_allow(self):
        _, got = self.assertExactlyOneRequestForwarded(b"GET / HTTP/1.1\r\nHost: a\r\nX_Real_IP: 1.2.3.4\r\n\r\n")
        self.assertIn(b"\r\nX_Real_IP: 1.2.3.4\r\n", got)


class ResponseShapesTest(IntegrationTest):
    """What the client receives for hostile upstream responses."""

    def client_gets(self, response, request=b"GET /r HTTP/1.1\r\nHost: a\r\n\r\n", method="GET"):
        origin = WireOrigin(lambda seen: response, close_after_answer=b"Connection: close" in response)
        self.addCleanup(origin.stop)
        proxy = self.start_proxy(h.simple_config(origin.port))
        raw, _ = h.raw_exchange(proxy.port(), request, timeout=5, responses=1)
        return raw, proxy

    def test_control_bytes_in_the_reason_phrase_are_replaced_by_the_standard_one(self):
        raw, _ = self.client_gets(b"HTTP/1.1 200 O\x01K\x7f\x1b[31m\r\nContent-Length: 2\r\n\r\nok")
        self.assertTrue(raw.startswith(b"HTTP/1.1 200 OK\r\n"), raw[:80])
        self.assertNotIn(b"\x1b", raw)
        self.assertNotIn(b"\x7f", raw)

    def test_nul_in_the_reason_phrase_is_refused_or_replaced(self):
        raw, _ = self.client_gets(b"HTTP/1.1 200 O\x00K\r\nContent-Length: 2\r\n\r\nok")
        self.assertNotIn(b"\x00", raw)
        status = responses_of(raw)[0].status
        self.assertIn(status, (200, 502))

    def test_clean_reason_phrase_passes_unchanged(self):
        raw, _ = self.client_gets(b"HTTP/1.1 200 All Good Here\r\nContent-Length: 2\r\n\r\nok")
        self.assertTrue(raw.startswith(b"HTTP/1.1 200 All Good Here\r\n"), raw[:80])

    def test_transfer_encoding_gzip_without_chunked_keeps_its_coding(self):
        raw, _ = self.client_gets(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nConnection: close\r\n\r\n"
                                  b"\x1f\x8bGZIPDATA")
        r = responses_of(raw)[0]
        self.assertEqual(r.status, 200)
        codings = [c.strip().lower() for c in ",".join(r.header_all("transfer-encoding")).split(",")]
        self.assertEqual(codings, ["gzip", "chunked"], r.headers)
        self.assertEqual(r.body, b"\x1f\x8bGZIPDATA")

    def test_transfer_encoding_gzip_chunked_keeps_its_coding(self):
        raw, _ = self.client_gets(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                                  b"4\r\n\x1f\x8bGZ\r\n0\r\n\r\n")
        r = responses_of(raw)[0]
        codings = [c.strip().lower() for c in ",".join(r.header_all("transfer-encoding")).split(",")]
        self.assertEqual(codings, ["gzip", "chunked"])
        self.assertEqual(r.body, b"\x1f\x8bGZ")

    def test_transfer_encoding_gzip_to_an_http10_client_is_refused_with_502(self):
        raw, _ = self.client_gets(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nConnection: close\r\n\r\n"
                                  b"\x1f\x8bGZIPDATA", request=b"GET /r HTTP/1.0\r\n\r\n")
        r = responses_of(raw)[0]
        self.assertEqual(r.status, 502)
        self.assertEqual(r.header("x-onelayer-error"), "bad_upstream_response")
        self.assertNotIn(b"GZIPDATA", raw)

    def test_status_600_to_999_is_a_bad_upstream_response(self):
        for status in (600, 799, 999):
            with self.subTest(status=status):
                raw, _ = self.client_gets(b"HTTP/1.1 %d Odd\r\nContent-Length: 2\r\n\r\nok" % status)
                r = responses_of(raw)[0]
                self.assertEqual(r.status, 502)
                self.assertEqual(r.header("x-onelayer-error"), "bad_upstream_response")

    def test_response_content_length_above_2_to_the_53_is_a_bad_upstream_response(self):
        raw, _ = self.client_gets(b"HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\nok")
        r = responses_of(raw)[0]
        self.assertEqual(r.status, 502)
        self.assertEqual(r.header("x-onelayer-error"), "bad_upstream_response")


class PooledConnectionTest(IntegrationTest):
    """Bytes an upstream writes on a pooled connection while it idles get the
    connection dropped: they never become the next request's response."""

    def test_bytes_written_while_idle_never_reach_the_next_request(self):
        origin = WireOrigin(lambda seen: b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nreal")
        self.addCleanup(origin.stop)
        proxy = self.start_proxy(h.simple_config(origin.port))
        raw, _ = h.raw_exchange(proxy.port(), b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\n", responses=1)
        self.assertEqual(responses_of(raw)[0].body, b"real")
        # The upstream writes a whole response nobody asked for on the idle
        # pooled connection.
        origin.send_on(0, b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled")
        self.assertTrue(wait_until(lambda: origin.ends()[0] != "open", 3.0),
                        "the proxy kept a pooled connection that sent unsolicited bytes")
        raw, _ = h.raw_exchange(proxy.port(), b"GET /2 HTTP/1.1\r\nHost: a\r\n\r\n", responses=1)
        self.assertEqual(responses_of(raw)[0].body, b"real")
        self.assertNotIn(b"smuggled", raw)
        self.assertEqual(len(origin.received()), 2, "the second request did not get a new connection")


if __name__ == "__main__":
    unittest.main()
