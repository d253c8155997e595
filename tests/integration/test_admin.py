"""The admin listener (docs/operations.md "Admin listener"): each endpoint through the
real binary, and that the proxy listeners never expose it."""

import os
import signal
import tempfile
import time
import unittest

import harness as h
import ops_helpers as ops
import promcheck
from harness import IntegrationTest

# The retry metrics of docs/operations.md: every family, with its labels.
RETRY_METRICS = {
    "onelayer_requests_total": {"listener", "route", "code", "protocol"},
    "onelayer_upstream_attempts_total": {"route", "upstream"},
    "onelayer_retries_total": {"route", "reason"},
    "onelayer_retries_declined_total": {"route", "reason"},
    "onelayer_retry_budget_tokens": {"upstream"},
    "onelayer_amplification_ratio": {"route"},
    "onelayer_request_duration_seconds": {"route"},
    "onelayer_config_reloads_total": {"result"},
}
RETRY_TYPES = {
    "onelayer_requests_total": "counter",
    "onelayer_upstream_attempts_total": "counter",
    "onelayer_retries_total": "counter",
    "onelayer_retries_declined_total": "counter",
    "onelayer_retry_budget_tokens": "gauge",
    "onelayer_amplification_ratio": "gauge",
    "onelayer_request_duration_seconds": "histogram",
    "onelayer_config_reloads_total": "counter",
}
DECLINE_REASONS = ["not_idempotent", "body_too_large", "attempts_exhausted", "budget_exhausted",
                   "deadline", "retry_after_beyond_deadline", "outer_owner", "inner_exhausted",
                   "circuit_open", "server_pushback", "deadline_too_short"]


class AdminEndpointsTest(IntegrationTest):
    def setUp(self):
        self.origin = self.start_origin()
        self.proxy = self.start_proxy(ops.config(
            [ops.listener("edge", [ops.route("api-read", match={"path_prefix": "/api"},
                                             retry={"max_attempts": 3, "backoff": ops.FAST_BACKOFF})])],
            [ops.upstream("origin", [self.origin.endpoint])]))

    def test_healthz_answers_200(self):
        r = ops.admin(self.proxy, "GET", "/healthz")
        self.assertEqual(r.status, 200, r)

    def test_ready_answers_200_once_listeners_are_bound(self):
        r = ops.admin(self.proxy, "GET", "/ready")
        self.assertEqual(r.status, 200, r)

    def test_unknown_admin_paths_answer_404(self):
        for path in ("/", "/nope", "/metricsx", "/healthz/extra", "/admin/metrics"):
            r = ops.admin(self.proxy, "GET", path)
            self.assertEqual(r.status, 404, "%s -> %r" % (path, r))

    def test_reload_needs_post_and_read_endpoints_refuse_post(self):
        self.assertEqual(ops.admin(self.proxy, "GET", "/reload").status, 405)
        self.assertEqual(ops.admin(self.proxy, "POST", "/metrics").status, 405)

    def test_config_is_yaml_naming_listener_route_and_upstream_and_passes_check(self):
        r = ops.admin(self.proxy, "GET", "/config")
        self.assertEqual(r.status, 200, r)
        text = r.body.decode()
        for name in ("edge", "api-read", "origin", self.origin.endpoint, "/api"):
            self.assertIn(name, text)
        path = os.path.join(tempfile.mkdtemp(prefix="onelayer-config-"), "from-admin.yaml")
        self.addCleanup(lambda: os.path.exists(path) and os.remove(path))
        with open(path, "w") as f:
            f.write(text)
        code, out, err = h.run_onelayer(["--check", "--config", path])
        self.assertEqual(code, 0, "onelayer --check rejected /config output:\n%s%s\n%s" % (out, err, text))

    def test_metrics_is_valid_prometheus_text_with_every_retry_metric_and_label(self):
        with h.Conn(self.proxy.port("edge")) as c:
            self.assertEqual(c.request("GET", "/api/x").status, 200)
        ops.settled_metrics(self, self.proxy, "api-read", 1)
        r = ops.admin(self.proxy, "GET", "/metrics")
        self.assertEqual(r.status, 200, r)
        self.assertIn("text/plain", r.header("content-type"))
        self.assertIn("version=0.0.4", r.header("content-type"))
        text = r.body.decode()
        self.assertEqual(promcheck.check(text), [], text)  # with promtool when installed
        families = promcheck.parse(text)
        for name, labels in RETRY_METRICS.items():
            self.assertIn(name, families, "family %s missing" % name)
            fam = families[name]
            self.assertEqual(fam.type, RETRY_TYPES[name], name)
            self.assertTrue(fam.samples, "%s has no samples" % name)
            for s in fam.samples:
                self.assertEqual(set(s.labels) - {"le"}, labels, "%s labels %r" % (name, s))
        # Per-route series of this route and per-upstream series of this upstream exist.
        self.assertEqual(ops.value(text, "onelayer_requests_total", listener="edge", route="api-read",
                                   code="200"), 1)
        self.assertEqual(ops.value(text, "onelayer_upstream_attempts_total", route="api-read",
                                   upstream="origin"), 1)
        self.assertIsNotNone(ops.value(text, "onelayer_retry_budget_tokens", upstream="origin"))
        self.assertIsNotNone(ops.value(text, "onelayer_amplification_ratio", route="api-read"))
        self.assertEqual(ops.value(text, "onelayer_request_duration_seconds_count", route="api-read"), 1)
        self.assertIsNotNone(ops.value(text, "onelayer_config_reloads_total", result="ok"))
        self.assertIsNotNone(ops.value(text, "onelayer_config_reloads_total", result="error"))
        got = {l["reason"] for l, _ in ops.series(text, "onelayer_retries_declined_total")
               if l["route"] == "api-read"}
        self.assertEqual(got, set(DECLINE_REASONS))

    def test_proxy_listener_never_serves_admin_paths(self):
        port = self.proxy.port("edge")
        for path in ("/metrics", "/healthz", "/ready", "/config"):
            with h.Conn(port) as c:
                r = c.request("GET", path)
            self.assertProxyError(r, 404, "no_route")
            self.assertNotIn(b"onelayer_requests_total", r.body)
        with h.Conn(port) as c:
            r = c.request("POST", "/reload")
        self.assertProxyError(r, 404, "no_route")
        self.assertEqual(ops.value(ops.metrics(self, self.proxy), "onelayer_config_reloads_total",
                                   result="ok"), 0, "a POST to the proxy listener reloaded")
        self.assertNoArrivals(self.origin, settle=0.05)


class AdminPathsGoToTheRouteTest(IntegrationTest):
    def test_catch_all_route_forwards_admin_paths_to_the_upstream(self):
        origin = self.start_origin(default=h.respond(200, body=b"from origin"))
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            for path in ("/metrics", "/ready"):
                r = c.request("GET", path)
                self.assertEqual((r.status, r.body), (200, b"from origin"), path)
        self.assertEqual([a.target for a in origin.wait_for(2)], ["/metrics", "/ready"])


class ReadyDuringDrainTest(IntegrationTest):
    def test_ready_turns_503_while_draining_and_healthz_stays_200(self):
        origin = self.start_origin(default=h.delay(1.5, h.respond(200, body=b"late")))
        proxy = self.proxy_for(origin, drain_timeout="5s")
        self.assertEqual(ops.admin(proxy, "GET", "/ready").status, 200)
        c = h.Conn(proxy.port())
        self.addCleanup(c.close)
        c.send(h.build_request("GET", "/slow"))
        origin.wait_for(1)
        proxy.signal(signal.SIGTERM)
        r = ops.wait_until(lambda: (lambda x: x if x.status == 503 else None)(
            ops.admin(proxy, "GET", "/ready")), timeout=1.0)
        self.assertIsNotNone(r, "/ready did not turn 503 within 1s of SIGTERM")
        self.assertEqual(ops.admin(proxy, "GET", "/healthz").status, 200)
        self.assertEqual(c.read_response().status, 200)
        self.assertEqual(proxy.stop(timeout=5), 0)


if __name__ == "__main__":
    unittest.main()
