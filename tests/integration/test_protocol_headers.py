"""The single-layer protocol on one onelayer, request by request: the headers
it writes per inner_hops mode, the configurable names of the `headers:` block,
and what it does with an owner or an exhausted answer that arrives."""
import time
import unittest

import harness as h
from harness import IntegrationTest

RETRY = {"max_attempts": 3, "backoff": {"base": "5ms", "cap": "10ms"}}
DIRECTIVES = [("x-envoy-retry-on", "5xx"), ("x-envoy-max-retries", "10"), ("l5d-retry-limit", "7")]


class ProtocolHeadersTest(IntegrationTest):
    def one_request(self, origin, req_headers=(), **overrides):
        proxy = self.proxy_for(origin, **overrides)
        with h.Conn(proxy.port()) as c:
            return c.request("GET", "/p", headers=list(req_headers)), proxy

    def test_forbid_claims_ownership_and_strips_foreign_directives(self):
        origin = self.start_origin(default=h.respond(200))
        r, _ = self.one_request(origin, DIRECTIVES, retry=RETRY, route={"inner_hops": "forbid"})
        self.assertEqual(r.status, 200)
        a = origin.arrivals[0]
        self.assertEqual(a.header("x-retry-owner"), "itest")
        self.assertEqual(a.header("x-retry-attempt"), "1")
        self.assertEqual(a.header_all("x-envoy-max-retries"), ["0"])
        self.assertIn("retry-owner=itest", a.header("baggage"))
        self.assertFalse(a.has_header("x-envoy-retry-on"))
        self.assertFalse(a.has_header("l5d-retry-limit"))
        self.assertLessEqual(int(a.header("x-request-timeout-ms")), 15000)

    def test_strip_removes_directives_without_claiming(self):
        origin = self.start_origin(default=h.respond(200))
        self.one_request(origin, DIRECTIVES, retry=RETRY, route={"inner_hops": "strip"})
        a = origin.arrivals[0]
        self.assertFalse(a.has_header("x-retry-owner"))
        self.assertFalse(a.has_header("x-envoy-retry-on"))
        self.assertFalse(a.has_header("x-envoy-max-retries"))
        self.assertFalse(a.has_header("l5d-retry-limit"))

    def test_pass_forwards_directives_untouched(self):
        origin = self.start_origin(default=h.respond(200))
        self.one_request(origin, DIRECTIVES, retry=RETRY, route={"inner_hops": "pass"})
        a = origin.arrivals[0]
        self.assertFalse(a.has_header("x-retry-owner"))
        self.assertEqual(a.header("x-envoy-retry-on"), "5xx")
        self.assertEqual(a.header("x-envoy-max-retries"), "10")
        self.assertFalse(a.has_header("x-request-timeout-ms"))

    def test_headers_block_renames_the_protocol_headers(self):
        origin = self.start_origin(script=[h.respond(503), h.respond(503), h.respond(503)])
        r, _ = self.one_request(origin, retry=RETRY, headers={
            "retry_owner": "x-acme-owner", "retry_attempt": "x-acme-attempt",
            "request_timeout_ms": "x-acme-budget-ms", "retry_exhausted": "x-acme-exhausted",
            "baggage_member": "acme-owner"})
        self.assertEqual(r.status, 503)
        self.assertEqual(r.header("x-acme-exhausted"), "3")
        self.assertIsNone(r.header("x-retry-exhausted"))
        self.assertEqual([a.header("x-acme-attempt") for a in origin.arrivals], ["1", "2", "3"])
        a = origin.arrivals[0]
        self.assertEqual(a.header("x-acme-owner"), "itest")
        self.assertFalse(a.has_header("x-retry-owner"))
        self.assertTrue(a.has_header("x-acme-budget-ms"))
        self.assertIn("acme-owner=itest", a.header("baggage"))

    def test_renamed_owner_header_is_honoured_on_arrival(self):
        origin = self.start_origin(default=h.respond(503))
        r, _ = self.one_request(origin, [("x-acme-owner", "edge")], retry=RETRY,
                                headers={"retry_owner": "x-acme-owner"})
        self.assertEqual(r.status, 503)
        self.assertEqual(origin.count(), 1, "an outer owner was announced: one attempt only")
        self.assertIsNone(r.header("x-retry-exhausted"), "the owner decides, not this layer")
        self.assertEqual(origin.arrivals[0].header("x-acme-owner"), "edge")

    def test_baggage_owner_gets_one_attempt_and_passes_unchanged(self):
        origin = self.start_origin(default=h.respond(503))
        r, _ = self.one_request(origin, [("baggage", "user=1,retry-owner=gateway;p=1")], retry=RETRY)
        self.assertEqual(r.status, 503)
        self.assertEqual(origin.count(), 1)
        self.assertEqual(origin.arrivals[0].header("baggage"), "user=1,retry-owner=gateway;p=1")

    def test_inner_exhausted_answer_is_final(self):
        origin = self.start_origin(default=h.respond(503, headers=[("x-retry-exhausted", "3")]))
        r, _ = self.one_request(origin, retry=RETRY)
        self.assertEqual(origin.count(), 1)
        self.assertEqual(r.header("x-retry-exhausted"), "3", "the inner layer's count passes on")

    def test_incoming_request_timeout_shortens_the_deadline(self):
        origin = self.start_origin(default=h.hang())
        proxy = self.proxy_for(origin, retry=RETRY, timeout="10s")
        with h.Conn(proxy.port()) as c:
            t0 = time.monotonic()
            r = c.request("GET", "/p", headers=[("x-request-timeout-ms", "300")])
            elapsed = time.monotonic() - t0
        self.assertProxyError(r, 504, "deadline_exceeded")
        self.assertLess(elapsed, 2.0)
        self.assertLessEqual(int(origin.arrivals[0].header("x-request-timeout-ms")), 300)


if __name__ == "__main__":
    unittest.main()
