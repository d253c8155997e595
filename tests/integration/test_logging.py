"""Logs (docs/operations.md "Logs"): one access line per
downstream request on stdout in text (key=value) or JSON, with attempts,
retry reasons and declined reason; process logs on stderr, JSON too with
--log-format json."""

import json
import re
import signal
import subprocess
import unittest

import harness as h
import ops_helpers as ops
from harness import IntegrationTest

JSON_FIELDS = {"time": str, "listener": str, "route": str, "method": str, "path": str, "status": int,
               "attempts": int, "hedges": int, "retry_reasons": str, "declined": str, "upstream": str,
               "duration_ms": (int, float), "bytes_in": int, "bytes_out": int,
               "protocol": str, "stream": int}
TEXT_KEYS = ["listener", "route", "method", "path", "status", "attempts", "hedges", "retry_reasons", "declined",
             "upstream", "duration_ms", "bytes_in", "bytes_out", "protocol", "stream"]
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
RETRY = {"max_attempts": 3, "backoff": ops.FAST_BACKOFF}


class LoggingTest(IntegrationTest):
    def start(self, log_format, script=(), default=None, **extra):
        self.origin = self.start_origin(script=list(script), default=default)
        self.proxy = self.start_proxy(ops.config(
            [ops.listener("main", [ops.route("logged", retry=RETRY, timeout="5s")])],
            [ops.upstream("origin", [self.origin.endpoint])], **extra), log_format=log_format)
        return self.proxy.port()

    def test_text_access_line_has_every_field_and_the_retry_story(self):
        port = self.start("text", [h.respond(503), h.respond(503)], h.respond(200, body=b"abc"))
        with h.Conn(port) as c:
            self.assertEqual(c.request("PUT", "/items/7", body=b"hello").status, 200)
        (rec,) = ops.access_records(self.proxy, 1, lambda r: r.get("path") == "/items/7")
        for key in TEXT_KEYS:
            self.assertIn(key, rec, rec)
        self.assertRegex(rec["time"], ISO_UTC)
        self.assertEqual((rec["listener"], rec["route"], rec["method"], rec["status"]),
                         ("main", "logged", "PUT", "200"))
        self.assertEqual(rec["attempts"], "3")
        self.assertEqual(rec["retry_reasons"], "503,503")
        self.assertEqual(rec["declined"], "-")
        self.assertEqual(rec["upstream"].split(","), [self.origin.endpoint] * 3)
        self.assertEqual(rec["bytes_in"], "5")
        self.assertGreater(int(rec["bytes_out"]), 3)
        self.assertGreater(float(rec["duration_ms"]), 0)

    def test_text_access_line_names_the_declined_reason(self):
        port = self.start("text", default=h.respond(503))
        with h.Conn(port) as c:
            self.assertEqual(c.request("GET", "/down").status, 503)
            self.assertEqual(c.request("POST", "/order", body=b"x").status, 503)
        recs = ops.access_records(self.proxy, 2, lambda r: r.get("route") == "logged")
        by_path = {r["path"]: r for r in recs}
        self.assertEqual((by_path["/down"]["attempts"], by_path["/down"]["declined"],
                          by_path["/down"]["retry_reasons"]), ("3", "attempts_exhausted", "503,503"))
        self.assertEqual((by_path["/order"]["attempts"], by_path["/order"]["declined"]),
                         ("1", "not_idempotent"))

    def test_text_values_with_spaces_or_quotes_stay_one_parseable_field(self):
        port = self.start("text")
        path = '/q?x="a%20b"'
        with h.Conn(port) as c:
            self.assertEqual(c.request("GET", path).status, 200)
        (rec,) = ops.access_records(self.proxy, 1, lambda r: r.get("route") == "logged")
        self.assertEqual(rec["path"], path)
        self.assertEqual(rec["status"], "200")

    def test_json_access_lines_parse_with_every_field_and_type(self):
        port = self.start("json", [h.respond(503)], h.respond(200, body=b"ok"))
        with h.Conn(port) as c:
            self.assertEqual(c.request("GET", '/j/"quoted"\\path').status, 200)
            self.assertEqual(c.request("POST", "/j/2", body=b"12345").status, 200)
            self.assertProxyError(c.request("GET", "/j/3", headers=[("x-request-timeout-ms", "0")]),
                                  504, "deadline_exceeded")
        self.proxy.stop()
        lines = self.proxy.access_log()
        self.assertEqual(len(lines), 3, lines)
        records = [json.loads(line) for line in lines]  # every stdout line is JSON
        for rec in records:
            for key, kind in JSON_FIELDS.items():
                self.assertIn(key, rec, rec)
                self.assertIsInstance(rec[key], kind, "%s in %r" % (key, rec))
            self.assertRegex(rec["time"], ISO_UTC)
        first, second, third = records
        self.assertEqual((first["path"], first["status"], first["attempts"], first["retry_reasons"]),
                         ('/j/"quoted"\\path', 200, 2, "503"))
        self.assertEqual((second["method"], second["bytes_in"], second["attempts"], second["declined"]),
                         ("POST", 5, 1, ""))
        self.assertEqual((third["status"], third["attempts"]), (504, 0))
        for line in self.proxy.stderr().splitlines():
            json.loads(line)

    def test_json_stderr_stays_json_when_a_message_contains_quotes(self):
        # Reload errors quote the bad value: invalid duration "soon".
        self.start("json")
        good = self.proxy.config_text
        ops.rewrite_config(self.proxy, good.replace("drain_timeout: 2s", 'drain_timeout: "soon"'))
        self.assertEqual(ops.admin(self.proxy, "POST", "/reload").status, 500)
        self.proxy.signal(signal.SIGHUP)
        self.proxy.stop()
        lines = self.proxy.stderr().splitlines()
        self.assertTrue(any("soon" in line for line in lines), lines)
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError as e:
                self.fail("stderr line is not JSON (%s): %s" % (e, line))
            for key in ("time", "level", "msg"):
                self.assertIn(key, rec)
        errors = [json.loads(l) for l in lines if "soon" in l]
        self.assertEqual({e["level"] for e in errors}, {"error"})
        self.assertIn('"soon"', errors[0]["msg"])

    def test_text_stderr_has_level_and_lifecycle_lines(self):
        self.start("text")
        self.proxy.stop()
        err = self.proxy.stderr()
        self.assertRegex(err, r"(?m)^\S+ info \[\d+\] .*ready")
        self.assertRegex(err, r"(?m)^\S+ info \[\d+\] .*stopped")

    def test_log_level_warn_hides_info_lines(self):
        self.origin = self.start_origin()
        self.proxy = self.start_proxy(h.simple_config(self.origin.port), log_level="warn")
        with h.Conn(self.proxy.port()) as c:
            self.assertEqual(c.request("GET", "/").status, 200)
        self.proxy.stop()
        self.assertNotIn(" info ", self.proxy.stderr())
        self.assertEqual(len(self.proxy.access_log()), 1, "the access log does not depend on --log-level")

    def test_access_log_is_flushed_while_running_not_only_at_exit(self):
        port = self.start("text")
        with h.Conn(port) as c:
            self.assertEqual(c.request("GET", "/flush-me").status, 200)
        recs = ops.access_records(self.proxy, 1, lambda r: r.get("path") == "/flush-me", timeout=2)
        self.assertEqual(len(recs), 1, "access line not flushed within 2 s")
        self.assertTrue(self.proxy.running())

    def test_unrouted_request_is_logged_with_its_error(self):
        self.origin = self.start_origin()
        self.proxy = self.start_proxy(ops.config(
            [ops.listener("main", [ops.route("only", match={"path_prefix": "/only"})])],
            [ops.upstream("origin", [self.origin.endpoint])]), log_format="json")
        with h.Conn(self.proxy.port()) as c:
            self.assertProxyError(c.request("GET", "/elsewhere"), 404, "no_route")
        recs = ops.access_records(self.proxy, 1, lambda r: r.get("status") == 404, fmt="json")
        self.assertEqual(len(recs), 1)
        self.assertEqual((recs[0]["listener"], recs[0]["error"]), ("main", "no_route"))
        # Which request found no route is what an operator looks for.
        self.assertEqual((recs[0]["method"], recs[0]["path"]), ("GET", "/elsewhere"), recs[0])


    def test_listener_with_access_log_false_writes_no_access_lines(self):
        # Two listeners on one upstream: "quiet" says access_log: false, so
        # neither its routed requests (HTTP/1.1 and HTTP/2), its refusals nor
        # its unrouted requests leave a line; "loud" still logs, and the
        # quiet listener's requests are still counted in the metrics.
        self.origin = self.start_origin(default=h.respond(200, body=b"ok"))
        route = ops.route("r", match={"path_prefix": "/r"})
        self.proxy = self.start_proxy(ops.config(
            [ops.listener("loud", [route]), ops.listener("quiet", [route], access_log=False)],
            [ops.upstream("origin", [self.origin.endpoint])]))
        quiet = self.proxy.port("quiet")
        with h.Conn(quiet) as c:
            self.assertEqual(c.request("GET", "/r/quiet-h1").status, 200)
            self.assertProxyError(c.request("GET", "/unrouted-quiet"), 404, "no_route")
        r = subprocess.run(["nghttp", "http://127.0.0.1:%d/r/quiet-h2" % quiet], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run(["nghttp", "http://127.0.0.1:%d/unrouted-quiet-h2" % quiet], capture_output=True,
                           text=True, timeout=30)
        self.assertIn("no_route", r.stdout)
        with h.Conn(self.proxy.port("loud")) as c:
            self.assertEqual(c.request("GET", "/r/loud").status, 200)
        # The loud line is written after the quiet ones on the same worker
        # path; once it is flushed, a quiet line would have been too.
        (loud,) = ops.access_records(self.proxy, 1, lambda rec: rec.get("path") == "/r/loud")
        self.assertEqual(loud["listener"], "loud")
        quiet_lines = [line for line in self.proxy.access_log() if "quiet" in line]
        self.assertEqual(quiet_lines, [])
        text = ops.admin(self.proxy, "GET", "/metrics").body.decode()
        for protocol in ("http1", "h2"):
            self.assertRegex(text, r'onelayer_requests_total\{listener="quiet",route="r",code="200",protocol="%s"\} 1\b'
                             % protocol)


if __name__ == "__main__":
    unittest.main()
