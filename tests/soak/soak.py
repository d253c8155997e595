#!/usr/bin/env python3
"""Bounded soak of onelayer: mixed load with injected faults for a
fixed time, then checks that the proxy did not crash, did not grow (RSS and
open descriptors after warm-up), and that every request's outcome is the one
its injected faults explain (error counts match the faults injected).

Usage: soak.py [--seconds N] [--short] [--clients N] [--seed N]
  --short        20-second mode for CI (same as --seconds 20)
Environment: SOAK_SECONDS (default 120), SOAK_SEED (default 4242),
ONELAYER_BIN (the binary; default <repo>/build/onelayer), ONELAYER_SANITIZED=1
(memory growth is then not judged: ASan's quarantine grows by design).
Exit status 0 when every check holds, 1 otherwise; a summary is printed.
"""

import argparse
import os
import random
import re
import socket
import sys
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import fault_origin as fo  # noqa: E402
import harness as h  # noqa: E402

FAULTS = [("ok", 60), ("503", 8), ("503-retry-after", 3), ("500", 3), ("rst-before-head", 6),
          ("close-before-head", 3), ("rst-after-head", 3), ("timeout", 2), ("slow-body", 5),
          ("close-after-response", 5), ("garbage", 2)]
METHODS = ["GET", "GET", "GET", "HEAD", "PUT", "DELETE", "POST", "POST", "PATCH"]
MAX_ATTEMPTS = 3
RETRYABLE = {"503", "503-retry-after", "rst-before-head", "close-before-head", "timeout"}


def fault_for(seed, rid, attempt):
    r = random.Random(zlib.crc32(("%d/%s/%d" % (seed, rid, attempt)).encode()))
    x = r.uniform(0, sum(w for _, w in FAULTS))
    for name, w in FAULTS:
        if x < w:
            return name
        x -= w
    return "ok"


def action_for(name, rid):
    echo = [("X-Echo-Id", rid)]
    return {
        "ok": lambda: fo.respond(200, echo, b"ok " + rid.encode()),
        "503": lambda: fo.respond(503, echo, b"busy"),
        "503-retry-after": lambda: fo.respond(503, echo + [("Retry-After", "0")], b"busy"),
        "500": lambda: fo.respond(500, echo, b"broken"),
        "rst-before-head": lambda: fo.close(rst=True),
        "close-before-head": lambda: fo.close(rst=False),
        "rst-after-head": lambda: fo.head_then_close(200, 4000, b"partial", rst=True, pause=0.005),
        "timeout": lambda: fo.hang(),
        "slow-body": lambda: fo.slow_body(200, b"slow" * 50, pieces=3, pause=0.01, headers=echo),
        "close-after-response": lambda: fo.respond(200, echo, b"bye", close=True),
        "garbage": lambda: fo.raw(b"HTTP/1.1 2OO OK\r\n\r\n", close=True),
    }[name]()


def expected_outcomes(method, keyed, faults):
    """The outcomes a correct proxy may give after these origin faults."""
    if not faults:
        return {502, 504}  # never reached the origin (refused endpoint / deadline)
    last = faults[-1]
    final = {"ok": {200}, "500": {500}, "slow-body": {200}, "close-after-response": {200},
             "rst-after-head": {"cut"} if method != "HEAD" else {200, "cut"},
             "garbage": {502}}
    if last in final:
        return final[last]
    # A retryable failure was the last attempt: retries stopped (attempts,
    # budget, deadline, method not safe to repeat) and the failure went back.
    return {503, 502, 504}


def percentile_slope(samples):
    """Least-squares slope of (t, value) in value units per second."""
    n = len(samples)
    if n < 3:
        return 0.0
    mt = sum(t for t, _ in samples) / n
    mv = sum(v for _, v in samples) / n
    num = sum((t - mt) * (v - mv) for t, v in samples)
    den = sum((t - mt) ** 2 for t, _ in samples) or 1.0
    return num / den


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", "120")))
    ap.add_argument("--short", action="store_true", help="20-second CI mode")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", "4242")))
    args = ap.parse_args()
    seconds = 20.0 if args.short else args.seconds
    sanitized = os.environ.get("ONELAYER_SANITIZED") == "1"
    binary = os.environ.get("ONELAYER_BIN") or os.path.join(HERE, "..", "..", "build", "onelayer")
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        print("soak: no onelayer binary at %s (set ONELAYER_BIN)" % binary, file=sys.stderr)
        return 1
    print("soak: %.0fs, %d clients, seed %d (SOAK_SEED=%d to replay), binary %s" % (
        seconds, args.clients, args.seed, args.seed, binary), flush=True)

    attempts = {}
    lock = threading.Lock()
    seed = args.seed

    def handler(arrival):
        rid = arrival.header("x-request-id") or "?"
        with lock:
            k = attempts[rid] = attempts.get(rid, 0) + 1
        arrival.rid, arrival.fault = rid, fault_for(seed, rid, k)
        return action_for(arrival.fault, rid)

    origin = fo.FaultOrigin(handler, name="soak-origin")
    refused_port, refused_sock = h.closed_port()
    config = h.simple_config(
        origin.port, endpoints=[origin.endpoint, "127.0.0.1:%d" % refused_port], timeout="2s",
        retry={"max_attempts": MAX_ATTEMPTS, "per_try_timeout": "250ms",
               "backoff": {"base": "5ms", "cap": "50ms", "jitter": "full"}},
        upstream={"connect_timeout": "300ms", "retry_budget": {"ratio": 0.5, "min_per_second": 200}},
        limits={"idle_timeout": "5s", "header_timeout": "2s"})
    proxy = h.Proxy(config, binary=binary)
    failures = []
    try:
        proxy.start()
        port = proxy.port()
        stop = threading.Event()
        counter = [0]
        plan = {}
        outcomes = {}
        rng_lock = threading.Lock()
        plan_rng = random.Random(seed)

        def next_request():
            with rng_lock:
                i = counter[0]
                counter[0] += 1
                method = plan_rng.choice(METHODS)
                keyed = method in ("POST", "PATCH") and plan_rng.random() < 0.5
            rid = "s%07d" % i
            plan[rid] = (method, keyed)
            return rid, method, keyed

        def client():
            conn = None
            while not stop.is_set():
                rid, method, keyed = next_request()
                headers = [("X-Request-Id", rid)] + ([("Idempotency-Key", "k-" + rid)] if keyed else [])
                body = b"payload " + rid.encode() if method in ("POST", "PUT", "PATCH") else b""
                try:
                    if conn is None:
                        conn = h.Conn(port, timeout=10)
                    r = conn.request(method, "/soak/" + rid, headers=headers, body=body)
                    outcome = r.status
                    if r.wants_close():
                        conn.close()
                        conn = None
                except h.IncompleteMessage as e:
                    outcome = "cut" if e.partial is not None else "closed"
                    conn.close()
                    conn = None
                except (OSError, h.ProtocolError) as e:
                    outcome = "error:%s" % type(e).__name__
                    if conn is not None:
                        conn.close()
                    conn = None
                with lock:
                    outcomes[rid] = outcome
            if conn is not None:
                conn.close()

        threads = [threading.Thread(target=client, daemon=True) for _ in range(args.clients)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        warm_after = min(10.0, seconds * 0.25)
        samples = []
        warm = None
        while time.monotonic() - t0 < seconds:
            time.sleep(1.0)
            if not proxy.running():
                failures.append("the proxy exited with %s during the soak" % proxy.proc.poll())
                break
            now = time.monotonic() - t0
            rss, fds = proxy.rss_kb(), len(os.listdir("/proc/%d/fd" % proxy.proc.pid))
            if now >= warm_after:
                if warm is None:
                    warm = (rss, fds)
                samples.append((now, rss, fds))
        stop.set()
        for t in threads:
            t.join(30)
        time.sleep(0.5)
        elapsed = time.monotonic() - t0

        if proxy.running():
            # Let pooled/idle connections settle before the final reading.
            rss_end, fds_end = proxy.rss_kb(), len(os.listdir("/proc/%d/fd" % proxy.proc.pid))
            health = proxy.admin_get("/healthz").status
            if health != 200:
                failures.append("/healthz answered %d at the end" % health)
            metrics = proxy.admin_get("/metrics").body.decode("utf-8", "replace")
        else:
            rss_end = fds_end = None
            metrics = ""

        # Outcomes against injected faults.
        arrivals = origin.snapshot()
        by_rid = {}
        for a in arrivals:
            by_rid.setdefault(getattr(a, "rid", None), []).append(a)
        mismatches = []
        dup_keyless = []
        too_many = []
        counts = {}
        for rid, outcome in outcomes.items():
            method, keyed = plan[rid]
            arr = by_rid.get(rid, [])
            faults = [a.fault for a in arr]
            counts[outcome] = counts.get(outcome, 0) + 1
            if outcome not in expected_outcomes(method, keyed, faults):
                mismatches.append((rid, method, keyed, faults, outcome))
            if method in ("POST", "PATCH") and not keyed and len(arr) > 1:
                dup_keyless.append((rid, faults))
            if len(arr) > MAX_ATTEMPTS:
                too_many.append((rid, faults))
        injected = {}
        for a in arrivals:
            injected[a.fault] = injected.get(a.fault, 0) + 1
        answered = sum(float(v) for v in re.findall(r'^onelayer_requests_total\{[^}]*\} ([0-9.e+]+)$',
                                                      metrics, re.M))
        print("soak: %d requests in %.0fs (%.0f/s), %d origin arrivals" % (
            len(outcomes), elapsed, len(outcomes) / max(elapsed, 1e-9), len(arrivals)))
        print("soak: faults injected %s" % dict(sorted(injected.items())))
        print("soak: outcomes %s" % dict(sorted(counts.items(), key=lambda kv: str(kv[0]))))
        if warm and rss_end is not None:
            slope = percentile_slope([(t, r) for t, r, _ in samples])
            print("soak: RSS %d KiB after warm-up, %d KiB at the end (slope %.1f KiB/s); "
                  "descriptors %d -> %d" % (warm[0], rss_end, slope, warm[1], fds_end))
            if not sanitized:
                if rss_end > warm[0] + max(8 * 1024, warm[0] // 4):
                    failures.append("RSS grew from %d KiB to %d KiB" % (warm[0], rss_end))
                if slope * seconds > 8 * 1024:
                    failures.append("RSS keeps growing: %.1f KiB/s" % slope)
            if fds_end > warm[1] + 80:
                failures.append("open descriptors grew from %d to %d" % (warm[1], fds_end))
        if any(str(o).startswith(("error:", "closed")) for o in outcomes.values()):
            failures.append("requests without a response: %r" % {
                k: v for k, v in counts.items() if str(k).startswith(("error:", "closed"))})
        if mismatches:
            failures.append("%d outcomes not explained by the injected faults, e.g. %r" % (
                len(mismatches), mismatches[:5]))
        if dup_keyless:
            failures.append("key-less POST/PATCH arrived twice: %r" % dup_keyless[:5])
        if too_many:
            failures.append("more than %d attempts: %r" % (MAX_ATTEMPTS, too_many[:5]))
        if origin.errors:
            failures.append("the origin received malformed requests: %r" % origin.errors[:5])
        if metrics and int(answered) < len(outcomes):
            failures.append("onelayer_requests_total %d < %d requests answered" % (answered, len(outcomes)))
        if proxy.running():
            code = proxy.stop(expect_code=None, timeout=15)
            if code != 0:
                failures.append("exit code %s after SIGTERM" % code)
    except Exception as e:  # report, never hang the CI step
        failures.append("soak aborted: %r" % e)
    finally:
        diagnostics = proxy.diagnostics() if failures else ""
        proxy.cleanup()
        origin.stop()
        refused_sock.close()
    if failures:
        print("soak: FAILED\n  " + "\n  ".join(failures), flush=True)
        print(diagnostics, flush=True)
        return 1
    print("soak: ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
