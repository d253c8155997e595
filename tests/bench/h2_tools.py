#!/usr/bin/env python3
"""HTTP/2 helpers for the h2 phase of tests/bench/run.sh (standard library only).

  h2load       run h2load once (16 connections x 32 streams of small POSTs by
               default) and sample the CPU time of the proxy's and the
               origin's processes around it, and take h2load's own from its
               resource usage; prints one JSON line
  idle         open N cleartext HTTP/2 connections (preface, SETTINGS, ACK of
               the peer's SETTINGS, nothing else), hold them, and report the
               proxy's RSS before and with them; prints one JSON line
  probe        one POST over h2c; exit 0 when it is answered 2xx
  unavailable  print the JSON line of a row that could not be measured
  pool         read several runs' results (their --out directories or
               latest.json files) and print onelayer's req/s over each
               peer's per run and over all their rounds pooled (the median
               of the round-by-round ratios): on a noisy host one run moves
               by more than a few percent either way
"""
import argparse
import asyncio
import json
import os
import re
import resource
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util  # noqa: E402
import load_clients  # noqa: E402
import report  # noqa: E402

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FRAME_HEADER = 9
SETTINGS, GOAWAY = 0x4, 0x7
ACK = 0x1


# ---------------------------------------------------------------- frames

def frame(kind, flags, stream, payload=b""):
    """One HTTP/2 frame (RFC 9113 4.1): 24-bit length, type, flags, stream id."""
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def split_frames(buf):
    """(frames, rest): the complete frames at the front of buf as
    (type, flags, stream id, payload), and the bytes of an incomplete one."""
    frames, pos = [], 0
    while len(buf) - pos >= FRAME_HEADER:
        length = int.from_bytes(buf[pos:pos + 3], "big")
        if len(buf) - pos < FRAME_HEADER + length:
            break
        kind, flags = buf[pos + 3], buf[pos + 4]
        stream = int.from_bytes(buf[pos + 5:pos + 9], "big") & 0x7FFFFFFF
        frames.append((kind, flags, stream, bytes(buf[pos + FRAME_HEADER:pos + FRAME_HEADER + length])))
        pos += FRAME_HEADER + length
    return frames, bytes(buf[pos:])


class Handshake:
    """The client side of an HTTP/2 connection set-up, fed the peer's bytes:
    done once the peer's SETTINGS came (and was acknowledged) and the peer
    acknowledged ours; failed on GOAWAY or on bytes that are not HTTP/2."""

    def __init__(self):
        self.buf = b""
        self.peer_settings = False
        self.our_settings_acked = False
        self.error = None

    def feed(self, data):
        """Bytes to send back (the ACK of the peer's SETTINGS), possibly empty."""
        self.buf += data
        if not self.peer_settings and self.buf.startswith(b"HTTP/"):
            self.error = "answered HTTP/1"
            return b""
        frames, self.buf = split_frames(self.buf)
        out = b""
        for kind, flags, stream, payload in frames:
            if kind == GOAWAY:
                code = int.from_bytes(payload[4:8], "big") if len(payload) >= 8 else None
                self.error = f"GOAWAY {code}"
            elif kind == SETTINGS and stream == 0:
                if flags & ACK:
                    self.our_settings_acked = True
                else:
                    self.peer_settings = True
                    out += frame(SETTINGS, ACK, 0)
        return out

    @property
    def done(self):
        return self.error is None and self.peer_settings and self.our_settings_acked


# ---------------------------------------------------------------- h2load

_H2LOAD_TIME = r"([0-9.]+(?:us|ms|s))"


def parse_h2load(text):
    """The figures of h2load's summary (nghttp2 1.52): req/s, request counts,
    status classes and the per-request time (mean and max, ms)."""
    out = {"rps": None, "seconds": None, "requests": None, "succeeded": None, "failed": None,
           "errored": None, "timeout": None, "status_2xx": None, "non2xx": None,
           "mean_ms": None, "max_ms": None}
    m = re.search(r"finished in " + _H2LOAD_TIME + r", ([0-9.]+) req/s", text)
    if m:
        out["seconds"] = bench_util.to_ms(m.group(1)) / 1e3
        out["rps"] = float(m.group(2))
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored, (\d+) timeout", text)
    if m:
        total, _, _, ok, failed, errored, timeout = (int(x) for x in m.groups())
        out.update(requests=total, succeeded=ok, failed=failed, errored=errored, timeout=timeout)
    m = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
    if m:
        codes = [int(x) for x in m.groups()]
        out["status_2xx"] = codes[0]
        out["non2xx"] = sum(codes[1:])
    m = re.search(r"time for request:\s+" + _H2LOAD_TIME + r"\s+" + _H2LOAD_TIME + r"\s+" + _H2LOAD_TIME, text)
    if m:
        out["max_ms"] = bench_util.to_ms(m.group(2))
        out["mean_ms"] = bench_util.to_ms(m.group(3))
    return out


def per_request_us(ticks, requests):
    """CPU microseconds per request from clock ticks over a run."""
    if ticks is None or not requests:
        return None
    return ticks / bench_util.CLK_TCK / requests * 1e6


def children_cpu_split():
    """(user, system) seconds of this process's children that have been
    waited for: around one subprocess.run, what that child (and its
    threads) used."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime, r.ru_stime


def run_h2load(args):
    proxy = bench_util.tree_pids(args.pid) if args.pid else []
    origin = bench_util.tree_pids(args.origin_pid) if args.origin_pid else []
    cmd = ["h2load", "-c", str(args.connections), "-m", str(args.streams), "-t", str(args.threads),
           "-n", str(args.requests), "-d", args.body, args.url]
    p0, o0 = bench_util.cpu_split(proxy), bench_util.cpu_split(origin)
    c0 = children_cpu_split()
    sleeps0 = bench_util.voluntary_switches(proxy)
    wakes0 = bench_util.wakeup_interrupts()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.max_seconds)
        text, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc = "timeout"
    sleeps1 = bench_util.voluntary_switches(proxy)
    wakes1 = bench_util.wakeup_interrupts()
    p1, o1 = bench_util.cpu_split(proxy), bench_util.cpu_split(origin)
    c1 = children_cpu_split()
    res = parse_h2load(text)
    done = res["succeeded"] or 0
    res.update(phase=args.phase, target=args.target, round=args.round, h2load_rc=rc,
               connections=args.connections, streams=args.streams,
               proxy_cpu_us_per_req=per_request_us(sum(p1) - sum(p0), done) if proxy else None,
               origin_cpu_us_per_req=per_request_us(sum(o1) - sum(o0), done) if origin else None,
               client_cpu_us_per_req=(sum(c1) - sum(c0)) / done * 1e6 if done else None,
               # The kernel's part of each (system time), and how often the
               # proxy went to sleep: on a virtual machine a process that
               # writes to a sleeping one pays for waking its CPU.
               proxy_sys_us_per_req=per_request_us(p1[1] - p0[1], done) if proxy else None,
               origin_sys_us_per_req=per_request_us(o1[1] - o0[1], done) if origin else None,
               client_sys_us_per_req=(c1[1] - c0[1]) / done * 1e6 if done else None,
               proxy_sleeps_per_1k_req=(sleeps1 - sleeps0) * 1000 / done if proxy and done else None,
               # The wake-ups those sleeps cost, as the interrupts CPUs
               # sent each other (machine-wide: the load is all there is).
               wakeup_interrupts_per_1k_req=(wakes1 - wakes0) * 1000 / done
               if done and wakes0 is not None and wakes1 is not None else None)
    if args.raw:
        with open(args.raw, "w") as f:
            f.write(" ".join(cmd) + "\n" + text)
    print(json.dumps(res))
    return 0 if res["rps"] is not None and rc == 0 else 1


def probe(args):
    cmd = ["h2load", "-c", "1", "-n", "1", "-d", args.body, args.url]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        print("probe: h2load timed out", file=sys.stderr)
        return 1
    res = parse_h2load(proc.stdout)
    if res["status_2xx"] != 1:
        print(f"probe: {args.url}: {res}\n{proc.stdout[-600:]}", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------- idle

async def idle(args):
    hello = PREFACE + frame(SETTINGS, 0, 0)

    async def connect():
        r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", args.port), 5)
        w.write(hello)
        hs = Handshake()
        deadline = time.monotonic() + 5
        while not hs.done and hs.error is None:
            data = await asyncio.wait_for(r.read(65536), max(0.01, deadline - time.monotonic()))
            if not data:
                hs.error = "closed"
                break
            w.write(hs.feed(data))
        if hs.error:
            w.close()
            raise load_clients.ConnectFailed(hs.error)
        return r, w

    res = {"phase": "h2mem", "target": args.target}
    res.update(await load_clients.hold_connections(args, connect))
    return res


# ---------------------------------------------------------------- pool

def load_h2_rows(path):
    """The h2 phase's rows of one run: its --out directory or latest.json."""
    if os.path.isdir(path):
        path = os.path.join(path, "latest.json")
    with open(path) as f:
        return [r for r in json.load(f)["results"] if r.get("phase") == "h2"]


def pool_lines(paths, targets=("onelayer", "onelayer-plain", "onelayer-other")):
    runs = [load_h2_rows(p) for p in paths]
    lines = []
    for target in targets:
        for peer, e in report.pooled_h2_ratios(runs, target).items():
            per_run = ", ".join(f"{report.fmt(a, 2)}x/{report.fmt(b, 3)}" for a, b in e["runs"])
            lines.append(f"{target} / {peer}: {len(e['runs'])} runs (ratio of medians/median of round "
                         f"ratios: {per_run}); {e['rounds']} rounds pooled: median {report.fmt(e['pooled'], 3)}")
    return lines


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("h2load")
    p.add_argument("--url", required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--body", required=True, help="file sent as each POST's body (h2load -d)")
    p.add_argument("--round", type=int, default=0)
    p.add_argument("--pid", type=int, default=0, help="proxy root pid (0: none)")
    p.add_argument("--origin-pid", type=int, default=0)
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--streams", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--requests", type=int, default=300000)
    p.add_argument("--max-seconds", type=float, default=120)
    p.add_argument("--raw", help="file for the raw h2load output")
    p.add_argument("--phase", default="h2")
    p = sub.add_parser("idle")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--n", type=int, default=500)
    p.add_argument("--parallel", type=int, default=100)
    p.add_argument("--settle", type=float, default=1.0)
    p = sub.add_parser("probe")
    p.add_argument("--url", required=True)
    p.add_argument("--body", required=True)
    p = sub.add_parser("unavailable")
    p.add_argument("--phase", required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--reason", required=True)
    p = sub.add_parser("pool")
    p.add_argument("runs", nargs="+", help="run.sh --out directories or their latest.json")
    a = ap.parse_args()
    if a.cmd == "pool":
        lines = pool_lines(a.runs)
        print("\n".join(lines) if lines else "no onelayer and peer rows with req/s in these runs")
        return 0 if lines else 1
    if a.cmd == "h2load":
        return run_h2load(a)
    if a.cmd == "probe":
        return probe(a)
    if a.cmd == "idle":
        print(json.dumps(asyncio.run(idle(a))))
        return 0
    print(json.dumps({"phase": a.phase, "target": a.target, "unavailable": a.reason}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
