"""The bundled demo upstream answers each documented path as README and the
other integration tests expect, and exits 0 on SIGTERM."""

import os
import signal
import socket
import subprocess
import tempfile
import time
import unittest

DEMO = os.environ.get("ONELAYER_DEMO_BIN", "onelayer-demo-upstream")


def read_response(sock, buf=b""):
    """Reads one Content-Length framed response; returns (status, headers, body, rest)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed before a response head")
        buf += chunk
    head, _, buf = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(buf) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed inside a body")
        buf += chunk
    return status, headers, buf[:length], buf[length:]


class DemoUpstreamTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        ports = os.path.join(self.tmp.name, "ports")
        self.proc = subprocess.Popen([DEMO, "--listen", "127.0.0.1:0", "--ports-file", ports],
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while not os.path.exists(ports):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.fail("demo upstream did not start")
            time.sleep(0.02)
        with open(ports) as f:
            name, port = f.read().split()
        self.assertEqual(name, "demo")
        self.port = int(port)

    def tearDown(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stderr.close()
        self.tmp.cleanup()

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=20)
        self.addCleanup(s.close)
        return s

    def get(self, path, extra=b""):
        s = self.connect()
        s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: demo\r\n" + extra + b"\r\n")
        status, headers, body, _ = read_response(s)
        return status, headers, body

    def test_hello_answers_200_with_its_greeting(self):
        status, _, body = self.get("/hello")
        self.assertEqual(status, 200)
        self.assertEqual(body, b"hello from the demo upstream\n")

    def test_flaky_fails_twice_then_succeeds_in_every_three(self):
        statuses = [self.get("/flaky")[0] for _ in range(6)]
        self.assertEqual(statuses, [503, 503, 200, 503, 503, 200])

    def test_status_path_answers_that_status_and_rejects_bad_codes(self):
        self.assertEqual(self.get("/status/502")[0], 502)
        self.assertEqual(self.get("/status/99")[0], 400)

    def test_retry_after_answers_503_with_the_header(self):
        status, headers, _ = self.get("/retry-after?s=7")
        self.assertEqual(status, 503)
        self.assertEqual(headers.get("retry-after"), "7")

    def test_headers_lists_the_request_headers(self):
        status, _, body = self.get("/headers", b"x-retry-owner: orders\r\n")
        self.assertEqual(status, 200)
        self.assertIn(b"x-retry-owner: orders\n", body)
        self.assertTrue(body.startswith(b"GET /headers HTTP/1.1\n"))

    def test_echo_returns_a_chunked_body_for_any_method(self):
        s = self.connect()
        s.sendall(b"PATCH /echo HTTP/1.1\r\nHost: demo\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
        status, _, body, _ = read_response(s)
        self.assertEqual(status, 200)
        self.assertEqual(body, b"hello world")

    def test_unknown_path_is_404(self):
        self.assertEqual(self.get("/nope")[0], 404)

    def test_pipelined_requests_behind_a_slow_one_are_answered_in_order(self):
        s = self.connect()
        s.sendall(b"GET /slow?ms=50 HTTP/1.1\r\nHost: d\r\n\r\n"
                  b"GET /hello HTTP/1.1\r\nHost: d\r\n\r\n"
                  b"GET /status/201 HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n")
        first = read_response(s)
        second = read_response(s, first[3])
        third = read_response(s, second[3])
        self.assertEqual([first[0], second[0], third[0]], [200, 200, 201])
        self.assertEqual(first[2], b"slept 50 ms\n")
        self.assertEqual(third[1].get("connection"), "close")
        self.assertEqual(third[3] + s.recv(1), b"")  # closed after the last answer

    def test_malformed_request_gets_400_and_close(self):
        s = self.connect()
        s.sendall(b"GET / HTTP/9.9\r\n\r\n")
        status, headers, _, _ = read_response(s)
        self.assertEqual(status, 400)
        self.assertEqual(headers.get("connection"), "close")

    def test_head_over_64_kib_gets_431_and_close(self):
        s = self.connect()
        s.sendall(b"GET /hello HTTP/1.1\r\nHost: d\r\nX-Big: " + b"x" * (65 * 1024) + b"\r\n\r\n")
        status, headers, _, _ = read_response(s)
        self.assertEqual(status, 431)
        self.assertEqual(headers.get("connection"), "close")

    def test_upgrade_request_is_answered_then_the_connection_closes(self):
        s = self.connect()
        # It never switches protocols: the pipelined request goes unanswered.
        s.sendall(b"GET /hello HTTP/1.1\r\nHost: d\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
                  b"GET /status/201 HTTP/1.1\r\nHost: d\r\n\r\n")
        status, _, body, rest = read_response(s)
        self.assertEqual(status, 200)
        self.assertEqual(body, b"hello from the demo upstream\n")
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        self.assertEqual(rest, b"")

    def test_sigterm_exits_zero(self):
        self.assertEqual(self.get("/hello")[0], 200)
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=20), 0)


if __name__ == "__main__":
    unittest.main()
