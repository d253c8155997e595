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

import os
import random
import re
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import fault_origin as fo  # noqa: E402
import harness as h  # noqa: E402
from soak_checks import MAX_ATTEMPTS, FaultPlan, drive, http1_client, options, report, stop_proxy  # noqa: E402

FAULTS = [("ok", 60), ("503", 8), ("503-retry-after", 3), ("500", 3), ("rst-before-head", 6),
          ("close-before-head", 3), ("rst-after-head", 3), ("timeout", 2), ("slow-body", 5),
          ("close-after-response", 5), ("garbage", 2)]
METHODS = ["GET", "GET", "GET", "HEAD", "PUT", "DELETE", "POST", "POST", "PATCH"]


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


def main():
    args = options(__doc__, HERE, clients=16)
    seconds = args.seconds
    print("soak: %.0fs, %d clients, seed %d (SOAK_SEED=%d to replay), binary %s" % (
        seconds, args.clients, args.seed, args.seed, args.binary), flush=True)

    lock = threading.Lock()
    seed = args.seed
    plan_faults = FaultPlan(FAULTS, seed)

    def handler(arrival):
        rid = arrival.header("x-request-id") or "?"
        arrival.rid, arrival.fault = rid, plan_faults.next(rid)
        return action_for(arrival.fault, rid)

    origin = fo.FaultOrigin(handler, name="soak-origin")
    refused_port, refused_sock = h.closed_port()
    config = h.simple_config(
        origin.port, endpoints=[origin.endpoint, "127.0.0.1:%d" % refused_port], timeout="2s",
        retry={"max_attempts": MAX_ATTEMPTS, "per_try_timeout": "250ms",
               "backoff": {"base": "5ms", "cap": "50ms", "jitter": "full"}},
        upstream={"connect_timeout": "300ms", "retry_budget": {"ratio": 0.5, "min_per_second": 200}},
        limits={"idle_timeout": "5s", "header_timeout": "2s"})
    proxy = h.Proxy(config, binary=args.binary)
    failures = []
    try:
        proxy.start()
        port = proxy.port()
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
            headers = [("X-Request-Id", rid)] + ([("Idempotency-Key", "k-" + rid)] if keyed else [])
            body = b"payload " + rid.encode() if method in ("POST", "PUT", "PATCH") else b""
            return rid, method, headers, body

        def record(rid, outcome, _response):
            with lock:
                outcomes[rid] = outcome

        def client(stop):
            http1_client(port, stop, next_request, record)

        watch, t0, _ = drive(proxy, [client] * args.clients, args, failures, 30)
        time.sleep(0.5)
        elapsed = time.monotonic() - t0

        if proxy.running():
            health = proxy.admin_get("/healthz").status
            if health != 200:
                failures.append("/healthz answered %d at the end" % health)
            metrics = proxy.admin_get("/metrics").body.decode("utf-8", "replace")
        else:
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
        watch.judge(failures)
        if any(str(o).startswith(("error:", "closed")) for o in outcomes.values()):
            failures.append("requests without a response: %r" % {
                k: v for k, v in counts.items() if str(k).startswith(("error:", "closed"))})
        unrecorded = sorted(set(plan) - set(outcomes))
        if unrecorded:
            failures.append("%d requests sent and never ended at their client, e.g. %r" % (
                len(unrecorded), unrecorded[:5]))
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
        stop_proxy(proxy, failures)
    except Exception as e:  # report, never hang the CI step
        failures.append("soak aborted: %r" % e)
    finally:
        diagnostics = proxy.diagnostics() if failures else ""
        proxy.cleanup()
        origin.stop()
        refused_sock.close()
    return report(failures, diagnostics)


if __name__ == "__main__":
    sys.exit(main())
