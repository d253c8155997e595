#!/usr/bin/env python3
"""Hedged requests measured (docs/retries.md, "Hedged requests"): the tail
latency and the extra load of each way to deal with a slow endpoint.

Two HTTP/1.1 origins on 127.0.0.1 behind onelayer (round robin). Every
answer takes --service ms; in the `slow` mix every tenth answer of the
second origin takes --slow ms instead (5% of all first attempts); in the
`outage` mix both origins answer 503 after --service ms. Rows:

  none          retries only (max_attempts 2), no hedging
  after-50ms    retry.hedge.after: 50ms
  after-p95     retry.hedge.after: p95
  per-try       Envoy-style hedge on per-try timeout, emulated with
                per_try_timeout: 50ms (the slow attempt is given up and
                retried elsewhere; Envoy would keep it running)

Each row: --requests requests from --clients client threads after --warmup
requests (the latency estimate needs a few), p50/p99/p99.9 of what the
clients saw, and extra attempts per request counted at the origins
(arrivals / requests - 1).

  hedge.py [--requests 2000] [--clients 4] [--mix slow|outage|both] [--json]

Prints a markdown table (and with --json one JSON object per row).
127.0.0.1 only; bounded by --requests.
"""
import argparse
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import harness as h  # noqa: E402

ROWS = [
    ("none", {}),
    ("after-50ms", {"hedge": {"after": "50ms"}}),
    ("after-p95", {"hedge": {"after": "p95"}}),
    ("per-try", {"per_try_timeout": "50ms"}),
]


def origin(service, slow, slow_every, status):
    def handler(arrival):
        late = slow_every and arrival.index % slow_every == slow_every - 1
        return h.delay(slow if late else service, h.respond(status, body=b"x"))
    o = h.Origin(handler=handler)
    return o


def quantile(sorted_samples, q):
    if not sorted_samples:
        return 0.0
    return sorted_samples[min(len(sorted_samples) - 1, int(len(sorted_samples) * q))]


def run_row(name, extra, mix, args):
    status = 503 if mix == "outage" else 200
    a = origin(args.service / 1e3, args.slow / 1e3, None, status)
    b = origin(args.service / 1e3, args.slow / 1e3, 10 if mix == "slow" else None, status)
    retry = {"max_attempts": 2, "backoff": {"base": "1ms", "cap": "5ms", "jitter": "none"}}
    retry.update(extra)
    cfg = h.simple_config(endpoints=[a.endpoint, b.endpoint], retry=retry, timeout="5s",
                          upstream={"balance": "round_robin"}, workers=1)
    proxy = h.Proxy(cfg)
    proxy.start()
    try:
        port = proxy.port()

        def client(n, out):
            with h.Conn(port, timeout=10) as c:
                for i in range(n):
                    t = time.monotonic()
                    c.request("GET", "/b/%d" % i)
                    out.append(time.monotonic() - t)

        def phase(total):
            per = total // args.clients
            outs = [[] for _ in range(args.clients)]
            ts = [threading.Thread(target=client, args=(per, outs[i])) for i in range(args.clients)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            return [x for o in outs for x in o]

        phase(args.warmup)
        before = a.count() + b.count()
        samples = sorted(phase(args.requests))
        arrivals = a.count() + b.count() - before
    finally:
        proxy.stop()
        proxy.cleanup()
        a.stop()
        b.stop()
    n = len(samples)
    return {"mix": mix, "row": name, "requests": n,
            "p50_ms": round(quantile(samples, 0.5) * 1e3, 1),
            "p99_ms": round(quantile(samples, 0.99) * 1e3, 1),
            "p999_ms": round(quantile(samples, 0.999) * 1e3, 1),
            "extra_per_request": round(arrivals / n - 1, 3)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--service", type=float, default=20, help="ms per answer")
    ap.add_argument("--slow", type=float, default=500, help="ms for the slow answers")
    ap.add_argument("--mix", choices=["slow", "outage", "both"], default="both")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    mixes = ["slow", "outage"] if args.mix == "both" else [args.mix]
    rows = []
    for mix in mixes:
        for name, extra in ROWS:
            r = run_row(name, extra, mix, args)
            rows.append(r)
            if args.json:
                print(json.dumps(r), flush=True)
    print("| mix | row | p50 ms | p99 ms | p99.9 ms | extra attempts / request |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %.1f | %.1f | %.1f | %.3f |" % (r["mix"], r["row"], r["p50_ms"], r["p99_ms"],
                                                         r["p999_ms"], r["extra_per_request"]))


if __name__ == "__main__":
    main()
