#!/usr/bin/env python3
"""Bounded soak of onelayer: mixed load with injected faults for a
fixed time, then checks that the proxy did not crash, did not grow (RSS and
open descriptors after warm-up), and that every request's outcome is the one
its injected faults explain (error counts match the faults injected).

The upstream is HTTP/1.1 (tests/integration/fault_origin.py). The clients
are HTTP/1.1 keep-alive ones and H2_CONNECTIONS HTTP/2 ones (soak_h2.py's:
several streams at once, some cancelled or abandoned with their connection,
some windows kept shut, reads paused), so both downstream protocols meet an
HTTP/1.1 upstream. Answers of 200 must carry their own request's id, and a
192 KiB answer ("big") must arrive whole.

Usage: soak.py [--seconds N] [--short] [--clients N] [--seed N]
  --short        20-second mode for CI (same as --seconds 20)
Environment: SOAK_SECONDS (default 120), SOAK_SEED (default 4242),
ONELAYER_BIN (the binary; default <repo>/build/onelayer), ONELAYER_SANITIZED=1
(memory growth is then not judged: ASan's quarantine grows by design).
Exit status 0 when every check holds, 1 otherwise; a summary is printed.
"""

import gc
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
from soak_checks import (MAX_ATTEMPTS, FaultPlan, check_every_request_ended, drive, http1_client,  # noqa: E402
                         options, report, stop_proxy)
from soak_h2 import H2ClientConnection, big_body, judge_slow_reading, plan_give_up, slow_reading_counts  # noqa: E402

FAULTS = [("ok", 60), ("503", 8), ("503-retry-after", 3), ("500", 3), ("rst-before-head", 6),
          ("close-before-head", 3), ("rst-after-head", 3), ("timeout", 2), ("slow-body", 5),
          ("close-after-response", 5), ("garbage", 2), ("big", 3)]
METHODS = ["GET", "GET", "GET", "HEAD", "PUT", "DELETE", "POST", "POST", "PATCH"]
H2_CONNECTIONS = 4      # HTTP/2 clients beside the HTTP/1.1 ones
LATE_S = 1.0            # an attempt this long after the request was sent may end in the deadline's 504
CANCEL_SHARE = 0.0133   # HTTP/2 requests whose stream the client resets part way
ABANDON_SHARE = 0.0067  # HTTP/2 requests whose client then closes its connection with its streams open


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
        "big": lambda: fo.respond(200, echo, big_body(rid)),
    }[name]()


def expected_outcomes(method, keyed, faults):
    """The outcomes a correct proxy may give after these origin faults."""
    if not faults:
        return {502, 504}  # never reached the origin (refused endpoint / deadline)
    last = faults[-1]
    final = {"ok": {200}, "500": {500}, "slow-body": {200}, "close-after-response": {200}, "big": {200},
             "rst-after-head": {"cut"} if method != "HEAD" else {200, "cut"},
             "garbage": {502}}
    if last in final:
        return final[last]
    # A retryable failure was the last attempt: retries stopped (attempts,
    # budget, deadline, method not safe to repeat) and the failure went back.
    return {503, 502, 504}


def what_it_carried(response, rid, method):
    """A 200's X-Echo-Id, and why its body is not the answer to `rid` (None
    when it may be: only big answers are checked byte for byte)."""
    if isinstance(response, dict):  # an HTTP/2 client's stream: head, body, trailers
        echo, body = response["head"].get("x-echo-id"), bytes(response["body"])
    else:
        echo, body = response.header("x-echo-id"), response.body
    if len(body) > 1024 and method != "HEAD" and body != big_body(rid):
        return echo, "a big body of %d bytes, not the one sent" % len(body)
    return echo, None


def main():
    args = options(__doc__, HERE, clients=16)
    seconds = args.seconds
    print("soak: %.0fs, %d clients, seed %d (SOAK_SEED=%d to replay), binary %s" % (
        seconds, args.clients, args.seed, args.seed, args.binary), flush=True)

    # As in soak_h2.py: the collector's full passes over what the clients
    # and the origin keep stop every thread here for longer than the per-try
    # timeout. Nothing here needs it within a run.
    gc.disable()

    lock = threading.Lock()
    seed = args.seed
    plan_faults = FaultPlan(FAULTS, seed)

    def handler(arrival):
        rid = arrival.header("x-request-id") or "?"
        arrival.rid, arrival.fault = rid, plan_faults.next(rid)
        arrival.at = time.monotonic()
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

        def next_request(h2_rng=None):
            with rng_lock:
                i = counter[0]
                counter[0] += 1
                method = plan_rng.choice(METHODS)
                keyed = method in ("POST", "PATCH") and plan_rng.random() < 0.5
            rid = "s%07d" % i
            plan[rid] = (method, keyed, time.monotonic())
            headers = [("X-Request-Id", rid)] + ([("Idempotency-Key", "k-" + rid)] if keyed else [])
            body = b"payload " + rid.encode() if method in ("POST", "PUT", "PATCH") else b""
            if h2_rng is None:
                return rid, method, headers, body
            return rid, method, headers, body, plan_give_up(h2_rng, CANCEL_SHARE, ABANDON_SHARE)

        answers = {}  # rid -> (its X-Echo-Id, why its body is not the one sent or None), for each 200

        def record(rid, outcome, response):
            # What a 200 carried is noted here, not the response: big
            # answers would pile up.
            with lock:
                outcomes[rid] = outcome
                if outcome == 200:
                    answers[rid] = what_it_carried(response, rid, plan[rid][0])

        def client(stop):
            http1_client(port, stop, next_request, record)

        slow_reading = slow_reading_counts()

        def h2_client(n):
            rng = random.Random(seed * 1000 + 700 + n)
            return lambda stop: H2ClientConnection(port, stop, next_request, record, rng, slow_reading).run()

        clients = [client] * args.clients + [h2_client(n) for n in range(H2_CONNECTIONS)]
        watch, t0, _ = drive(proxy, clients, args, failures, 30)
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
        crossed = []
        dup_keyless = []
        too_many = []
        counts = {}
        for rid, outcome in outcomes.items():
            method, keyed, sent_at = plan[rid]
            arr = by_rid.get(rid, [])
            faults = [a.fault for a in arr]
            # The last attempt reached the origin so long after the client
            # sent the request (this machine busy, a slow sanitized build)
            # that the route's deadline may have passed before its answer.
            late = bool(arr) and arr[-1].at - sent_at > LATE_S
            counts[outcome] = counts.get(outcome, 0) + 1
            if outcome in ("cancelled", "abandoned"):
                pass  # an HTTP/2 client gave up; what it got is not judged
            elif outcome not in expected_outcomes(method, keyed, faults) and not (late and outcome == 504):
                mismatches.append((rid, method, keyed, faults, outcome,
                                   "last attempt %.2f s after the send" % (arr[-1].at - sent_at) if arr else ""))
            elif outcome == 200:
                echo, bad_body = answers[rid]
                # A HEAD answer cut after its head is whole, and that head
                # (head_then_close's) carries no X-Echo-Id.
                headless = method == "HEAD" and faults[-1] == "rst-after-head"
                if (echo != rid and not (headless and echo is None)) or bad_body:
                    crossed.append((rid, faults, echo, bad_body))
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
        judge_slow_reading(slow_reading, seconds, failures)
        watch.judge(failures)
        unanswered = {k: v for k, v in counts.items()
                      if str(k).startswith(("error:", "closed", "goaway", "reset:", "hung"))}
        if unanswered:
            failures.append("requests without a response: %r" % unanswered)
        if crossed:
            failures.append("%d answers that are not their request's, e.g. %r" % (len(crossed), crossed[:5]))
        check_every_request_ended(plan, outcomes, failures)
        if mismatches:
            failures.append("%d outcomes not explained by the injected faults, e.g. %r" % (
                len(mismatches), mismatches[:5]))
        if dup_keyless:
            failures.append("key-less POST/PATCH arrived twice: %r" % dup_keyless[:5])
        if too_many:
            failures.append("more than %d attempts: %r" % (MAX_ATTEMPTS, too_many[:5]))
        if origin.errors:
            failures.append("the origin received malformed requests: %r" % origin.errors[:5])
        # Requests an HTTP/2 client gave up on may never have reached the
        # proxy whole (a stream reset with its HEADERS, a connection closed
        # with requests still in its buffer): not counted here.
        judged = sum(1 for o in outcomes.values() if o not in ("cancelled", "abandoned"))
        if metrics and int(answered) < judged:
            failures.append("onelayer_requests_total %d < %d requests answered" % (answered, judged))
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
