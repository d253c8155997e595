#!/usr/bin/env python3
"""Arrivals per first attempt at one failing origin against the number of
onelayer instances, scope: local against scope: fleet (docs/fleet.md).

    python3 tests/bench/fleet.py --instances 1,10,30,100,200 [--seconds 20] [--png out.png]

Each instance gets --rate requests per second (default 2), so the fleet
sends N x rate; ratio 0.1, min_per_second 2, sync_interval 500ms. Prints a
Markdown table, then the Redis load of each fleet run: commands per second
over the load, from `INFO commandstats` just before and just after it
(script calls, and every command run inside them). With --png FILE (needs
gnuplot) draws arrivals per first attempt against instances, local and
fleet, to FILE. Uses a real redis-server (redis-cli for its statistics) and
the binary in $ONELAYER_BIN (default build/onelayer)."""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
os.environ.setdefault("ONELAYER_BIN", os.path.join(HERE, "..", "..", "build", "onelayer"))

import harness as h  # noqa: E402
from fleet_helpers import CountingOrigin, RedisServer, run_fleet  # noqa: E402

RATIO, FLOOR, INTERVAL_MS = 0.1, 2.0, 500


def commandstats(port):
    """{command: (calls, microseconds)} from the Redis on 127.0.0.1:port."""
    out = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "INFO", "commandstats"],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    stats = {}
    for line in out.splitlines():
        if line.startswith("cmdstat_"):
            name, fields = line[len("cmdstat_"):].split(":", 1)
            f = dict(x.split("=", 1) for x in fields.strip().split(","))
            stats[name] = (int(f["calls"]), int(f["usec"]))
    return stats


def redis_load(before, after, seconds):
    """(script calls/s, commands/s in all, microseconds of Redis per script
    call) between two commandstats snapshots `seconds` apart; the INFO
    call that took the second snapshot is left out."""
    delta = {k: (after[k][0] - before.get(k, (0, 0))[0], after[k][1] - before.get(k, (0, 0))[1]) for k in after}
    delta["info"] = (0, 0)
    scripts = delta.get("evalsha", (0, 0))[0] + delta.get("eval", (0, 0))[0]
    commands = sum(c for c, _ in delta.values())
    usec = sum(u for k, (_, u) in delta.items() if k in ("evalsha", "eval"))
    return scripts / seconds, commands / seconds, usec / scripts if scripts else 0.0


def measure(n, scope, rate, seconds):
    """(first, retries, client errors, Redis load or None) of one run."""
    redis = RedisServer().start()
    origin = CountingOrigin(503)
    started = []
    marks = []  # (time, commandstats) before and after the load

    def start_proxy(config):
        p = h.Proxy(config, ready_timeout=30)
        started.append(p)
        return p.start()

    try:
        first, retries, _, errors, _ = run_fleet(
            start_proxy, origin, redis.port, n, scope, rate=rate, seconds=seconds, ratio=RATIO, floor=FLOOR,
            interval_ms=INTERVAL_MS, around_load=lambda: marks.append((time.monotonic(), commandstats(redis.port))))
    finally:
        for p in started:
            p.stop(expect_code=None)
            p.cleanup()
        origin.stop()
        redis.cleanup()
    (t0, before), (t1, after) = marks
    return first, retries, len(errors), redis_load(before, after, t1 - t0)


def plot(png, rows):
    """arrivals per first attempt against instances, local, fleet and the
    fleet promise, with gnuplot."""
    with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as f:
        for r in rows:
            f.write("%d %f %f %f\n" % r)
    script = ("set terminal pngcairo size 800,500 font ',11'; set output '%s'; set logscale x;"
              "set xtics (%s); set xlabel 'instances (each at the same rate, origin failing everything)';"
              "set ylabel 'origin arrivals per first attempt'; set yrange [1:*]; set key top right; set grid;"
              "set offsets graph 0.04, graph 0.04, 0, 0;"
              "plot '%s' u 1:2 w lp pt 7 t 'scope: local', '' u 1:3 w lp pt 5 t 'scope: fleet',"
              " '' u 1:4 w l dt 2 t 'fleet promise'"
              % (png, ",".join(str(r[0]) for r in rows), f.name))
    try:
        subprocess.run(["gnuplot", "-e", script], check=True)
    finally:
        os.unlink(f.name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", default="1,10,30,100,200")
    ap.add_argument("--rate", type=float, default=2.0)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--png", help="draw the chart into this PNG file (needs gnuplot)")
    a = ap.parse_args()
    for tool in ["redis-server", "redis-cli"] + (["gnuplot"] if a.png else []):
        if not shutil.which(tool):
            ap.error("%s not found" % tool)
    rows, loads = [], []
    print("| instances | local: arrivals / first | fleet: arrivals / first | fleet promise |")
    print("|---|---|---|---|")
    for n in [int(x) for x in a.instances.split(",")]:
        res = {}
        for scope in ("local", "fleet"):
            first, retries, errors, load = measure(n, scope, a.rate, a.seconds)
            res[scope] = (first + retries) / first if first else 0
            if errors:
                print("(%d client errors in the %s run with %d instances)" % (errors, scope, n), file=sys.stderr)
            if scope == "fleet":
                loads.append((n,) + load)
        promise = 1 + RATIO + FLOOR / (n * a.rate)
        rows.append((n, res["local"], res["fleet"], promise))
        print("| %d | %.3f | %.3f | %.3f |" % rows[-1], flush=True)
    print()
    print("Redis during the fleet runs (sync_interval %d ms, one service):" % INTERVAL_MS)
    print()
    print("| instances | script calls/s | per instance | commands/s in all | Redis us per script call |")
    print("|---|---|---|---|---|")
    for n, scripts, commands, usec in loads:
        print("| %d | %.1f | %.2f | %.0f | %.1f |" % (n, scripts, scripts / n, commands, usec))
    if a.png:
        plot(a.png, rows)
        print("\nchart: %s" % a.png)


if __name__ == "__main__":
    main()
