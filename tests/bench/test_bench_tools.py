"""Unit tests for the benchmark helpers' pure parts (python3 -m unittest)."""
import json
import os
import sys
import tempfile
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util  # noqa: E402
import fleet  # noqa: E402
import grpc_storm  # noqa: E402
import h2_tools  # noqa: E402
import h2_wire  # noqa: E402  (puts tests/integration on the path)
import hpack_reading  # noqa: E402
import load_clients  # noqa: E402
import report  # noqa: E402
import tls_hello  # noqa: E402
import wakeup_trace  # noqa: E402

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


H2LOAD_OUTPUT = """starting benchmark...
spawning thread #0: 16 total client(s). 100000 total requests
Application protocol: h2c
progress: 100% done

finished in 1.79s, 55920.25 req/s, 4.16MB/s
requests: 100000 total, 100000 started, 100000 done, 99990 succeeded, 10 failed, 0 errored, 0 timeout
status codes: 99990 2xx, 0 3xx, 0 4xx, 10 5xx
traffic: 3.86MB (4050771) total, 2.29MB (2400000) headers (space savings 51.02%), 97.66KB (100000) data
                     min         max         mean         sd        +/- sd
time for request:       31us      5.13ms      2.34ms       932us    73.94%
time for connect:       90us       656us       324us       156us    62.50%
"""


class H2loadParsing(unittest.TestCase):
    def test_summary_gives_rps_counts_and_request_time(self):
        r = h2_tools.parse_h2load(H2LOAD_OUTPUT)
        self.assertAlmostEqual(r["rps"], 55920.25)
        self.assertAlmostEqual(r["seconds"], 1.79)
        self.assertEqual((r["requests"], r["succeeded"], r["failed"]), (100000, 99990, 10))
        self.assertEqual((r["status_2xx"], r["non2xx"]), (99990, 10))
        self.assertAlmostEqual(r["mean_ms"], 2.34)
        self.assertAlmostEqual(r["max_ms"], 5.13)

    def test_refused_connection_gives_no_rps(self):
        r = h2_tools.parse_h2load("could not connect to address 127.0.0.1\n")
        self.assertIsNone(r["rps"])
        self.assertIsNone(r["succeeded"])

    def test_cpu_per_request_from_ticks(self):
        us = h2_tools.per_request_us(bench_util.CLK_TCK, 1000)  # one CPU second over 1000 requests
        self.assertAlmostEqual(us, 1000.0)
        self.assertIsNone(h2_tools.per_request_us(5, 0))


class ProcCounters(unittest.TestCase):
    def test_wakeup_interrupts_sum_rescheduling_and_function_calls(self):
        text = ("            CPU0       CPU1\n"
                "   0:         45          0   IO-APIC    2-edge      timer\n"
                " LOC:    1000       2000   Local timer interrupts\n"
                " RES:     300        400   Rescheduling interrupts\n"
                " CAL:      50         60   Function call interrupts\n"
                " TLB:       7          8   TLB shootdowns\n")
        self.assertEqual(bench_util.wakeup_interrupts(text), 810)
        # arm64 names them IPI0 and IPI1.
        text = ("       CPU0       CPU1       CPU2\n"
                "IPI0:    10         20         30       Rescheduling interrupts\n"
                "IPI1:     1          2          3       Function call interrupts\n"
                "IPI2:   100        100        100       CPU stop interrupts\n")
        self.assertEqual(bench_util.wakeup_interrupts(text), 66)
        self.assertEqual(bench_util.wakeup_interrupts(""), None)
        # This machine's own file reads, and counts only up.
        a = bench_util.wakeup_interrupts()
        self.assertIsNotNone(a)
        self.assertGreaterEqual(bench_util.wakeup_interrupts(), a)

    def test_voluntary_switches_count_sleeps(self):
        import time
        me = [os.getpid()]
        before = bench_util.voluntary_switches(me)
        for _ in range(20):
            time.sleep(0.001)  # each one a voluntary switch of this thread
        self.assertGreaterEqual(bench_util.voluntary_switches(me) - before, 20)
        self.assertEqual(bench_util.voluntary_switches([]), 0)


class H2Placements(unittest.TestCase):
    def test_each_placement_says_who_shares_the_first_core(self):
        cpus = {5, 2, 7}  # the first two by number: 2 and 5
        self.assertEqual(bench_util.placement_cpus("proxy+origin", cpus), (2, 2, 5))
        self.assertEqual(bench_util.placement_cpus("proxy+client", cpus), (2, 5, 2))
        self.assertEqual(bench_util.placement_cpus("proxy-alone", cpus), (2, 5, 5))

    def test_unknown_placement_or_one_cpu_is_refused(self):
        with self.assertRaises(ValueError):
            bench_util.placement_cpus("origin+client", {0, 1})
        with self.assertRaises(ValueError):
            bench_util.placement_cpus("proxy-alone", {3})


class H2Frames(unittest.TestCase):
    SERVER_SETTINGS = h2_tools.frame(h2_tools.SETTINGS, 0, 0, bytes.fromhex("000300000080"))
    SETTINGS_ACK = h2_tools.frame(h2_tools.SETTINGS, h2_tools.ACK, 0)

    def test_frame_layout(self):
        self.assertEqual(self.SETTINGS_ACK, bytes.fromhex("000000040100000000"))
        frames, rest = h2_tools.split_frames(self.SERVER_SETTINGS + self.SETTINGS_ACK[:4])
        self.assertEqual(frames, [(4, 0, 0, bytes.fromhex("000300000080"))])
        self.assertEqual(rest, self.SETTINGS_ACK[:4])

    def test_handshake_acks_the_peer_and_waits_for_its_ack(self):
        hs = h2_tools.Handshake()
        data = self.SERVER_SETTINGS + h2_tools.frame(0x8, 0, 0, b"\x00\x00\xff\xff") + self.SETTINGS_ACK
        self.assertEqual(hs.feed(data[:5]), b"")  # a split frame waits for the rest
        self.assertEqual(hs.feed(data[5:20]), self.SETTINGS_ACK)
        self.assertFalse(hs.done)
        hs.feed(data[20:])
        self.assertTrue(hs.done)

    def test_goaway_and_http1_answers_fail(self):
        hs = h2_tools.Handshake()
        hs.feed(self.SERVER_SETTINGS + h2_tools.frame(h2_tools.GOAWAY, 0, 0, bytes(4) + b"\x00\x00\x00\x01"))
        self.assertEqual(hs.error, "GOAWAY 1")
        self.assertFalse(hs.done)
        hs = h2_tools.Handshake()
        hs.feed(b"HTTP/1.1 400 Bad Request\r\n")
        self.assertEqual(hs.error, "answered HTTP/1")


def h2_row(target, rnd, rps, cpu=None, **kw):
    row = {"phase": "h2", "target": target, "round": rnd, "rps": rps, "requests": 100, "succeeded": 100,
           "failed": 0, "errored": 0, "timeout": 0, "non2xx": 0, "mean_ms": 1.0, "max_ms": 2.0,
           "proxy_cpu_us_per_req": cpu, "origin_cpu_us_per_req": 3.0}
    row.update(kw)
    return row


class H2Report(unittest.TestCase):
    SETTINGS = {"h2_connections": "16", "h2_streams": "32", "h2_requests": "100", "h2_rounds": "3",
                "h2_idle_conns": "500"}

    def test_medians_ratios_and_targets(self):
        rows = [h2_row("onelayer", r, v, 5.0) for r, v in ((1, 60.0), (2, 50.0), (3, 70.0))]
        rows += [h2_row("haproxy", r, 50.0, 10.0) for r in (1, 2, 3)]
        rows += [h2_row("nginx", r, 10.0, 40.0) for r in (1, 2, 3)]
        lines, summary = report.h2(rows, self.SETTINGS)
        self.assertEqual(summary["onelayer"]["rps"], 60.0)
        self.assertIn("| req/s | 1.20x | 6.00x |", lines)
        self.assertIn("| CPU per request | 0.50x | 0.12x |", lines)
        mem = {"onelayer": {"bytes_per_conn": 900.0}, "nghttpx": {"bytes_per_conn": 1000.0}}
        verdict = {name: ok for name, _, ok in report.h2_targets(summary, mem)}
        self.assertEqual(verdict["HTTP/2 throughput >= 1.0x HAProxy (1 worker)"], True)
        self.assertEqual(verdict["HTTP/2 throughput >= 1.2x NGINX (1 worker)"], True)
        self.assertIsNone(verdict["HTTP/2 throughput >= 1.0x nghttpx (1 worker)"])
        self.assertEqual(verdict["idle h2c connection memory <= nghttpx's"], True)

    def test_a_pinned_run_says_where_each_process_ran(self):
        rows = [h2_row("onelayer", 1, 60.0, 5.0), h2_row("nghttpx", 1, 50.0, 5.0)]
        lines, _ = report.h2(rows, self.SETTINGS)
        self.assertFalse(any("Pinned" in line for line in lines))
        settings = dict(self.SETTINGS, h2_placement="proxy-alone", h2_placement_cpus="0 1 1")
        lines, _ = report.h2(rows, settings)
        pinned = [line for line in lines if line.startswith("**Pinned")]
        self.assertEqual(len(pinned), 1)
        self.assertIn("`BENCH_H2_PLACEMENT=proxy-alone`", pinned[0])
        self.assertIn("threads ran on CPU 0, the origin's on CPU 1 and h2load on CPU 1", pinned[0])

    def test_kernel_time_and_proxy_sleeps_table(self):
        rows = [h2_row("onelayer", r, 60.0, 5.0, proxy_sys_us_per_req=2.0, origin_sys_us_per_req=v,
                       client_sys_us_per_req=1.2, proxy_sleeps_per_1k_req=z)
                for r, v, z in ((1, 2.9, 19.0), (2, 2.7, 21.0), (3, 2.8, 20.0))]
        rows += [h2_row("nghttpx", r, 60.0, 5.0, proxy_sys_us_per_req=1.8, origin_sys_us_per_req=2.6,
                        client_sys_us_per_req=1.0, proxy_sleeps_per_1k_req=10.5) for r in (1, 2, 3)]
        lines, _ = report.h2(rows, self.SETTINGS)
        # Busy: 5.0 µs per request at 60 req/s is 0.0003 of a CPU; rows
        # recorded before the interrupt count show n/a there.
        self.assertIn("| onelayer | 2.00 | 2.80 | 1.20 | 0.00 | 20.0 | n/a |", lines)
        self.assertIn("| nghttpx | 1.80 | 2.60 | 1.00 | 0.00 | 10.5 | n/a |", lines)
        rows = [h2_row("onelayer", r, 120000.0, 5.5, proxy_sys_us_per_req=2.0, origin_sys_us_per_req=2.8,
                       client_sys_us_per_req=1.2, proxy_sleeps_per_1k_req=20.0, wakeup_interrupts_per_1k_req=w)
                for r, w in ((1, 61.0), (2, 59.0), (3, 60.0))]
        lines, _ = report.h2(rows, self.SETTINGS)
        self.assertIn("| onelayer | 2.00 | 2.80 | 1.20 | 0.66 | 20.0 | 60.0 |", lines)
        # Rows from before these figures were recorded: no table.
        lines, _ = report.h2([h2_row("onelayer", 1, 60.0, 5.0), h2_row("nghttpx", 1, 50.0, 5.0)], self.SETTINGS)
        self.assertFalse(any("proxy sleeps" in line for line in lines))

    def test_median_of_the_round_by_round_ratios_beside_the_ratio_of_medians(self):
        # Medians 100 against 100 (1.00x), but onelayer is ahead in two
        # of three paired rounds: 1.10, 1.05, 0.80 -> median 1.05.
        rows = [h2_row("onelayer", r, v, 5.0) for r, v in ((1, 110.0), (2, 100.0), (3, 80.0))]
        rows += [h2_row("nghttpx", r, v, 5.0) for r, v in ((1, 100.0), (2, 95.0), (3, 100.0))]
        lines, _ = report.h2(rows, self.SETTINGS)
        self.assertIn("| req/s | 1.00x |", lines)
        self.assertIn("| req/s, round by round | 1.10, 1.05, 0.80 |", lines)
        self.assertIn("| req/s, median of the round-by-round ratios | 1.053 |", lines)

    def test_several_runs_pool_their_rounds(self):
        run1 = [h2_row("onelayer", r, v) for r, v in ((1, 90.0), (2, 100.0))]
        run1 += [h2_row("nghttpx", r, 100.0) for r in (1, 2)]
        run2 = [h2_row("onelayer", r, v) for r, v in ((1, 120.0), (2, 110.0), (3, 104.0))]
        run2 += [h2_row("nghttpx", r, 100.0) for r in (1, 2, 3)]
        run3 = [h2_row("nghttpx", 1, 100.0)]  # no onelayer row: left out
        pooled = report.pooled_h2_ratios([run1, run2, run3])
        self.assertEqual(list(pooled), ["nghttpx"])
        self.assertEqual(pooled["nghttpx"]["rounds"], 5)
        # Rounds 0.90, 1.00, 1.20, 1.10, 1.04: median 1.04.
        self.assertAlmostEqual(pooled["nghttpx"]["pooled"], 1.04)
        self.assertEqual([round(a, 3) for a, _ in pooled["nghttpx"]["runs"]], [0.95, 1.1])
        self.assertEqual([round(b, 3) for _, b in pooled["nghttpx"]["runs"]], [0.95, 1.1])
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, rows in enumerate((run1, run2)):
                os.mkdir(os.path.join(d, str(i)))
                with open(os.path.join(d, str(i), "latest.json"), "w") as f:
                    json.dump({"results": rows + [{"phase": "h2mem", "target": "onelayer"}]}, f)
                paths.append(os.path.join(d, str(i)))
            lines = h2_tools.pool_lines(paths)
        self.assertEqual(lines, ["onelayer / nghttpx: 2 runs (ratio of medians/median of round ratios: "
                                 "0.95x/0.950, 1.10x/1.100); 5 rounds pooled: median 1.040"])

    def test_onelayer_without_single_layer_headers_gets_its_row_and_a_ratio_not_a_target(self):
        rows = [h2_row("onelayer", 1, 90.0, 6.0), h2_row("onelayer-plain", 1, 99.0, 5.5),
                h2_row("nghttpx", 1, 100.0, 5.0)]
        lines, summary = report.h2(rows, self.SETTINGS)
        self.assertTrue(any(line.startswith("| onelayer without single-layer headers | 99 |") for line in lines), lines)
        self.assertIn("| req/s | 0.90x |", lines)
        self.assertIn("| req/s without single-layer headers (not a target) | 0.99x |", lines)
        verdict = {name: ok for name, _, ok in report.h2_targets(summary, {})}
        self.assertEqual(verdict["HTTP/2 throughput >= 1.0x nghttpx (1 worker)"], False)

    def test_another_build_gets_its_row_a_ratio_to_onelayer_and_is_not_a_target(self):
        rows = [h2_row("onelayer", 1, 90.0, 6.0), h2_row("onelayer-other", 1, 99.0, 5.4),
                h2_row("onelayer", 2, 100.0, 6.0), h2_row("onelayer-other", 2, 101.0, 5.4),
                h2_row("nghttpx", 1, 100.0, 5.0), h2_row("nghttpx", 2, 100.0, 5.0)]
        settings = dict(self.SETTINGS, h2_other_label="profile-guided build")
        lines, summary = report.h2(rows, settings)
        self.assertTrue(any(line.startswith("| onelayer, profile-guided build | 100 |") for line in lines), lines)
        self.assertIn("| req/s of onelayer, profile-guided build (not a target) | 1.00x |", lines)
        self.assertIn("onelayer, profile-guided build / onelayer: req/s 1.05x (rounds 1.10, 1.01), "
                      "proxy CPU per request 0.90x.", lines)
        # The targets still judge onelayer's own row (95 req/s against 100).
        verdict = {name: ok for name, _, ok in report.h2_targets(summary, {})}
        self.assertEqual(verdict["HTTP/2 throughput >= 1.0x nghttpx (1 worker)"], False)

    def test_load_generator_cpu_and_the_machine_budget_against_each_peer(self):
        rows = [h2_row("onelayer", 1, 90.0, 6.0, origin_cpu_us_per_req=5.5, client_cpu_us_per_req=2.25),
                h2_row("onelayer-plain", 1, 99.0, 5.5, origin_cpu_us_per_req=5.0, client_cpu_us_per_req=2.0),
                h2_row("nghttpx", 1, 100.0, 5.75, origin_cpu_us_per_req=5.0, client_cpu_us_per_req=2.0),
                h2_row("haproxy", 1, 80.0, 7.0, origin_cpu_us_per_req=5.0)]  # no load generator figure
        lines, summary = report.h2(rows, self.SETTINGS)
        self.assertEqual(summary["onelayer"]["client_cpu_us_per_req"], 2.25)
        self.assertTrue(any(line.startswith("| onelayer | 90 | 1.00 ms | 6.00 | 5.50 | 2.25 | 0 |") for line in lines),
                        lines)
        self.assertIn("| onelayer | 6.00 | 5.50 | 2.25 | 13.75 |", lines)
        self.assertIn("| onelayer without single-layer headers | 5.50 | 5.00 | 2.00 | 12.50 |", lines)
        self.assertIn("| onelayer - nghttpx | +0.25 | +0.50 | +0.25 | +1.00 |", lines)
        # A peer without the load generator's figure: its sum is not made up.
        self.assertIn("| HAProxy | 7.00 | 5.00 | n/a | n/a |", lines)
        self.assertIn("| onelayer - HAProxy | -1.00 | +0.50 | n/a | n/a |", lines)

    def test_no_machine_budget_without_the_load_generator_figure(self):
        rows = [h2_row("onelayer", 1, 90.0, 6.0), h2_row("nghttpx", 1, 100.0, 5.0)]
        lines, _ = report.h2(rows, self.SETTINGS)
        self.assertFalse(any("all three" in line for line in lines), lines)

    def test_unavailable_onelayer_gets_a_reason_and_no_figure(self):
        rows = [{"phase": "h2", "target": "onelayer", "unavailable": "refused the h2c config"},
                h2_row("haproxy", 1, 50.0, 10.0)]
        lines, summary = report.h2(rows, self.SETTINGS)
        self.assertIn("| onelayer | not available: refused the h2c config | | | | | | |", lines)
        self.assertIn("| req/s | n/a |", lines)
        self.assertTrue(all(ok is None for _, _, ok in report.h2_targets(summary, {})))

    def test_sanity_flags_failed_h2_requests_but_not_unavailable_rows(self):
        by = {p: [] for p in ("throughput", "workers", "memory", "large", "storm", "h2", "h2mem")}
        by["h2"] = [h2_row("nginx", 1, 10.0, failed=2, succeeded=98),
                    {"phase": "h2", "target": "onelayer", "unavailable": "no"}]
        by["h2mem"] = [{"phase": "h2mem", "target": "onelayer", "unavailable": "no"}]
        problems = report.sanity(by)
        self.assertEqual(len(problems), 1)
        self.assertIn("h2 nginx round 1: 2 errors", problems[0])


class FleetRedisLoad(unittest.TestCase):
    def test_rates_from_two_commandstats_snapshots_leave_out_info(self):
        before = {"evalsha": (10, 1000), "hincrby": (50, 100), "info": (1, 5)}
        after = {"evalsha": (30, 3000), "hincrby": (150, 300), "zadd": (20, 40), "info": (2, 10)}
        scripts, commands, usec = fleet.redis_load(before, after, 10.0)
        self.assertEqual(scripts, 2.0)
        self.assertEqual(commands, 14.0)  # 20 EVALSHA + 100 HINCRBY + 20 ZADD in 10 s
        self.assertEqual(usec, 100.0)

    def test_no_script_calls_gives_no_cost_per_call(self):
        self.assertEqual(fleet.redis_load({}, {"info": (1, 5)}, 1.0), (0.0, 0.0, 0.0))


class OnelayerConfigs(unittest.TestCase):
    def test_protocol_keys_only_when_asked(self):
        plain = bench_util.onelayer_config(8080, "bench", 1, 0)
        self.assertNotIn("protocol", plain)
        self.assertNotIn("idempotent", plain)
        h2 = bench_util.onelayer_config(8080, "bench", 1, 0, listener_protocols=["http1", "h2c"],
                                        upstream_protocol="h2c")
        self.assertIn("    protocols: [http1, h2c]\n", h2)
        self.assertIn("    protocol: h2c\n", h2)

    def test_without_single_layer_headers_the_route_still_retries_but_writes_none(self):
        plain = bench_util.onelayer_config(8080, "bench", 1, 0, single_layer_headers=False)
        self.assertIn("        inner_hops: pass\n", plain)
        self.assertIn("via: false\npropagate_baggage: false\n", plain)
        self.assertIn("max_attempts: 3", plain)
        full = bench_util.onelayer_config(8080, "bench", 1, 0)
        self.assertNotIn("inner_hops", full)
        self.assertNotIn("propagate_baggage", full)

    def test_access_log_off_unless_asked(self):
        # The other proxies run without an access log: so does onelayer.
        self.assertIn("    access_log: false\n", bench_util.onelayer_config(8080, "bench", 1, 0))
        self.assertNotIn("access_log", bench_util.onelayer_config(8080, "bench", 1, 0, access_log=True))

    def test_fleet_block_and_fleet_scope_only_when_asked(self):
        plain = bench_util.onelayer_config(8080, "bench", 1, 0)
        self.assertNotIn("fleet", plain)
        fleet = bench_util.onelayer_config(8080, "bench", 1, 0, fleet_redis_port=6390)
        self.assertIn("\nfleet: { redis: 127.0.0.1:6390,", fleet)
        self.assertIn("min_per_second: 5, scope: fleet, service: origin }\n", fleet)

    def test_grpc_storm_route_retries_unavailable_and_is_idempotent(self):
        cfg = grpc_storm.onelayer_config(9000, "hop1")
        self.assertIn("retry_on: [unavailable, reset, 503]", cfg)
        self.assertIn("idempotent: true", cfg)
        self.assertIn("layer_id: hop1", cfg)


class GrpcStormAnalysis(unittest.TestCase):
    ARGS = types.SimpleNamespace(outage=1.0, lead=0.5, tail=1.0)

    def test_arrivals_per_call_and_statuses(self):
        records = [(0.1 * i, 0.1 * i + 0.01, grpc_storm.UNAVAILABLE) for i in range(10)]
        records.append((1.2, 1.21, grpc_storm.OK))
        arrivals = [(0.1 * i, grpc_storm.UNAVAILABLE) for i in range(10)] + [(0.55, grpc_storm.UNAVAILABLE)]
        r = grpc_storm.analyze(self.ARGS, records, arrivals, 0.0)
        self.assertEqual(r["calls_outage"], 10)
        self.assertEqual(r["arrivals_outage"], 11)
        self.assertAlmostEqual(r["arrivals_per_call"], 1.1)
        self.assertEqual(r["caller_status_outage"], {"UNAVAILABLE": 10})
        self.assertEqual(r["ok_outage"], 0)
        self.assertAlmostEqual(r["recover_s"], 0.2)

    def test_caller_deadline_counts_as_client_error(self):
        self.assertEqual(grpc_storm.as_http_status(grpc_storm.OK), 200)
        self.assertEqual(grpc_storm.as_http_status(grpc_storm.DEADLINE_EXCEEDED), 0)
        self.assertEqual(grpc_storm.as_http_status(grpc_storm.UNAVAILABLE), 1014)

    def test_outage_state_fails_only_inside_the_window(self):
        o = grpc_storm.Outage()
        self.assertEqual(o.arrive(5.0), grpc_storm.OK)
        self.assertEqual(o.arrivals, [])  # not armed: not logged
        o.arm(10.0, 2.0)
        codes = [o.arrive(t) for t in (9.9, 10.0, 11.9, 12.0)]
        self.assertEqual(codes, [0, 14, 14, 0])
        self.assertEqual(len(o.arrivals), 4)

    def test_markdown_rows_and_target(self):
        ok = {"target": "onelayer", "calls_outage": 100, "arrivals_outage": 120, "arrivals_per_call": 1.2,
              "ok_outage": 3, "caller_status_outage": {"OK": 3, "UNAVAILABLE": 97}, "recover_s": 0.1}
        na = {"target": "onelayer3", "unavailable": "refused"}
        md = grpc_storm.markdown([ok, na], {"callers": 100, "call_timeout_s": 5.0, "outage_s": 10.0})
        self.assertIn("| onelayer | 1 | 100 | 120 | **1.20** | 3 | OK 3, UNAVAILABLE 97 | 0.1 s |", md)
        self.assertIn("| onelayer | 3 | not available: refused |", md)
        self.assertIn("depth 1: <= 1.15 server arrivals per call | 1.20 | **not met** |", md)
        self.assertIn("depth 3: <= 1.15 server arrivals per call | n/a | n/a |", md)
        self.assertEqual(grpc_storm.sanity([ok, na]), [])


class H2WireReading(unittest.TestCase):
    """tests/bench/h2_wire.py's reading of what a proxy sends its origin
    (tests/integration/hpack_reading.py for the HPACK part)."""

    def encoded_twice(self):
        enc = h2_wire.hpack.Encoder()
        fields = [(b":method", b"POST"), (b"x-retry-owner", b"bench"),
                  h2_wire.hpack.NeverIndexedHeaderTuple(b"baggage", b"retry-attempt=3b4e0fc34041e69b.1")]
        return enc.encode(fields, huffman=True), enc.encode(fields, huffman=True)

    def test_each_hpack_form_is_named_with_its_bytes(self):
        first, second = self.encoded_twice()
        how = [(r.how(), r.size, r.huffman) for r in hpack_reading.representations(first)]
        self.assertEqual(how[0], ("indexed (static 3)", 1, False))
        self.assertEqual(how[1][0], "with indexing, name literal")
        self.assertTrue(how[1][2])
        self.assertEqual(how[2][0], "never indexed, name literal")
        self.assertEqual(sum(size for _, size, _ in how), len(first))
        # Sent again, the indexed field is one byte; the never-indexed one is not.
        how = [(r.how(), r.size) for r in hpack_reading.representations(second)]
        self.assertEqual(how[:2], [("indexed (static 3)", 1), ("indexed (dynamic 62)", 1)])
        self.assertEqual(how[2][0], "never indexed, name literal")
        self.assertEqual(sum(size for _, size in how), len(second))

    def test_static_name_without_indexing_and_table_size_update(self):
        # A size update (4096: 0x3f 0xe1 0x1f) carries no field; content-length
        # (static 28: 15 + 13 on a 4-bit prefix) without indexing, "64" raw.
        block = bytes([0x3F, 0xE1, 0x1F, 0x0F, 0x0D, 0x02]) + b"64"
        reps = hpack_reading.representations(block)
        self.assertEqual(len(reps), 1)
        self.assertEqual((reps[0].how(), reps[0].size, reps[0].huffman),
                         ("without indexing, name static 28", 5, False))
        with self.assertRaises(ValueError):
            hpack_reading.representations(block[:-1])

    def test_client_side_joins_padded_headers_and_continuation(self):
        first, second = self.encoded_twice()
        frames = [h2_tools.frame(h2_tools.SETTINGS, 0, 0),
                  h2_tools.frame(h2_wire.HEADERS, h2_wire.END_HEADERS | hpack_reading.HEADERS_PADDED | hpack_reading.HEADERS_PRIORITY, 1,
                                 bytes([3]) + bytes(5) + first + bytes(3)),
                  h2_tools.frame(h2_wire.DATA, 0x1, 1, b"p" * 64),
                  h2_tools.frame(h2_wire.HEADERS, 0, 3, second[:4]),
                  h2_tools.frame(h2_wire.CONTINUATION, h2_wire.END_HEADERS, 3, second[4:]),
                  h2_tools.frame(h2_wire.DATA, 0x1, 3, b"p" * 64)]
        side = h2_wire.ClientSide(decode=10)
        wire = h2_tools.PREFACE + b"".join(frames)
        for i in range(len(wire)):
            side.feed(wire[i:i + 1])
        self.assertEqual(side.bytes, len(wire) - len(h2_tools.PREFACE))
        self.assertEqual(side.frames[h2_wire.HEADERS], 2)
        self.assertEqual(side.frames[h2_wire.CONTINUATION], 1)
        self.assertEqual(side.frames[h2_wire.DATA], 2)
        self.assertEqual(side.blocks, 2)
        self.assertEqual(side.block_bytes, len(first) + len(second))
        names = [(n, v, r.form) for n, v, r in side.last_block]
        self.assertEqual(names, [(":method", "POST", "indexed"), ("x-retry-owner", "bench", "indexed"),
                                 ("baggage", "retry-attempt=3b4e0fc34041e69b.1", "never indexed")])

    def test_client_side_refuses_what_is_not_http2(self):
        with self.assertRaises(ValueError):
            h2_wire.ClientSide().feed(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")




def trace_line(t_us, cpu, comm, event, text):
    return f"{comm:>16} 100 [{cpu:03d}] {1000 + t_us / 1e6:.6f}: {event}: {text}"


def switch(t_us, cpu, prev, state, nxt):
    return trace_line(t_us, cpu, prev, "sched:sched_switch",
                      f"prev_comm={prev} prev_pid=1 prev_prio=120 prev_state={state} ==> next_comm={nxt} next_pid=2 next_prio=120")


def ipi(t_us, cpu, comm, target):
    return trace_line(t_us, cpu, comm, "ipi:ipi_send_cpu", f"cpu={target} callsite=ttwu_queue_wakelist+0x11d callback=0x0")


def writev(t_us, cpu, comm):
    return trace_line(t_us, cpu, comm, "syscalls:sys_enter_writev", "fd: 0x00000006, vec: 0x7ffd, vlen: 0x00000001")


class WakeupTrace(unittest.TestCase):
    def test_who_woke_the_proxy_and_whether_it_slept_before_h2load_answered(self):
        # Proxy on CPU 0, h2load and the origin on CPU 1, over one second.
        # Round 1: the proxy interrupts CPU 1 at 100 µs (its write woke
        # h2load), sleeps at 130, h2load writes at 150 and wakes it (an
        # interrupt to CPU 0 from h2load). Round 2: it interrupts at 500,
        # h2load writes at 540 while the proxy is still busy, and the proxy
        # sleeps at 600; nginx wakes it at 700.
        lines = [
            switch(0, 0, "swapper/0", "R", "onelayer"),
            ipi(100, 0, "onelayer", 1),
            switch(130, 0, "onelayer", "S", "swapper/0"),
            writev(150, 1, "h2load"),
            ipi(151, 1, "h2load", 0),
            switch(160, 0, "swapper/0", "R", "onelayer"),
            ipi(500, 0, "onelayer", 1),
            writev(540, 1, "h2load"),
            switch(600, 0, "onelayer", "S", "swapper/0"),
            ipi(700, 1, "nginx", 0),
            switch(710, 0, "swapper/0", "R", "onelayer"),
            writev(900, 1, "nginx"),  # not h2load: not counted
            trace_line(1_000_000, 1, "perf", "sched:sched_switch",
                       "prev_comm=perf prev_pid=3 prev_prio=120 prev_state=S ==> next_comm=nginx next_pid=4 next_prio=120"),
        ]
        s = wakeup_trace.summarize(wakeup_trace.parse(lines), "onelayer", 0, 1)
        self.assertAlmostEqual(s["seconds"], 1.0, places=6)
        self.assertAlmostEqual(s["proxy_sleeps_per_s"], 2.0, places=3)
        self.assertEqual(list(s["wakeups_of_proxy_cpu_per_s"]), ["h2load", "nginx"])
        self.assertAlmostEqual(s["wakeups_of_proxy_cpu_per_s"]["h2load"], 1.0, places=3)
        self.assertAlmostEqual(s["proxy_interrupts_of_peer_cpu_per_s"], 2.0, places=3)
        self.assertEqual(s["writer_writes_after_proxy_interrupt"], 2)
        self.assertAlmostEqual(s["proxy_asleep_at_writer_write"], 0.5)
        self.assertAlmostEqual(s["median_us_to_writer_write"], 45.0, places=3)  # 50 and 40
        self.assertAlmostEqual(s["median_us_to_proxy_sleep"], 65.0, places=3)  # 30 and 100
        text = "\n".join(wakeup_trace.describe("onelayer", s))
        self.assertIn("h2load 1/s, nginx 1/s", text)
        self.assertIn("asleep at that write 50% of 2 times", text)
        self.assertIsNone(wakeup_trace.summarize(wakeup_trace.parse(lines[:1]), "onelayer", 0, 1))


class TlsHelloReading(unittest.TestCase):
    def client_hello(self, groups=None):
        """The first flight of Python's own TLS client (OpenSSL, memory BIOs)."""
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = ctx.wrap_bio(incoming, outgoing, server_hostname="origin.test")
        with self.assertRaises(ssl.SSLWantReadError):
            obj.do_handshake()
        return outgoing.read()

    def test_client_hello_key_shares_and_groups(self):
        msg = tls_hello.first_handshake_message(self.client_hello())
        self.assertEqual(msg[0], 1)
        hello = tls_hello.parse_client_hello(msg[1])
        self.assertTrue(hello["key_shares"])
        self.assertIn(hello["key_shares"][0], hello["groups"])
        self.assertFalse(hello["psk"])
        self.assertIn("psk_dhe_ke", hello["psk_modes"])

    def test_incomplete_record_is_none(self):
        data = self.client_hello()
        self.assertIsNone(tls_hello.first_handshake_message(data[:20]))
        self.assertIsNone(tls_hello.first_handshake_message(b"GET / HTTP/1.1\r\n"))

    def server_hello(self, random, extensions):
        ext = b"".join(t.to_bytes(2, "big") + len(d).to_bytes(2, "big") + d for t, d in extensions)
        return (b"\x03\x03" + random + b"\x20" + bytes(32) + b"\x13\x01\x00" +
                len(ext).to_bytes(2, "big") + ext)

    def test_hello_retry_request_and_resumption(self):
        hrr = self.server_hello(tls_hello.HRR_RANDOM, [(51, b"\x00\x1d"), (43, b"\x03\x04")])
        self.assertEqual(tls_hello.parse_server_hello(hrr), {"hrr": True, "resumed": False, "group": "x25519"})
        resumed = self.server_hello(bytes(32), [(51, b"\x00\x17\x00\x01\x04"), (41, b"\x00\x00")])
        self.assertEqual(tls_hello.parse_server_hello(resumed), {"hrr": False, "resumed": True, "group": "secp256r1"})
        line = tls_hello.describe({"key_shares": ["x25519"], "groups": ["x25519", "secp256r1"], "psk": True,
                                   "psk_modes": ["psk_dhe_ke"]}, tls_hello.parse_server_hello(resumed))
        self.assertEqual(line, "key_shares=x25519 groups=x25519,secp256r1 psk=yes(psk_dhe_ke) "
                               "hrr=no resumed=yes group=secp256r1")


if __name__ == "__main__":
    unittest.main()
