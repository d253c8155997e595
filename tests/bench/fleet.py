#!/usr/bin/env python3
"""Arrivals per first attempt at one failing origin against the number of
onelayer instances, scope: local against scope: fleet (docs/fleet.md).

    python3 tests/bench/fleet.py --instances 1,10,30,100,200 [--seconds 20] [--png out.png]

Each instance gets --rate requests per second (default 2), so the fleet
sends N x rate; ratio 0.1, min_per_second 2, sync_interval 500ms. Prints a
Markdown table; with --png (and gnuplot) draws it. Uses a real
redis-server and the binary in $ONELAYER_BIN (default build/onelayer)."""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
os.environ.setdefault("ONELAYER_BIN", os.path.join(HERE, "..", "..", "build", "onelayer"))

import harness as h  # noqa: E402
from fleet_helpers import CountingOrigin, RedisServer, run_fleet  # noqa: E402

RATIO, FLOOR, INTERVAL_MS = 0.1, 2.0, 500


def measure(n, scope, rate, seconds):
    redis = RedisServer().start()
    origin = CountingOrigin(503)
    started = []

    def start_proxy(config):
        p = h.Proxy(config, ready_timeout=30)
        started.append(p)
        return p.start()

    try:
        first, retries, _, errors, _ = run_fleet(start_proxy, origin, redis.port, n, scope, rate=rate,
                                                 seconds=seconds, ratio=RATIO, floor=FLOOR,
                                                 interval_ms=INTERVAL_MS)
    finally:
        for p in started:
            p.stop(expect_code=None)
            p.cleanup()
        origin.stop()
        redis.cleanup()
    return first, retries, len(errors)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", default="1,10,30,100,200")
    ap.add_argument("--rate", type=float, default=2.0)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--png")
    a = ap.parse_args()
    rows = []
    print("| instances | local: arrivals / first | fleet: arrivals / first | fleet promise |")
    print("|---|---|---|---|")
    for n in [int(x) for x in a.instances.split(",")]:
        res = {}
        for scope in ("local", "fleet"):
            first, retries, errors = measure(n, scope, a.rate, a.seconds)
            res[scope] = (first + retries) / first if first else 0
            if errors:
                print("(%d client errors in the %s run with %d instances)" % (errors, scope, n), file=sys.stderr)
        promise = 1 + RATIO + FLOOR / (n * a.rate)
        rows.append((n, res["local"], res["fleet"], promise))
        print("| %d | %.3f | %.3f | %.3f |" % rows[-1], flush=True)
    if a.png and shutil.which("gnuplot"):
        with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as f:
            for r in rows:
                f.write("%d %f %f %f\n" % r)
        script = ("set terminal png size 800,500; set output '%s'; set logscale x; set xlabel 'instances';"
                  "set ylabel 'origin arrivals per first attempt'; set key top left;"
                  "plot '%s' u 1:2 w lp t 'scope: local', '' u 1:3 w lp t 'scope: fleet', '' u 1:4 w l t 'fleet promise'"
                  % (a.png, f.name))
        subprocess.run(["gnuplot", "-e", script], check=True)
        os.unlink(f.name)


if __name__ == "__main__":
    main()
