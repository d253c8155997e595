"""What the soaks (soak.py over HTTP/1.1, soak_h2.py over HTTP/2) share:
the deterministic fault pick, the HTTP/1.1 keep-alive client, the watch on
the proxy's memory and descriptors, and the final report."""

import argparse
import os
import random
import sys
import threading
import time
import traceback
import zlib

import harness as h

MAX_ATTEMPTS = 3


class FaultPlan:
    """The fault each attempt of a request meets at the origin: weighted
    by `faults` ((name, weight) pairs), the same for the same seed, request
    id and attempt number. Thread-safe."""

    def __init__(self, faults, seed):
        self.faults, self.seed = faults, seed
        self.attempts = {}
        self.lock = threading.Lock()

    def next(self, rid):
        """The fault of request `rid`'s next attempt to arrive."""
        with self.lock:
            k = self.attempts[rid] = self.attempts.get(rid, 0) + 1
        r = random.Random(zlib.crc32(("%d/%s/%d" % (self.seed, rid, k)).encode()))
        x = r.uniform(0, sum(w for _, w in self.faults))
        for name, w in self.faults:
            if x < w:
                return name
            x -= w
        return self.faults[0][0]


def options(doc, here, **defaults):
    """The soak's options (--seconds, --short, --seed and `defaults` as
    more integer options) and the binary to run; exits when it is missing."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", "120")))
    ap.add_argument("--short", action="store_true", help="20-second CI mode")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", "4242")))
    for name, value in defaults.items():
        ap.add_argument("--" + name, type=int, default=value)
    args = ap.parse_args()
    args.seconds = 20.0 if args.short else args.seconds
    args.sanitized = os.environ.get("ONELAYER_SANITIZED") == "1"
    args.binary = os.environ.get("ONELAYER_BIN") or os.path.join(here, "..", "..", "build", "onelayer")
    if not (os.path.isfile(args.binary) and os.access(args.binary, os.X_OK)):
        print("soak: no onelayer binary at %s (set ONELAYER_BIN)" % args.binary, file=sys.stderr)
        sys.exit(1)
    return args


def drive(proxy, clients, args, failures, join_s):
    """Runs `clients` (functions, one thread each) for args.seconds while
    watching the proxy, then stops them (the returned Event, set) and waits
    up to `join_s` for them. Returns (watch, start, stop time)."""
    stop = threading.Event()

    def guarded(client):
        # A client that raises (a protocol error its library saw in the
        # proxy's bytes, say) is a failure of the run, not a thread that
        # quietly stops sending.
        def run(stop):
            try:
                client(stop)
            except Exception:  # noqa: BLE001 (any of them fails the run)
                failures.append("a client failed: " + traceback.format_exc(limit=4).strip().replace("\n", " | "))
        return run

    threads = [threading.Thread(target=guarded(c), args=(stop,), daemon=True) for c in clients]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    watch = ResourceWatch(proxy, args.seconds, args.sanitized)
    while time.monotonic() - t0 < args.seconds:
        time.sleep(1.0)
        if not proxy.running():
            failures.append("the proxy exited with %s during the soak" % proxy.proc.poll())
            break
        watch.sample(time.monotonic() - t0)
    stop.set()
    stopped_at = time.monotonic()
    for t in threads:
        t.join(join_s)
    if any(t.is_alive() for t in threads):
        failures.append("a client did not finish within %.0f s of the end" % join_s)
    return watch, t0, stopped_at


def check_every_request_ended(plan, outcomes, failures):
    """Every request a client planned (`plan`, by id) must have ended at
    that client with some outcome: one that did not was lost by its client
    (a thread that died) or by the proxy."""
    unrecorded = sorted(set(plan) - set(outcomes))
    if unrecorded:
        failures.append("%d requests sent and never ended at their client, e.g. %r" % (
            len(unrecorded), unrecorded[:5]))


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


def http1_client(port, stop, next_request, record):
    """Keep-alive HTTP/1.1 requests until `stop` is set. `next_request()`
    gives (rid, method, headers, body); `record(rid, outcome, response)`
    gets the status, "cut" (the response stopped part way), "closed" (no
    response) or "error:<exception>", and the Response or None."""
    conn = None
    while not stop.is_set():
        rid, method, headers, body = next_request()
        response = None
        try:
            if conn is None:
                conn = h.Conn(port, timeout=10)
            response = conn.request(method, "/soak/" + rid, headers=headers, body=body)
            outcome = response.status
            if response.wants_close():
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
        record(rid, outcome, response)
    if conn is not None:
        conn.close()


class ResourceWatch:
    """RSS and open descriptors of the proxy, sampled once a second after
    the warm-up (a quarter of the run, at most 10 s), judged at the end."""

    def __init__(self, proxy, seconds, sanitized):
        self.proxy, self.seconds, self.sanitized = proxy, seconds, sanitized
        self.warm_after = min(10.0, seconds * 0.25)
        self.samples = []
        self.warm = None

    def fds(self):
        return len(os.listdir("/proc/%d/fd" % self.proxy.proc.pid))

    def sample(self, now):
        if now < self.warm_after:
            return
        rss, fds = self.proxy.rss_kb(), self.fds()
        if self.warm is None:
            self.warm = (rss, fds)
        self.samples.append((now, rss, fds))

    def judge(self, failures):
        """Prints the figures and adds a failure for RSS grown by more than
        max(8 MiB, 25 %) or still growing (not judged under ASan, whose
        quarantine grows by design) and for 80 descriptors more."""
        if self.warm is None or not self.proxy.running():
            return
        rss_end, fds_end = self.proxy.rss_kb(), self.fds()
        slope = percentile_slope([(t, r) for t, r, _ in self.samples])
        print("soak: RSS %d KiB after warm-up, %d KiB at the end (slope %.1f KiB/s); "
              "descriptors %d -> %d" % (self.warm[0], rss_end, slope, self.warm[1], fds_end))
        if not self.sanitized:
            if rss_end > self.warm[0] + max(8 * 1024, self.warm[0] // 4):
                failures.append("RSS grew from %d KiB to %d KiB" % (self.warm[0], rss_end))
            if slope * self.seconds > 8 * 1024:
                failures.append("RSS keeps growing: %.1f KiB/s" % slope)
        if fds_end > self.warm[1] + 80:
            failures.append("open descriptors grew from %d to %d" % (self.warm[1], fds_end))


def stop_proxy(proxy, failures):
    """SIGTERM at the end of a run: the proxy must exit with 0."""
    if not proxy.running():
        return
    code = proxy.stop(expect_code=None, timeout=15)
    if code != 0:
        failures.append("exit code %s after SIGTERM" % code)


def report(failures, diagnostics):
    """Prints the verdict; the exit status."""
    if failures:
        print("soak: FAILED\n  " + "\n  ".join(failures), flush=True)
        print(diagnostics, flush=True)
        return 1
    print("soak: ok", flush=True)
    return 0
