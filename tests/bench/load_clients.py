#!/usr/bin/env python3
"""Load clients for tests/bench/run.sh (standard library only).

  idle   open N keep-alive connections, one request each, hold them, and
         report the proxy's RSS before and with them (per-connection bytes)
  body   fetch a large response K times on one keep-alive connection and
         report MB/s and the proxy's peak RSS (VmHWM, reset first)
  storm  200 paced clients through a proxy chain in front of storm_origin.py;
         report origin arrivals per downstream request during the outage,
         time to recover, and a timeline in 100 ms buckets

Each prints one JSON object on stdout.
"""
import argparse
import asyncio
import json
import os
import random
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util  # noqa: E402


def request_bytes(path, host="bench"):
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: onelayer-bench\r\n\r\n".encode()


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def parse_head(head):
    """Status, content length (None if absent), chunked?, close?"""
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length, chunked, close = None, False, False
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding" and "chunked" in value:
            chunked = True
        elif name == "connection" and "close" in value:
            close = True
    return status, length, chunked, close


# ---------------------------------------------------------------- asyncio response reader

async def read_response(reader):
    """Read one response; returns (status, close). Bodies are discarded."""
    head = await reader.readuntil(b"\r\n\r\n")
    status, length, chunked, close = parse_head(head[:-4])
    if chunked:
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length:
        await reader.readexactly(length)
    elif length is None:
        await reader.read()  # body until close
        close = True
    return status, close


# ---------------------------------------------------------------- idle

class ConnectFailed(Exception):
    """A connection that opened but did not come up as it should (its kind in str())."""


async def hold_connections(args, connect):
    """Open args.n connections (args.parallel at a time) with connect(), an
    async function returning (reader, writer) or raising; hold them for
    args.settle seconds and measure the RSS of the process tree args.pid
    before and with them. Returns the figures common to every idle test."""
    limit = raise_nofile()
    pids = bench_util.tree_pids(args.pid)
    rss_start = bench_util.status_kib(pids, "VmRSS")
    gate = asyncio.Semaphore(args.parallel)
    conns, failures = [], []

    async def open_one():
        async with gate:
            try:
                conns.append(await connect())
            except ConnectFailed as e:
                failures.append(str(e))
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as e:
                failures.append(type(e).__name__)

    t = time.monotonic()
    await asyncio.gather(*(open_one() for _ in range(args.n)))
    open_s = time.monotonic() - t
    await asyncio.sleep(args.settle)
    pids = bench_util.tree_pids(args.pid)
    rss_with = bench_util.status_kib(pids, "VmRSS")
    alive = sum(1 for r, _ in conns if not r.at_eof())
    for _, w in conns:
        w.close()
    return {"n": args.n, "alive": alive,
            "failures": len(failures), "failure_kinds": sorted(set(failures))[:5],
            "rss_start_kib": rss_start, "rss_with_kib": rss_with,
            "bytes_per_conn": (rss_with - rss_start) * 1024 / alive if alive else None,
            "open_s": round(open_s, 2), "nofile": limit}


async def idle(args):
    req = request_bytes(args.path)

    async def connect():
        r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", args.port), 5)
        w.write(req)
        status, _ = await asyncio.wait_for(read_response(r), 5)
        if status != 200:
            w.close()
            raise ConnectFailed(f"status {status}")
        return r, w

    res = {"phase": "memory", "target": args.target}
    res.update(await hold_connections(args, connect))
    return res


# ---------------------------------------------------------------- body

class SockReader:
    """Buffered reads over a blocking socket, discarding large bodies with recv_into."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()
        self.sink = memoryview(bytearray(1 << 20))

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        self.buf += data

    def until(self, sep):
        while True:
            i = self.buf.find(sep)
            if i >= 0:
                out = bytes(self.buf[:i + len(sep)])
                del self.buf[:i + len(sep)]
                return out
            self._fill()

    def discard(self, n):
        take = min(n, len(self.buf))
        del self.buf[:take]
        n -= take
        while n > 0:
            got = self.sock.recv_into(self.sink, min(n, len(self.sink)))
            if got == 0:
                raise ConnectionError("closed")
            n -= got

    def response(self):
        status, length, chunked, close = parse_head(self.until(b"\r\n\r\n")[:-4])
        got = 0
        if chunked:
            while True:
                size = int(self.until(b"\r\n").split(b";")[0], 16)
                self.discard(size + 2)
                got += size
                if size == 0:
                    break
        else:
            self.discard(length or 0)
            got = length or 0
        return status, got, close


def body(args):
    pids = bench_util.tree_pids(args.pid) if args.pid else []
    hwm_reset = bench_util.reset_hwm(pids) if pids else None
    rss_before = bench_util.status_kib(pids, "VmRSS")
    total, statuses, elapsed = 0, set(), []
    deadline = time.monotonic() + args.max_seconds
    sock = None
    for _ in range(args.requests):
        if time.monotonic() > deadline:
            break
        if sock is None:
            sock = socket.create_connection(("127.0.0.1", args.port), timeout=30)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            reader = SockReader(sock)
        t = time.monotonic()
        sock.sendall(request_bytes(args.path))
        status, got, close = reader.response()
        elapsed.append(time.monotonic() - t)
        statuses.add(status)
        total += got
        if close:
            sock.close()
            sock = None
    if sock:
        sock.close()
    secs = sum(elapsed)
    pids = bench_util.tree_pids(args.pid) if args.pid else []
    return {"phase": "large", "target": args.target, "size": args.size_label,
            "requests": len(elapsed), "bytes": total, "seconds": round(secs, 4),
            "mb_s": total / 1e6 / secs if secs else None,
            "statuses": sorted(statuses),
            "rss_before_kib": rss_before if pids else None,
            "peak_rss_kib": bench_util.status_kib(pids, "VmHWM") if pids else None,
            "hwm_reset": hwm_reset}


# ---------------------------------------------------------------- storm

def control(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request_bytes(path))
        SockReader(s).response()


async def paced(t_start, end, interval, one):
    """await one() every interval seconds, from a random moment in the first
    interval until end. Paced, not closed-loop flat out: a late call does
    not make the next ones burst to catch up."""
    next_t = t_start + random.random() * interval
    while next_t < end:
        now = time.monotonic()
        if now < next_t:
            await asyncio.sleep(next_t - now)
        await one()
        next_t = max(next_t + interval, time.monotonic())


async def storm_run(args, t_start, end):
    records = []  # (t_send, t_done, status); status 0 = error or timeout
    req = request_bytes(args.path)

    async def worker():
        conn = None

        async def one():
            nonlocal conn
            t_send = time.monotonic()
            status = 0
            try:
                if conn is None:
                    conn = await asyncio.wait_for(
                        asyncio.open_connection("127.0.0.1", args.port), args.timeout)
                conn[1].write(req)
                status, close = await asyncio.wait_for(read_response(conn[0]), args.timeout)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
                    asyncio.LimitOverrunError, ValueError, IndexError):
                close = True
            records.append((t_send, time.monotonic(), status))
            if close and conn is not None:
                conn[1].close()
                conn = None

        await paced(t_start, end, args.interval, one)
        if conn is not None:
            conn[1].close()

    await asyncio.gather(*(worker() for _ in range(args.clients)))
    return records


def storm_analyze(args, records, arrivals, t0):
    outage_end = t0 + args.outage
    in_outage = [r for r in records if t0 <= r[0] < outage_end]
    arr_outage = sum(1 for t, _ in arrivals if t0 <= t < outage_end)
    res = {"downstream_outage": len(in_outage), "arrivals_outage": arr_outage,
           "arrivals_per_request": arr_outage / len(in_outage) if in_outage else None,
           "downstream_ok_outage": sum(1 for r in in_outage if r[2] == 200),
           "downstream_total": len(records), "arrivals_total": len(arrivals),
           "downstream_errors": sum(1 for r in records if r[2] == 0)}
    # Recovery: the first 100 ms bucket after the outage from which every bucket
    # (by completion time) has >= 99% 200s until the end of the run.
    step = 0.1
    nb = int((max(r[1] for r in records) - outage_end) / step) + 1 if records else 0
    ok, n = [0] * max(nb, 0), [0] * max(nb, 0)
    for _, done, status in records:
        if done >= outage_end:
            b = int((done - outage_end) / step)
            if b < nb:
                n[b] += 1
                ok[b] += status == 200
    recovered_at = None
    for b in range(nb - 1, -1, -1):
        if n[b] and ok[b] < 0.99 * n[b]:
            break
        if n[b]:
            recovered_at = b * step
    res["recover_s"] = recovered_at
    return res


def storm_timeline(args, records, arrivals, t0, path):
    step = 0.1
    lo, hi = -args.lead, args.outage + args.tail
    nb = int(round((hi - lo) / step))
    cols = [[0] * nb for _ in range(4)]  # arrivals, sent, ok done, failed done

    def bucket(t):
        b = int((t - t0 - lo) / step)
        return b if 0 <= b < nb else None

    for t, _ in arrivals:
        b = bucket(t)
        if b is not None:
            cols[0][b] += 1
    for sent, done, status in records:
        b = bucket(sent)
        if b is not None:
            cols[1][b] += 1
        b = bucket(done)
        if b is not None:
            cols[2 if status == 200 else 3][b] += 1
    with open(path, "w") as f:
        f.write("# t_s(from outage start)\torigin_arrivals\tdownstream_sent\tdownstream_ok\tdownstream_failed\n")
        for b in range(nb):
            f.write(f"{lo + b * step:.1f}\t" + "\t".join(str(c[b]) for c in cols) + "\n")


def storm(args):
    raise_nofile()
    t_start = time.monotonic() + 0.2
    t0 = t_start + args.lead
    end = t0 + args.outage + args.tail
    control(args.origin_port, f"/__arm?t0={t0:.6f}&outage={args.outage}")
    records = asyncio.run(storm_run(args, t_start, end))
    time.sleep(0.2)  # let in-flight attempts land at the origin
    control(args.origin_port, "/__dump")
    with open(args.origin_log) as f:
        arrivals = [(float(t), int(s)) for t, s in (line.split() for line in f)]
    res = {"phase": "storm", "target": args.target, "depth": args.depth,
           "clients": args.clients, "interval_s": args.interval,
           "outage_s": args.outage}
    res.update(storm_analyze(args, records, arrivals, t0))
    if args.timeline:
        storm_timeline(args, records, arrivals, t0, args.timeline)
    return res


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("idle")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--n", type=int, default=10000)
    p.add_argument("--path", default="/small.txt")
    p.add_argument("--parallel", type=int, default=200)
    p.add_argument("--settle", type=float, default=1.0)
    p = sub.add_parser("body")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, default=0)
    p.add_argument("--target", required=True)
    p.add_argument("--path", required=True)
    p.add_argument("--size-label", required=True)
    p.add_argument("--requests", type=int, default=10)
    p.add_argument("--max-seconds", type=float, default=20)
    p = sub.add_parser("storm")
    p.add_argument("--port", type=int, required=True, help="front proxy port")
    p.add_argument("--origin-port", type=int, required=True)
    p.add_argument("--origin-log", required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--depth", type=int, default=1)
    p.add_argument("--path", default="/storm")
    p.add_argument("--clients", type=int, default=200)
    p.add_argument("--interval", type=float, default=0.1, help="seconds between a client's requests")
    p.add_argument("--lead", type=float, default=1.0, help="healthy seconds before the outage")
    p.add_argument("--outage", type=float, default=10.0)
    p.add_argument("--tail", type=float, default=5.0, help="seconds observed after recovery")
    p.add_argument("--timeout", type=float, default=5.0, help="per-request timeout")
    p.add_argument("--timeline", help="TSV output: arrivals and requests per 100 ms")
    a = ap.parse_args()
    if a.cmd == "idle":
        res = asyncio.run(idle(a))
    elif a.cmd == "body":
        res = body(a)
    else:
        res = storm(a)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
