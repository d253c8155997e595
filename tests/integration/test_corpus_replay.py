"""Replays every raw request of the h2o HTTP/1 corpus (1,972 files, many
malformed; tests/corpora/http1-requests, MIT) through one onelayer in front
of a recording origin (docs/testing.md).

For every file: each response is well formed (strict framing) and the
connection ends cleanly within a bound; a proxy-made response carries a known
status and x-onelayer-error. For the run: the proxy never crashes and still
answers /healthz; every request the origin received is a clean HTTP/1.1
request; every complete request the origin answered reached exactly one
client, and no client received an origin answer twice (one request in, at
most one request out: nothing smuggled).

Each file is sent twice: once followed by a half-close (the proxy sees EOF
right after the bytes) and once left open, so incomplete heads meet the
header timeout. Environment: CORPUS_WORKERS (parallel connections, default
24), CORPUS_LIMIT (replay only the first N files, for debugging).
"""

import os
import re
import sys
import threading
import time
import unittest

import fault_origin as fo
import harness as h
from harness import IntegrationTest

PROXY_ERRORS = {400, 404, 408, 413, 417, 431, 501, 502, 503, 504}
REQUEST_LINE = re.compile(rb"(?:\A|\n)(HEAD|GET|POST|PUT|DELETE|OPTIONS|TRACE|PATCH|CONNECT|[A-Z]+) \S")


CORPUS_DIR = os.path.join(h.SOURCE_DIR, "tests", "corpora", "http1-requests")
CORPUS_FILES = 1972


def exchange(port, data, half_close, bound):
    """(bytes, ended): see harness.raw_exchange."""
    return h.raw_exchange(port, data, timeout=bound, half_close=half_close)


def parse_all(raw, data):
    """Responses in raw, trying the request methods found in the file when
    plain GET framing does not fit (HEAD responses have no body)."""
    try:
        return h.parse_responses(raw)
    except (h.ProtocolError, h.IncompleteMessage) as first:
        methods = [m.decode() for m in REQUEST_LINE.findall(data)]
        if "HEAD" not in methods:
            raise first
        return h.parse_responses(raw, methods=methods)


class CorpusReplayTest(IntegrationTest):
    maxDiff = None

    def test_every_corpus_request_gets_a_well_formed_answer_or_a_clean_close(self):
        # A missing or short corpus is a failure: the replay must run.
        self.assertTrue(os.path.isdir(CORPUS_DIR), "the corpus %s is missing" % CORPUS_DIR)
        names = sorted(os.listdir(CORPUS_DIR))
        self.assertEqual(len(names), CORPUS_FILES, "files in %s" % CORPUS_DIR)
        limit = int(os.environ.get("CORPUS_LIMIT", "0"))
        if limit:
            names = names[:limit]
        files = []
        for n in names:
            with open(os.path.join(CORPUS_DIR, n), "rb") as f:
                files.append((n, f.read()))

        origin = fo.FaultOrigin(lambda a: fo.respond(200, [("X-Arrival", str(a.index))], b"ok"))
        self.addCleanup(origin.stop)
        proxy = self.start_proxy(h.simple_config(origin.port, limits={
            "max_header_bytes": "16KiB", "max_body_bytes": "1MiB",
            "header_timeout": "1s", "idle_timeout": "2s"}))
        port = proxy.port()

        failures = []
        answered = {}  # X-Arrival -> how many clients got it
        statuses = {}
        lock = threading.Lock()
        work = [(n, data, True) for n, data in files] + [(n, data, False) for n, data in files]
        index = [0]

        def worker():
            while True:
                with lock:
                    if index[0] >= len(work):
                        return
                    name, data, half = work[index[0]]
                    index[0] += 1
                # Bound: header timeout (1 s) or idle timeout (2 s) plus slack.
                raw, ended = exchange(port, data, half, bound=6.0)
                how = "half-closed" if half else "left open"
                problem = None
                resps = []
                try:
                    resps = parse_all(raw, data)
                except (h.ProtocolError, h.IncompleteMessage) as e:
                    problem = "malformed answer (%s): %r" % (e, raw[:300])
                if problem is None and not ended:
                    problem = "connection neither answered to the end nor closed within 6 s " \
                              "(got %d responses)" % len(resps)
                for r in resps:
                    if problem:
                        break
                    reason = r.header("x-onelayer-error")
                    arrival = r.header("x-arrival")
                    if reason is not None and r.status not in PROXY_ERRORS:
                        problem = "proxy-made %d %s" % (r.status, reason)
                    elif reason is None and arrival is None:
                        problem = "a response neither from the origin nor the proxy: %r" % r
                    with lock:
                        statuses[(r.status, reason)] = statuses.get((r.status, reason), 0) + 1
                        if arrival is not None:
                            answered[arrival] = answered.get(arrival, 0) + 1
                if problem:
                    with lock:
                        failures.append("%s (%s): %s\n    sent: %r" % (name, how, problem, data[:200]))

        t0 = time.monotonic()
        threads = [threading.Thread(target=worker, daemon=True)
                   for _ in range(int(os.environ.get("CORPUS_WORKERS", "24")))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        elapsed = time.monotonic() - t0
        self.assertFalse(any(t.is_alive() for t in threads), "replay still running after 300 s")
        time.sleep(0.3)
        arrivals = origin.snapshot()
        sys.stderr.write("\n[corpus] %d files x2 in %.1fs; %d origin arrivals; answers %r\n" % (
            len(files), elapsed, len(arrivals),
            sorted(statuses.items(), key=lambda kv: -kv[1])[:12]))

        self.assertTrue(proxy.running(), "the proxy crashed during the replay\n" + proxy.diagnostics())
        self.assertEqual(proxy.admin_get("/healthz").status, 200)
        with h.Conn(port) as c:
            self.assertEqual(c.request("GET", "/after-corpus").status, 200)
        problems = []
        if failures:
            problems.append("%d of %d exchanges failed:\n  %s" % (
                len(failures), len(work), "\n  ".join(failures[:15])))
        if origin.errors:
            problems.append("the origin received %d malformed requests:\n  %s" % (
                len(origin.errors), "\n  ".join(e[:300] for e in origin.errors[:10])))
        bad_version = [a for a in arrivals if a.version != "HTTP/1.1"]
        if bad_version:
            problems.append("requests forwarded as other than HTTP/1.1: %r" % bad_version[:5])
        # One request in, at most one out: every complete request the origin
        # answered went to exactly one client; none was answered twice.
        twice = {k: v for k, v in answered.items() if v > 1}
        if twice:
            problems.append("origin answers delivered more than once: %r" % twice)
        complete = {str(a.index) for a in arrivals if a.body_complete and a.target != "/after-corpus"}
        orphans = sorted(complete - set(answered), key=int)
        if orphans:
            problems.append("%d complete requests reached the origin whose answer no client got "
                            "(executed upstream, reported otherwise downstream): %r" % (
                                len(orphans), [(arrivals[int(i)].method, arrivals[int(i)].target[:60],
                                                arrivals[int(i)].header("upgrade"))
                                               for i in orphans[:8]]))
        if problems:
            self.fail("\n".join(problems))

if __name__ == "__main__":
    unittest.main()
