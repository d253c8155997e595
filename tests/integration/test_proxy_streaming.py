"""Large bodies stream through onelayer with bounded memory: 200 MiB
each way, the proxy's peak RSS (VmHWM) under 64 MiB. Neither the client nor
the origin holds a body in memory: data is generated from a repeating block
and checked by length and sha256. The consumer on the far side is made a bit
slower than the producer, so a proxy without backpressure would buffer."""

import os
import hashlib
import socket
import time
import unittest

import harness as h
from harness import IntegrationTest

MIB = 1024 * 1024
TOTAL = 200 * MIB
PEAK_LIMIT_KB = 64 * 1024
# Under AddressSanitizer the process starts far larger (shadow memory, the
# quarantine), so the sanitizer run bounds the growth over the start instead.
SANITIZED = os.environ.get("ONELAYER_SANITIZED") == "1"


class StreamingTest(IntegrationTest):
    def start(self, **origin_kwargs):
        self.origin = self.start_origin(record_limit=0, **origin_kwargs)
        self.proxy = self.proxy_for(self.origin, timeout="120s")
        self.start_rss_kb = self.proxy.rss_kb()
        return self.proxy.port()

    def report(self, what, seconds):
        peak = self.proxy.peak_rss_kb()
        print("\n%s: %d MiB in %.2fs (%.0f MiB/s); onelayer VmHWM %d KiB (limit %d KiB)"
              % (what, TOTAL // MIB, seconds, TOTAL / MIB / seconds, peak, PEAK_LIMIT_KB))
        if SANITIZED:
            self.assertLess(peak - self.start_rss_kb, PEAK_LIMIT_KB,
                            "peak RSS %d KiB, %d KiB at start" % (peak, self.start_rss_kb))
        else:
            self.assertLess(peak, PEAK_LIMIT_KB, "peak RSS %d KiB" % peak)

    def upload(self, chunked):
        port = self.start(recv_throttle=(MIB, 0.01))
        block = h.pattern_block()
        headers = [("Transfer-Encoding", "chunked")] if chunked else [("Content-Length", str(TOTAL))]
        t0 = time.monotonic()
        with h.Conn(port, timeout=60) as c:
            c.send(h.build_request("POST", "/upload", headers))
            sent = 0
            while sent < TOTAL:
                n = min(len(block), TOTAL - sent)
                if chunked:
                    c.send(b"%x\r\n" % n + block[:n] + b"\r\n")
                else:
                    c.send(block[:n])
                sent += n
            if chunked:
                c.send(b"0\r\n\r\n")
            r = c.read_response("POST")
        elapsed = time.monotonic() - t0
        self.assertEqual((r.status, r.body), (200, b"ok"))
        a = self.origin.wait_for(1)[0]
        self.assertTrue(a.body_complete)
        self.assertEqual(a.body_len, TOTAL)
        self.assertEqual(a.body_sha256, h.pattern_digest(TOTAL))
        self.report("upload (%s)" % ("chunked" if chunked else "content-length"), elapsed)

    def download(self, chunked):
        port = self.start(script=[h.stream_response(TOTAL, chunked=chunked)])
        digest = hashlib.sha256()
        got = [0]

        def slow_sink(data):
            digest.update(data)
            before = got[0]
            got[0] += len(data)
            if got[0] // MIB != before // MIB:
                time.sleep(0.01)

        t0 = time.monotonic()
        with h.Conn(port, timeout=60) as c:
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
            c.send(h.build_request("GET", "/download"))
            r = c.read_response("GET", sink=slow_sink)
        elapsed = time.monotonic() - t0
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body_len, TOTAL)
        self.assertEqual(digest.hexdigest(), h.pattern_digest(TOTAL))
        self.report("download (%s)" % ("chunked" if chunked else "content-length"), elapsed)

    def test_200mib_request_body_streams_with_peak_rss_under_64mib(self):
        self.upload(chunked=False)

    def test_200mib_chunked_request_body_streams_with_peak_rss_under_64mib(self):
        self.upload(chunked=True)

    def test_200mib_response_body_streams_with_peak_rss_under_64mib(self):
        self.download(chunked=False)

    def test_200mib_chunked_response_body_streams_with_peak_rss_under_64mib(self):
        self.download(chunked=True)


if __name__ == "__main__":
    unittest.main()
