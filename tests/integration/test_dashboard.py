"""deploy/grafana/onelayer-dashboard.json and deploy/prometheus/onelayer-alerts.yml
(docs/operations.md "Dashboard and alerts"): importable as is, every metric and label its
queries use is one a running onelayer exports, every query is valid PromQL,
and the sample alert rules pass `promtool check rules` and their unit tests."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import harness as h
import ops_helpers as ops
import promcheck
from fleet_helpers import RedisServer
from harness import IntegrationTest, wait_until

SOURCE = os.environ.get("ONELAYER_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
DASHBOARD = os.path.join(SOURCE, "deploy", "grafana", "onelayer-dashboard.json")
ALERTS = os.path.join(SOURCE, "deploy", "prometheus", "onelayer-alerts.yml")
ALERT_TESTS = os.path.join(SOURCE, "deploy", "prometheus", "onelayer-alerts.test.yml")
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

# Exported only by a onelayer with a fleet: block (docs/fleet.md).
FLEET_METRICS = ("onelayer_fleet_state", "onelayer_fleet_members", "onelayer_fleet_first_attempts_per_second",
                 "onelayer_fleet_retries_per_second", "onelayer_fleet_share", "onelayer_fleet_sync_seconds_bucket",
                 "onelayer_fleet_sync_errors_total")
METRIC_REF = re.compile(r"\bonelayer_[a-zA-Z0-9_:]+")
BY_CLAUSE = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"")
LABEL_VALUES = re.compile(r"label_values\((?:[^,()]*(?:\{[^}]*\})?\s*,)?\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)")
# Labels Prometheus adds when it scrapes, and the histogram bucket label.
TARGET_LABELS = {"job", "instance", "le"}
# Grafana variables, replaced to check the queries as plain PromQL.
GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h", "$instance": ".*",
                "$route": ".*"}


def load_dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def all_panels(dash):
    for p in dash.get("panels", []):
        yield p
        for inner in p.get("panels", []):
            yield inner


def queries(dash):
    """(where, PromQL text) of every panel target and templating query."""
    out = []
    for p in all_panels(dash):
        for t in p.get("targets", []):
            out.append(("panel %r %s" % (p.get("title"), t.get("refId")), t["expr"]))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            out.append(("variable %s" % v["name"], q))
    return out


def as_promql(expr):
    for var, value in GRAFANA_VARS.items():
        expr = expr.replace(var, value)
    m = re.fullmatch(r"\s*label_values\((.*),\s*[a-zA-Z_]\w*\s*\)\s*", expr)
    if m:  # Grafana's label_values(series, label): the series part is PromQL
        expr = m.group(1)
    return expr


def alert_exprs():
    exprs = []
    with open(ALERTS) as f:
        text = f.read()
    for m in re.finditer(r"expr:\s*(\|\n((?:\s{10,}.*\n)+)|.*)", text):
        exprs.append(m.group(2) if m.group(2) else m.group(1))
    return exprs


class DashboardFileTest(unittest.TestCase):
    def test_dashboard_is_importable_json_with_a_prometheus_datasource_input(self):
        dash = load_dashboard()
        inputs = dash.get("__inputs", [])
        self.assertEqual([(i["name"], i["type"], i["pluginId"]) for i in inputs],
                         [("DS_PROMETHEUS", "datasource", "prometheus")])
        self.assertIsNone(dash.get("id"), "an exported dashboard has id null")
        self.assertTrue(dash.get("uid") and dash.get("title"))
        self.assertIsInstance(dash.get("schemaVersion"), int)
        ids = [p["id"] for p in all_panels(dash)]
        self.assertEqual(len(ids), len(set(ids)), "panel ids repeat")
        for p in all_panels(dash):
            if p["type"] == "row":
                continue
            self.assertEqual(p["datasource"], {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}, p["title"])
            self.assertTrue(p["targets"], p["title"])
            for t in p["targets"]:
                self.assertEqual(t["datasource"]["uid"], "${DS_PROMETHEUS}", p["title"])
            g = p["gridPos"]
            self.assertLessEqual(g["x"] + g["w"], 24, p["title"])

    def test_dashboard_covers_what_issue_5_asks_for(self):
        exprs = " ".join(e for _, e in queries(load_dashboard()))
        for name in ("onelayer_requests_total", "onelayer_upstream_attempts_total",
                     "onelayer_amplification_ratio", "onelayer_retries_total",
                     "onelayer_retries_declined_total", "onelayer_retry_budget_tokens",
                     "onelayer_request_duration_seconds_bucket", "onelayer_circuit_breaker_state",
                     "onelayer_attempt_failures_total", "onelayer_hidden_retries_total", "onelayer_shed_total",
                     "onelayer_faults_injected_total"):
            self.assertIn(name, exprs)
        for q in ("0.5", "0.95", "0.99"):
            self.assertIn("histogram_quantile(%s," % q, exprs)

    def test_fleet_row_shows_every_fleet_metric(self):
        dash = load_dashboard()
        panels = dash["panels"]
        (row,) = [i for i, p in enumerate(panels) if p["type"] == "row" and p["title"].startswith("Fleet retry budget")]
        inside = []
        for p in panels[row + 1:]:
            if p["type"] == "row":
                break
            inside += [t["expr"] for t in p["targets"]]
        exprs = " ".join(inside)
        for name in FLEET_METRICS:
            self.assertIn(name, exprs)
        self.assertIn("histogram_quantile(0.99, sum by (le) (rate(onelayer_fleet_sync_seconds_bucket", exprs)

    def test_amplification_panel_draws_the_alert_threshold(self):
        dash = load_dashboard()
        (panel,) = [p for p in all_panels(dash)
                    if any("onelayer_amplification_ratio" in t["expr"] for t in p.get("targets", []))]
        defaults = panel["fieldConfig"]["defaults"]
        steps = [s["value"] for s in defaults["thresholds"]["steps"] if s["value"] is not None]
        self.assertEqual(steps, [1.5])
        self.assertIn("line", defaults["custom"]["thresholdsStyle"]["mode"])
        with open(ALERTS) as f:
            self.assertIn("onelayer_amplification_ratio) > 1.5", f.read(),
                          "dashboard threshold and alert threshold differ")

    @unittest.skipUnless(os.path.exists(PROMTOOL), "promtool not installed")
    def test_every_dashboard_query_is_valid_promql(self):
        # promtool parses rule expressions: wrap each query in a recording rule.
        rules = ["groups:", "  - name: dashboard", "    rules:"]
        for i, (where, expr) in enumerate(queries(load_dashboard())):
            rules.append("      - record: dashboard:query_%d" % i)
            rules.append("        expr: %s" % json.dumps(as_promql(expr)))
        d = tempfile.mkdtemp(prefix="onelayer-dash-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "queries.yml")
        with open(path, "w") as f:
            f.write("\n".join(rules) + "\n")
        p = subprocess.run([PROMTOOL, "check", "rules", path], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    @unittest.skipUnless(os.path.exists(PROMTOOL), "promtool not installed")
    def test_alert_rules_pass_promtool_check_rules(self):
        p = subprocess.run([PROMTOOL, "check", "rules", ALERTS], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("4 rules found", p.stdout)

    @unittest.skipUnless(os.path.exists(PROMTOOL), "promtool not installed")
    def test_alert_rules_unit_tests_pass(self):
        p = subprocess.run([PROMTOOL, "test", "rules", os.path.basename(ALERT_TESTS)], capture_output=True,
                           text=True, timeout=60, cwd=os.path.dirname(ALERT_TESTS))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


class DashboardAgainstLiveMetricsTest(IntegrationTest):
    def live_metrics(self):
        """/metrics of a onelayer that has answered, retried and declined."""
        origin = self.start_origin(script=[h.respond(503)], default=h.respond(200))
        proxy = self.start_proxy(ops.config(
            [ops.listener("main", [ops.route("r", retry={"max_attempts": 2, "backoff": ops.FAST_BACKOFF})],
                          max_concurrent_requests=100)],
            [ops.upstream("origin", [origin.endpoint],
                          circuit_breaker={"consecutive_failures": 5, "open_for": "1s"})]))
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/").status, 200)
            self.assertEqual(c.request("POST", "/", body=b"x").status, 200)
            # An owned request an Envoy hop had retried: a hidden retry.
            owned = [("x-retry-owner", "edge"), ("x-envoy-attempt-count", "2")]
            self.assertEqual(c.request("GET", "/", headers=owned).status, 200)
        return ops.settled_metrics(self, proxy, "r", 3)

    def live_fleet_metrics(self):
        """/metrics of a onelayer with a fleet: block, synced with a real
        redis-server, that has sent a request under a fleet budget."""
        redis = RedisServer()
        self.addCleanup(redis.cleanup)
        redis.start()
        origin = self.start_origin(default=h.respond(200))
        proxy = self.start_proxy(h.simple_config(
            origin.port, upstream={"retry_budget": {"ratio": 0.1, "min_per_second": 5, "scope": "fleet",
                                                    "service": "svc"}},
            fleet={"redis": "127.0.0.1:%d" % redis.port, "sync_interval": "200ms", "timeout": "100ms",
                   "stale_after": "600ms"}))
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/").status, 200)

        def synced():
            text = ops.metrics(self, proxy)
            return text if (ops.value(text, "onelayer_fleet_state", service="svc") == 1
                            and ops.value(text, "onelayer_fleet_sync_seconds_count") > 0) else None
        self.assertTrue(wait_until(synced, timeout=5), "the fleet proxy never synced")
        return synced()

    def test_every_metric_and_label_the_dashboard_and_alerts_query_is_exported(self):
        # The fleet row's metrics exist only with a fleet: block, so they are
        # looked up in a second proxy that has one (and a real Redis).
        text = self.live_metrics()
        fleet_text = self.live_fleet_metrics()
        exported = {}  # sample name -> label names seen
        for s in promcheck.samples(text):
            exported.setdefault(s.name, set()).update(s.labels)
        self.assertEqual([n for n in exported if n.startswith("onelayer_fleet_")], [],
                         "fleet metrics without a fleet: block")
        for s in promcheck.samples(fleet_text):
            if s.name.startswith("onelayer_fleet_"):
                exported.setdefault(s.name, set()).update(s.labels)
        self.assertTrue(set(FLEET_METRICS) <= set(exported), sorted(exported))
        where_exprs = queries(load_dashboard()) + [("alert rule", e) for e in alert_exprs()]
        self.assertGreater(len(where_exprs), 10)
        referenced = set()
        for where, expr in where_exprs:
            names = set(METRIC_REF.findall(expr))
            self.assertTrue(names, "%s queries no onelayer metric: %s" % (where, expr))
            referenced |= names
            missing = sorted(n for n in names if n not in exported)
            self.assertEqual(missing, [], "%s queries metrics /metrics does not export: %s" % (where, expr))
            allowed = TARGET_LABELS.union(*(exported[n] for n in names))
            used = set(MATCHER.findall(expr))
            for group in BY_CLAUSE.findall(expr):
                used |= {x.strip() for x in group.split(",") if x.strip()}
            used |= set(LABEL_VALUES.findall(expr))
            self.assertEqual(sorted(used - allowed), [], "%s uses labels its metrics lack: %s" % (where, expr))
        print("\ndashboard + alerts reference %d exported metrics" % len(referenced))


if __name__ == "__main__":
    unittest.main()
