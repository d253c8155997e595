"""Unit tests for the benchmark helpers' pure parts (python3 -m unittest)."""
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util  # noqa: E402
import load_clients  # noqa: E402

WRK_OUTPUT = """Running 10s test @ http://127.0.0.1:8080/small.txt
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.79ms    2.10ms  52.31ms   91.12%
    Req/Sec    18.41k     2.02k   23.10k    70.50%
  Latency Distribution
     50%  842.00us
     75%    1.91ms
     90%    3.88ms
     99%   10.52ms
  366412 requests in 10.01s, 110.88MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 7
Requests/sec:  36605.79
Transfer/sec:     11.08MB
"""


class WrkParsing(unittest.TestCase):
    def test_wrk_output_gives_rps_percentiles_and_errors(self):
        r = bench_util.parse_wrk(WRK_OUTPUT)
        self.assertAlmostEqual(r["rps"], 36605.79)
        self.assertAlmostEqual(r["p50_ms"], 0.842)
        self.assertAlmostEqual(r["p99_ms"], 10.52)
        self.assertEqual(r["requests"], 366412)
        self.assertAlmostEqual(r["duration_s"], 10.01)
        self.assertEqual(r["socket_errors"], 3)
        self.assertEqual(r["non2xx"], 7)

    def test_latency_units_convert_to_milliseconds(self):
        self.assertAlmostEqual(bench_util.to_ms("250us"), 0.25)
        self.assertAlmostEqual(bench_util.to_ms("1.5s"), 1500.0)
        self.assertAlmostEqual(bench_util.to_ms("2m"), 120000.0)
        self.assertIsNone(bench_util.to_ms("fast"))

    def test_empty_output_gives_no_rps(self):
        self.assertIsNone(bench_util.parse_wrk("unable to connect")["rps"])


class ResponseHeads(unittest.TestCase):
    def test_head_with_length_and_close(self):
        head = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 12\r\nConnection: close"
        self.assertEqual(load_clients.parse_head(head), (503, 12, False, True))

    def test_chunked_head_has_no_length(self):
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked"
        self.assertEqual(load_clients.parse_head(head), (200, None, True, False))


class StormAnalysis(unittest.TestCase):
    ARGS = types.SimpleNamespace(outage=1.0, lead=0.5, tail=1.0)

    def test_three_arrivals_per_request_during_outage(self):
        records = [(0.1 * i, 0.1 * i + 0.01, 503) for i in range(10)]
        arrivals = [(0.1 * i + 0.001 * k, 503) for i in range(10) for k in range(3)]
        r = load_clients.storm_analyze(self.ARGS, records, arrivals, 0.0)
        self.assertEqual(r["downstream_outage"], 10)
        self.assertEqual(r["arrivals_outage"], 30)
        self.assertAlmostEqual(r["arrivals_per_request"], 3.0)

    def test_recovery_is_first_bucket_that_stays_healthy(self):
        # After the outage ends at t=1.0: failures until 1.3, then only 200s.
        records = [(1.0 + 0.05 * i, 1.0 + 0.05 * i + 0.01, 503 if i < 6 else 200) for i in range(20)]
        r = load_clients.storm_analyze(self.ARGS, records, [], 0.0)
        self.assertAlmostEqual(r["recover_s"], 0.3)

    def test_no_recovery_when_the_last_bucket_fails(self):
        records = [(1.0 + 0.05 * i, 1.0 + 0.05 * i + 0.01, 200 if i < 10 else 503) for i in range(20)]
        r = load_clients.storm_analyze(self.ARGS, records, [], 0.0)
        self.assertIsNone(r["recover_s"])


if __name__ == "__main__":
    unittest.main()
