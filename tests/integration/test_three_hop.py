"""The end-to-end proof of the single-layer protocol (docs/retries.md): one user action causes at most one layer's
worth of attempts at the bottom of a three-hop stack.

    client -> onelayer A -> app 1 -> onelayer B -> app 2 -> onelayer C -> origin

Every process listens on 127.0.0.1 port 0. The apps (chain_app.py) call the
next hop once per request and, like OpenTelemetry-instrumented services,
carry only the W3C `baggage` header into that call. Every retrying onelayer
has max_attempts 3 and a retry budget too large to interfere, and the origin
always answers 503, so the origin's arrival count per client request is the
amplification the stack produces. Each scenario prints its counts:

    three_hop[<scenario>]: origin arrivals per client request [...]
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import harness as h
import promcheck
from harness import IntegrationTest

HERE = os.path.dirname(os.path.abspath(__file__))
CHAIN_APP = os.path.join(HERE, "chain_app.py")

REQUESTS = 5                      # client requests per scenario
ORIGIN_BODY = b"origin always fails"
BACKOFF = {"base": "5ms", "cap": "20ms", "jitter": "none"}
# ratio 10 + 1000/s: far more retries than these tests make, so the budget
# never decides anything here (validator allows ratio <= 1000, min <= 1e6).
GENEROUS_BUDGET = {"ratio": 10, "min_per_second": 1000}
OTEL_APP = "baggage"              # what an OpenTelemetry-instrumented app propagates
FORWARD_ALL = "*"                 # an app that copies every end-to-end header
DEADLINE_AWARE_APP = "baggage,x-request-timeout-ms"


def retry_block(max_attempts=3):
    return {"max_attempts": max_attempts, "backoff": dict(BACKOFF)}


def report(scenario, text):
    # Printed (not logged) so `ctest -R three_hop -V` shows the numbers.
    print("three_hop[%s]: %s" % (scenario, text), flush=True)


def baggage_members(value):
    """[(key, value-with-properties)] of a W3C baggage string (simple split:
    the tests only send well-formed baggage)."""
    out = []
    for member in (value or "").split(","):
        member = member.strip()
        if not member:
            continue
        key, _, rest = member.partition("=")
        out.append((key.strip(), rest.strip()))
    return out


class ChainApp:
    """A chain_app.py process: started with its cleanup registered."""

    def __init__(self, test, name, next_port, propagate, copy_response, extra_args=()):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix="onelayer-chain-%s-" % name)
        test.addCleanup(shutil.rmtree, self.dir, True)
        self.port_file = os.path.join(self.dir, "port")
        self.record_path = os.path.join(self.dir, "received.jsonl")
        self.stderr_path = os.path.join(self.dir, "stderr")
        cmd = [sys.executable, CHAIN_APP, "--next", "127.0.0.1:%d" % next_port,
               "--port-file", self.port_file, "--propagate", propagate,
               "--copy-response", copy_response, "--record", self.record_path] + list(extra_args)
        if shutil.which("setpriv"):
            cmd = ["setpriv", "--pdeathsig", "KILL", "--"] + cmd  # dies with the runner
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err)
        test.addCleanup(self.stop)
        self.port = self._wait_for_port()

    def _wait_for_port(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with open(self.port_file) as f:
                    return int(f.read().strip())
            except (FileNotFoundError, ValueError):
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise AssertionError("%s did not start (exit %s): %s" % (
            self.name, self.proc.returncode, self.stderr()))

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def received(self):
        """Every request this app received: [{method, path, headers}]."""
        try:
            with open(self.record_path) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def header_of(record, name):
    for k, v in record["headers"]:
        if k.lower() == name:
            return v
    return None


class Chain:
    def __init__(self, origin, layers, apps):
        self.origin = origin
        self.layers = layers   # {"A": Proxy, "B": Proxy, "C": Proxy}
        self.apps = apps       # {"app1": ChainApp, "app2": ChainApp}

    def metric(self, layer, name, **labels):
        text = self.layers[layer].admin_get("/metrics").body.decode()
        return promcheck.value(text, name, **labels) or 0.0


class ThreeHopChainTest(IntegrationTest):
    # -- building the chain ----------------------------------------------
    def start_layer(self, name, upstream_port, *, max_attempts, inner_hops, baggage,
                    timeout="10s"):
        config = h.simple_config(
            upstream_port,
            retry=retry_block(max_attempts) if max_attempts > 1 else None,
            timeout=timeout,
            route={"name": "next-hop", "inner_hops": inner_hops},
            upstream={"retry_budget": dict(GENEROUS_BUDGET)},
            layer_id=name,
            propagate_baggage=baggage)
        return self.start_proxy(config)

    def build_chain(self, *, a, b, c, propagate=OTEL_APP, copy_response="x-retry-exhausted"):
        """a, b, c: keyword dicts for start_layer (max_attempts, inner_hops,
        baggage, timeout). Started bottom-up: each hop needs the next one's port."""
        origin = self.start_origin(default=h.respond(503, body=ORIGIN_BODY), name="origin")
        layer_c = self.start_layer("C", origin.port, **c)
        app2 = ChainApp(self, "app2", layer_c.port(), propagate, copy_response)
        layer_b = self.start_layer("B", app2.port, **b)
        app1 = ChainApp(self, "app1", layer_b.port(), propagate, copy_response)
        layer_a = self.start_layer("A", app1.port, **a)
        return Chain(origin, {"A": layer_a, "B": layer_b, "C": layer_c},
                     {"app1": app1, "app2": app2})

    def send_requests(self, chain, scenario, headers=(), n=REQUESTS):
        """n sequential client requests to A, each on its own path. Returns
        (responses, {path: origin arrivals for that path})."""
        responses, paths = [], []
        with h.Conn(chain.layers["A"].port(), timeout=20) as conn:
            for i in range(n):
                path = "/chain/%s/%d" % (scenario, i)
                paths.append(path)
                responses.append(conn.request("GET", path, headers=list(headers)))
        # Every attempt is answered before the client's response leaves A, so
        # the counts are final; the pause would expose a straggler anyway.
        time.sleep(0.2)
        arrivals = chain.origin.snapshot()
        by_path = {p: [a for a in arrivals if a.target == p] for p in paths}
        stray = [a for a in arrivals if a.target not in by_path]
        self.assertEqual(stray, [], "origin arrivals on paths the client never asked for")
        return responses, by_path

    def check_counts(self, scenario, by_path, expected_each):
        counts = [len(v) for v in by_path.values()]
        report(scenario, "origin arrivals per client request %s (total %d for %d requests, "
               "expected %d each)" % (counts, sum(counts), len(counts), expected_each))
        self.assertEqual(counts, [expected_each] * len(counts),
                         "origin arrivals per client request")

    def check_client_saw_exhausted(self, scenario, responses, attempts):
        seen = [(r.status, r.header("x-retry-exhausted"), r.body) for r in responses]
        report(scenario, "client saw (status, x-retry-exhausted): %s" % sorted(
            {(s, e) for s, e, _ in seen}))
        self.assertEqual(seen, [(503, str(attempts), ORIGIN_BODY)] * len(responses))

    def layer_metrics(self, chain, scenario, n):
        """Prints and returns {layer: (attempts, declined outer_owner,
        declined attempts_exhausted, declined inner_exhausted)}."""
        out = {}
        for name in ("A", "B", "C"):
            def m(metric, **labels):
                return int(chain.metric(name, metric, route="next-hop", **labels))
            out[name] = {
                "attempts": m("onelayer_upstream_attempts_total", upstream="origin"),
                "retries": sum(int(s.value) for s in promcheck.samples(
                    chain.layers[name].admin_get("/metrics").body.decode())
                    if s.name == "onelayer_retries_total" and s.labels.get("route") == "next-hop"),
                "outer_owner": m("onelayer_retries_declined_total", reason="outer_owner"),
                "attempts_exhausted": m("onelayer_retries_declined_total",
                                        reason="attempts_exhausted"),
                "inner_exhausted": m("onelayer_retries_declined_total", reason="inner_exhausted"),
            }
            report(scenario, "onelayer %s metrics after %d client requests: %s" % (
                name, n, out[name]))
        return out

    # -- scenarios ---------------------------------------------------------
    def test_protocol_forbid_with_baggage_gives_3_origin_arrivals_per_request(self):
        on = {"max_attempts": 3, "inner_hops": "forbid", "baggage": True}
        chain = self.build_chain(a=on, b=on, c=on)
        client_baggage = "tenant=acme,sampled=true;ttl=60"
        responses, by_path = self.send_requests(chain, "protocol",
                                                headers=[("baggage", client_baggage)])

        self.check_counts("protocol", by_path, 3)
        self.check_client_saw_exhausted("protocol", responses, 3)

        # A owns: it told app 1 so on every attempt, numbered 1..3.
        app1 = chain.apps["app1"].received()
        self.assertEqual([header_of(r, "x-retry-owner") for r in app1], ["A"] * 3 * REQUESTS)
        self.assertEqual([header_of(r, "x-retry-attempt") for r in app1],
                         ["1", "2", "3"] * REQUESTS)
        # Only baggage crossed the apps, and it still names A at the origin;
        # the client's own members are kept, in order, and the owner appears once.
        for arrivals in by_path.values():
            for a in arrivals:
                self.assertIsNone(a.header("x-retry-owner"), "the OTel app dropped it")
                members = baggage_members(",".join(a.header_all("baggage")))
                keys = [k for k, _ in members]
                self.assertEqual(keys.count("retry-owner"), 1, members)
                self.assertEqual(dict(members)["retry-owner"], "A", members)
                self.assertEqual([k for k in keys if k not in ("retry-owner", "retry-attempt")],
                                 ["tenant", "sampled"])
                # A's hidden-retry member: once, <16 hex digits>.<A's attempt>.
                self.assertEqual(keys.count("retry-attempt"), 1, members)
                self.assertRegex(dict(members)["retry-attempt"], r"^[0-9a-f]{16}\.[123]$")
                self.assertEqual(dict(members)["sampled"], "true;ttl=60")

        metrics = self.layer_metrics(chain, "protocol", REQUESTS)
        for inner in ("B", "C"):
            self.assertGreater(metrics[inner]["outer_owner"], 0, "%s declined as outer-owned" % inner)
            self.assertEqual(metrics[inner]["outer_owner"], 3 * REQUESTS,
                             "%s: one outer_owner decline per request it received" % inner)
            self.assertEqual(metrics[inner]["retries"], 0, "%s never retried" % inner)
        self.assertEqual(metrics["A"]["attempts"], 3 * REQUESTS)
        self.assertEqual(metrics["A"]["attempts_exhausted"], REQUESTS)

    def test_control_pass_without_baggage_gives_27_origin_arrivals_per_request(self):
        # No protocol anywhere: layers pass headers untouched and write no
        # baggage, and the apps relay nothing of onelayer's (no
        # x-retry-exhausted either). Each layer retries what it sees: 3 x 3 x 3.
        off = {"max_attempts": 3, "inner_hops": "pass", "baggage": False}
        chain = self.build_chain(a=off, b=off, c=off, copy_response="")
        responses, by_path = self.send_requests(chain, "control")

        self.check_counts("control", by_path, 27)
        self.assertEqual([(r.status, r.body) for r in responses], [(503, ORIGIN_BODY)] * REQUESTS)
        for arrivals in by_path.values():
            for a in arrivals:
                self.assertIsNone(a.header("x-retry-owner"))
                self.assertNotIn("retry-owner", a.header("baggage") or "")
        metrics = self.layer_metrics(chain, "control", REQUESTS)
        self.assertEqual(metrics["C"]["attempts"], 27 * REQUESTS)

    def test_exhausted_signal_alone_stops_outer_layers_at_3_arrivals(self):
        # Layers claim nothing downward (pass, no baggage), but the apps relay
        # x-retry-exhausted upward: C owns by being innermost, B and A take its
        # exhausted answer as final.
        off = {"max_attempts": 3, "inner_hops": "pass", "baggage": False}
        chain = self.build_chain(a=off, b=off, c=off)
        responses, by_path = self.send_requests(chain, "exhausted-signal-only")

        self.check_counts("exhausted-signal-only", by_path, 3)
        self.check_client_saw_exhausted("exhausted-signal-only", responses, 3)
        metrics = self.layer_metrics(chain, "exhausted-signal-only", REQUESTS)
        for outer in ("A", "B"):
            self.assertEqual(metrics[outer]["inner_exhausted"], REQUESTS, outer)
            self.assertEqual(metrics[outer]["retries"], 0, outer)

    def test_inner_layer_owns_when_outer_layers_do_not_retry(self):
        once = {"max_attempts": 1, "inner_hops": "forbid", "baggage": True}
        c = {"max_attempts": 3, "inner_hops": "forbid", "baggage": True}
        chain = self.build_chain(a=once, b=once, c=c)
        responses, by_path = self.send_requests(chain, "inner-layer-owns")

        self.check_counts("inner-layer-owns", by_path, 3)
        self.check_client_saw_exhausted("inner-layer-owns", responses, 3)
        # A and B never claimed ownership, so C saw no owner and owned the request.
        for arrivals in by_path.values():
            self.assertEqual([a.header("x-retry-owner") for a in arrivals], ["C"] * 3)
            self.assertEqual([a.header("x-retry-attempt") for a in arrivals], ["1", "2", "3"])
        for app in chain.apps.values():
            for r in app.received():
                self.assertIsNone(header_of(r, "x-retry-owner"), r)
                self.assertNotIn("retry-owner", header_of(r, "baggage") or "", r)
        self.layer_metrics(chain, "inner-layer-owns", REQUESTS)

    def test_mixed_envoy_and_linkerd_directives_never_reach_the_origin(self):
        # The apps forward every header here, so a directive A let through
        # would reach the origin: the test can see a leak.
        on = {"max_attempts": 3, "inner_hops": "forbid", "baggage": True}
        chain = self.build_chain(a=on, b=on, c=on, propagate=FORWARD_ALL)
        directives = [("x-envoy-retry-on", "5xx"), ("x-envoy-max-retries", "10"),
                      ("l5d-retry-http", "5xx"), ("l5d-retry-limit", "10")]
        responses, by_path = self.send_requests(chain, "mixed-directives", headers=directives)

        self.check_counts("mixed-directives", by_path, 3)
        self.check_client_saw_exhausted("mixed-directives", responses, 3)
        arrivals = [a for v in by_path.values() for a in v]
        # What each hop below A received, as (name, value) lists: app 1 sees
        # A's rewrite directly; the origin sees what survived the whole stack.
        hops = {"app1": [r["headers"] for r in chain.apps["app1"].received()],
                "app2": [r["headers"] for r in chain.apps["app2"].received()],
                "origin": [a.headers for a in arrivals]}
        for hop, requests in hops.items():
            self.assertEqual(len(requests), 3 * REQUESTS, hop)
            for headers in requests:
                names = [k.lower() for k, _ in headers]
                for name, _ in directives:
                    if name != "x-envoy-max-retries":
                        self.assertNotIn(name, names, "%s reached %s: %r" % (name, hop, headers))
                self.assertIn([v for k, v in headers if k.lower() == "x-envoy-max-retries"],
                              ([], ["0"]), "x-envoy-max-retries at %s" % hop)
                self.assertNotIn("10", [v.strip() for _, v in headers], "%s: %r" % (hop, headers))
        # Not vacuous: the apps carried A's own headers on, so a leak would show.
        self.assertEqual({header_of({"headers": hs}, "x-retry-owner") for hs in hops["app2"]},
                         {"A"}, "app 2 should see A's x-retry-owner forwarded by app 1")
        seen = sorted({n.lower() for a in arrivals for n, _ in a.headers})
        report("mixed-directives", "header names at the origin: %s" % seen)
        report("mixed-directives", "x-envoy-max-retries values at the origin: %s" % sorted(
            {v for a in arrivals for v in a.header_all("x-envoy-max-retries")}))

    def test_deadline_is_recomputed_on_each_retry_and_carried_to_the_origin(self):
        # app 1 and app 2 carry what is left of x-request-timeout-ms (as a
        # deadline-aware app would), so A's deadline reaches C and the origin.
        a = {"max_attempts": 3, "inner_hops": "forbid", "baggage": True, "timeout": "2s"}
        inner = {"max_attempts": 3, "inner_hops": "forbid", "baggage": True, "timeout": "10s"}
        chain = self.build_chain(a=a, b=inner, c=inner, propagate=DEADLINE_AWARE_APP)
        responses, by_path = self.send_requests(chain, "deadline")

        self.check_counts("deadline", by_path, 3)
        self.check_client_saw_exhausted("deadline", responses, 3)
        from_a = [int(header_of(r, "x-request-timeout-ms")) for r in chain.apps["app1"].received()]
        for i, (path, arrivals) in enumerate(by_path.items()):
            at_origin = [int(a.header("x-request-timeout-ms")) for a in arrivals]
            sent_by_a = from_a[3 * i:3 * i + 3]
            report("deadline", "%s: x-request-timeout-ms from A %s, at the origin %s" % (
                path, sent_by_a, at_origin))
            for values in (sent_by_a, at_origin):
                self.assertTrue(all(0 < v <= 2000 for v in values), values)
                self.assertEqual(values, sorted(values, reverse=True), values)
                self.assertEqual(len(set(values)), len(values), "strictly decreasing %s" % values)
            # Further down the stack less of the same deadline is left.
            self.assertTrue(all(o <= s for o, s in zip(at_origin, sent_by_a)),
                            (at_origin, sent_by_a))


if __name__ == "__main__":
    unittest.main()
