"""gRPC through onelayer with real parts (docs/grpc.md): a python3-grpcio
server and client (generic handlers, bytes in and out, the client's own
retries off), onelayer between them over h2c on both sides, and a raw
HTTP/2 view of the frames where the shape on the wire is the point.

Every counter is checked exactly: each scenario makes a known number of
calls, the server counts arrivals, and /metrics is read once the calls are
counted.

These tests need the HTTP/2 listener (`listeners[].protocols`) and HTTP/2
upstreams (`upstreams[].protocol: h2c`); a build without them refuses the
config, and every test here fails saying so.
"""

import time
import unittest

import grpc_peers as gp
import harness as h
import ops_helpers as ops
from grpc_peers import grpc
from harness import IntegrationTest

FAST_BACKOFF = {"base": "1ms", "cap": "5ms", "jitter": "none"}
GENEROUS_BUDGET = {"ratio": 10, "min_per_second": 1000}


def grpc_retry(**extra):
    r = {"max_attempts": 3, "backoff": dict(FAST_BACKOFF), "idempotent": True}
    r.update(extra)
    return r


def grpc_config(server_port, retry=None, layer_id="itest", route_name="grpc", protocol="h2c", listener=None,
                **route_extra):
    route = ops.route(route_name, timeout="5s", retry=retry if retry is not None else grpc_retry(), **route_extra)
    up = ops.upstream("origin", ["127.0.0.1:%d" % server_port], protocol=protocol, retry_budget=dict(GENEROUS_BUDGET))
    lst = ops.listener("main", [route], protocols=["http1", "h2c"], **(listener or {}))
    return ops.config([lst], [up], layer_id=layer_id)


class GrpcTest(IntegrationTest):
    ROUTE = "grpc"

    def setUp(self):
        self.server = gp.GrpcServer()
        self.addCleanup(self.server.stop)

    def through(self, config):
        proxy = self.start_proxy(config)
        client = gp.GrpcClient(proxy.port())
        self.addCleanup(client.close)
        return proxy, client

    def settled(self, proxy, calls, route=None):
        return ops.settled_metrics(self, proxy, route or self.ROUTE, calls)

    def value(self, text, name, **labels):
        return ops.value(text, name, route=labels.pop("route", self.ROUTE), **labels) or 0

    def test_unavailable_trailers_only_twice_then_ok(self):
        proxy, client = self.through(grpc_config(self.server.port))
        self.server.push(gp.fail(), gp.fail())
        code, resp, _, _ = client.call(b"hi")
        self.assertEqual((code, resp), (grpc.StatusCode.OK, b"ok"))
        self.assertEqual(self.server.count(), 3)
        text = self.settled(proxy, 1)
        self.assertEqual(self.value(text, "onelayer_retries_total", reason="unavailable"), 2)
        self.assertEqual(self.value(text, "onelayer_upstream_attempts_total", upstream="origin"), 3)
        self.assertEqual(self.value(text, "onelayer_grpc_responses_total", grpc_status="0"), 1)
        self.assertEqual(self.value(text, "onelayer_grpc_responses_total", grpc_status="14"), 0)
        self.assertEqual(self.value(text, "onelayer_attempt_failures_total", attempt="first", outcome="unavailable"), 1)
        self.assertEqual(self.value(text, "onelayer_attempt_failures_total", attempt="retry", outcome="unavailable"), 1)
        # gRPC A6: retries say how many attempts came before them.
        self.assertEqual([c.header("grpc-previous-rpc-attempts") for c in self.server.calls], [None, "1", "2"])

    def test_unavailable_in_trailers_after_headers_twice_then_ok(self):
        proxy, client = self.through(grpc_config(self.server.port))
        self.server.push(gp.fail(headers_first=True), gp.fail(headers_first=True))
        code, resp, _, _ = client.call()
        self.assertEqual((code, resp), (grpc.StatusCode.OK, b"ok"))
        self.assertEqual(self.server.count(), 3)
        text = self.settled(proxy, 1)
        self.assertEqual(self.value(text, "onelayer_retries_total", reason="unavailable"), 2)
        self.assertEqual(self.value(text, "onelayer_grpc_responses_total", grpc_status="0"), 1)

    def test_server_stream_failing_after_two_messages_is_not_retried(self):
        proxy, client = self.through(grpc_config(self.server.port))
        self.server.push(gp.stream([b"one", b"two"], grpc.StatusCode.UNAVAILABLE), method=gp.STREAM)
        self.assertEqual(client.list(), (grpc.StatusCode.UNAVAILABLE, [b"one", b"two"]))
        self.assertEqual(self.server.count(), 1)
        counted = self.settled(proxy, 1)
        self.assertEqual([self.value(counted, "onelayer_retries_total", reason="unavailable"),
                          self.value(counted, "onelayer_grpc_responses_total", grpc_status="14")], [0, 1])

    def test_pushback_300ms_is_waited(self):
        proxy, client = self.through(grpc_config(self.server.port))
        self.server.push(gp.fail(pushback=300))
        code, _, _, _ = client.call()
        self.assertEqual(code, grpc.StatusCode.OK)
        self.assertEqual(self.server.count(), 2)
        gap = self.server.calls[1].arrived - self.server.calls[0].arrived
        self.assertGreaterEqual(gap, 0.3)
        self.assertLess(gap, 1.0)  # exact, not jittered upwards
        text = self.settled(proxy, 1)
        self.assertEqual(self.value(text, "onelayer_retries_total", reason="unavailable"), 1)

    def test_pushback_negative_stops_retries(self):
        proxy, client = self.through(grpc_config(self.server.port))
        self.server.push(gp.fail(pushback=-1))
        code, _, _, trailers = client.call()
        self.assertEqual(code, grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(trailers.get("grpc-retry-pushback-ms"), "-1")
        self.assertEqual(trailers.get("x-retry-exhausted"), "1")
        self.assertEqual(self.server.count(), 1)
        text = self.settled(proxy, 1)
        self.assertEqual(self.value(text, "onelayer_retries_declined_total", reason="server_pushback"), 1)
        self.assertEqual(self.value(text, "onelayer_retries_total", reason="unavailable"), 0)
        self.assertEqual(self.value(text, "onelayer_grpc_responses_total", grpc_status="14"), 1)

    def test_pushback_beyond_retry_after_max_is_not_waited(self):
        proxy, client = self.through(grpc_config(self.server.port, grpc_retry(retry_after={"honor": True, "max": "200ms"})))
        self.server.push(gp.fail(pushback=5000))
        t0 = time.monotonic()
        code, _, _, trailers = client.call()
        self.assertLess(time.monotonic() - t0, 1.0)
        self.assertEqual(code, grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(trailers.get("x-retry-exhausted"), "1")
        text = self.settled(proxy, 1)
        self.assertEqual(self.value(text, "onelayer_retries_declined_total", reason="retry_after_beyond_deadline"), 1)

    def test_caller_deadline_reaches_the_server_on_every_attempt(self):
        # How it shrinks per attempt is checked on the wire, where it is exact
        # (GrpcScriptedPeerTest): the server reads its time remaining when its
        # handler runs, which a loaded machine delays by a varying amount.
        proxy, client = self.through(grpc_config(self.server.port))
        self.server.push(gp.fail(), gp.fail())
        code, _, _, _ = client.call(timeout=0.6)
        self.assertEqual(code, grpc.StatusCode.OK)
        remaining = [c.time_remaining for c in self.server.calls]
        self.assertEqual(len(remaining), 3)
        for r in remaining:
            self.assertIsNotNone(r)
            # grpcio rounds the grpc-timeout it sends up by under 1% ("601m"
            # for 600 ms); onelayer passes on at most what it received.
            self.assertLessEqual(r, 0.6 * 1.01)
            self.assertGreater(r, 0.2)
        self.settled(proxy, 1)

    def test_caller_deadline_passes_while_the_server_is_slow(self):
        proxy, client = self.through(grpc_config(self.server.port))
        self.server.push(gp.slow(1.0))
        code, _, _, _ = client.call(timeout=0.3)
        self.assertEqual(code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertEqual(self.server.count(), 1)

    def test_unsafe_route_does_not_retry(self):
        proxy, client = self.through(grpc_config(self.server.port, {"max_attempts": 3, "backoff": dict(FAST_BACKOFF)}))
        self.server.push(gp.fail())
        code, _, _, _ = client.call()
        self.assertEqual(code, grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(self.server.count(), 1)
        text = self.settled(proxy, 1)
        self.assertEqual(self.value(text, "onelayer_retries_declined_total", reason="not_idempotent"), 1)
        self.assertEqual(self.value(text, "onelayer_retries_total", reason="unavailable"), 0)

    def test_idempotency_key_metadata_makes_a_call_safe(self):
        proxy, client = self.through(grpc_config(self.server.port, {"max_attempts": 3, "backoff": dict(FAST_BACKOFF)}))
        self.server.push(gp.fail())
        code, _, _, _ = client.call(metadata=(("idempotency-key", "order-7"),))
        self.assertEqual(code, grpc.StatusCode.OK)
        self.assertEqual(self.server.count(), 2)
        self.assertEqual([c.header("idempotency-key") for c in self.server.calls], ["order-7", "order-7"])
        text = self.settled(proxy, 1)
        self.assertEqual(self.value(text, "onelayer_retries_total", reason="unavailable"), 1)

    def test_three_onelayers_only_the_outer_one_retries(self):
        # client -> outer -> middle -> inner -> server, every layer with the same retrying route.
        inner = self.start_proxy(grpc_config(self.server.port, layer_id="inner"))
        middle = self.start_proxy(grpc_config(inner.port(), layer_id="middle"))
        outer = self.start_proxy(grpc_config(middle.port(), layer_id="outer"))
        client = gp.GrpcClient(outer.port())
        self.addCleanup(client.close)
        self.server.push(gp.fail(), gp.fail())
        code, _, _, _ = client.call()
        self.assertEqual(code, grpc.StatusCode.OK)
        self.assertEqual(self.server.count(), 3)  # one layer's worth of attempts
        self.assertEqual([c.header("x-retry-owner") for c in self.server.calls], ["outer"] * 3)
        self.assertEqual([c.header("grpc-previous-rpc-attempts") for c in self.server.calls], [None, "1", "2"])
        outer_text = self.settled(outer, 1)
        self.assertEqual(self.value(outer_text, "onelayer_retries_total", reason="unavailable"), 2)
        for layer in (middle, inner):
            text = self.settled(layer, 3)
            self.assertEqual(self.value(text, "onelayer_retries_total", reason="unavailable"), 0)
            self.assertEqual(self.value(text, "onelayer_retries_declined_total", reason="outer_owner"), 2)
            self.assertEqual(self.value(text, "onelayer_upstream_attempts_total", upstream="origin"), 3)
            # The owner's own grpc-previous-rpc-attempts is no hidden retry.
            self.assertEqual(self.value(text, "onelayer_hidden_retries_total", owner="outer"), 0)

    def test_a_hops_own_grpc_retry_is_counted_as_hidden(self):
        # An app between an outer owner and this layer retried with its gRPC
        # client: grpc-previous-rpc-attempts that is not the owner's count.
        proxy, client = self.through(grpc_config(self.server.port))
        owner = (("x-retry-owner", "outer"),)
        client.call(metadata=owner + (("grpc-previous-rpc-attempts", "1"), ("x-retry-attempt", "1")))
        client.call(metadata=owner + (("grpc-previous-rpc-attempts", "1"), ("x-retry-attempt", "2")))
        text = self.settled(proxy, 2)
        self.assertEqual(self.value(text, "onelayer_hidden_retries_total", owner="outer"), 1)

    def test_own_answer_is_grpc_trailers_only(self):
        closed, holder = h.closed_port()
        self.addCleanup(holder.close)
        proxy = self.start_proxy(grpc_config(closed))
        frames = gp.raw_grpc_call(proxy.port())
        self.assertEqual(len(frames), 1, frames)
        kind, fields, ended = frames[0]
        self.assertEqual(kind, "headers")
        self.assertTrue(ended, "Trailers-Only: one HEADERS frame that ends the stream")
        self.assertEqual(fields.get(":status"), "200")
        self.assertEqual(fields.get("grpc-status"), "14")
        self.assertEqual(fields.get("grpc-message"), "connect_failure")
        self.assertEqual(fields.get("x-onelayer-error"), "connect_failure")
        self.assertEqual(fields.get("x-retry-exhausted"), "3")
        text = self.settled(proxy, 1)
        self.assertEqual(self.value(text, "onelayer_grpc_responses_total", grpc_status="14"), 1)
        self.assertEqual(self.value(text, "onelayer_retries_total", reason="connect-failure"), 2)

    def test_shed_call_is_resource_exhausted_with_pushback(self):
        import threading
        proxy, client = self.through(grpc_config(self.server.port, listener={"max_concurrent_requests": 1}))
        self.server.push(gp.slow(1.0))
        first = threading.Thread(target=client.call)
        first.start()
        self.addCleanup(first.join)
        self.assertTrue(h.wait_until(lambda: self.server.count() == 1))
        code, _, details, trailers = client.call()
        self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertEqual(details, "overloaded")
        self.assertEqual(trailers.get("x-onelayer-error"), "overloaded")
        self.assertRegex(trailers.get("grpc-retry-pushback-ms", ""), r"^[1-9][0-9]*000$")
        self.assertNotIn("retry-after", trailers)
        first.join()
        self.assertEqual(self.server.count(), 1)
        # Counted just after the answer left: wait for it.
        self.assertTrue(h.wait_until(
            lambda: self.value(ops.metrics(self, proxy), "onelayer_grpc_responses_total", grpc_status="8") == 1, 3))

    def test_no_route_is_unimplemented(self):
        proxy, client = self.through(grpc_config(self.server.port, match={"path_prefix": "/other.Service/"}))
        code, _, details, trailers = client.call()
        self.assertEqual(code, grpc.StatusCode.UNIMPLEMENTED)
        self.assertEqual(trailers.get("x-onelayer-error"), "no_route")
        self.assertEqual(self.server.count(), 0)

    def test_message_over_buffer_limit_streams_and_is_not_retried(self):
        proxy, client = self.through(grpc_config(self.server.port, grpc_retry(buffer_limit="1KiB")))
        self.server.push(gp.fail())
        code, _, _, _ = client.call(b"x" * 4096)
        self.assertEqual(code, grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(self.server.count(), 1)
        text = self.settled(proxy, 1)
        self.assertEqual(self.value(text, "onelayer_retries_declined_total", reason="body_too_large"), 1)
        # A small one on the same route is retried.
        self.server.push(gp.fail())
        self.assertEqual(client.call(b"small")[0], grpc.StatusCode.OK)
        self.assertEqual(self.server.count(), 3)

    def test_fault_grpc_status_is_injected_and_goes_through_the_retry_rules(self):
        fault = {"abort": {"status": 503, "percent": 100}, "grpc_status": 14}
        proxy, client = self.through(grpc_config(self.server.port, fault=fault))
        code, _, details, trailers = client.call()
        self.assertEqual(code, grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(details, "fault_injected")
        self.assertEqual(trailers.get("x-retry-exhausted"), "3")
        self.assertEqual(self.server.count(), 0)
        text = self.settled(proxy, 1)
        self.assertEqual(self.value(text, "onelayer_faults_injected_total", kind="abort"), 3)
        self.assertEqual(self.value(text, "onelayer_retries_total", reason="unavailable"), 2)
        self.assertEqual(self.value(text, "onelayer_grpc_responses_total", grpc_status="14"), 1)

    def test_fault_grpc_status_not_in_retry_on_is_final(self):
        fault = {"abort": {"status": 500, "percent": 100}, "grpc_status": 13}
        proxy, client = self.through(grpc_config(self.server.port, fault=fault))
        code, _, _, _ = client.call()
        self.assertEqual(code, grpc.StatusCode.INTERNAL)
        text = self.settled(proxy, 1)
        self.assertEqual(self.value(text, "onelayer_faults_injected_total", kind="abort"), 1)
        self.assertEqual(self.value(text, "onelayer_grpc_responses_total", grpc_status="13"), 1)

    def test_call_to_an_http1_upstream_is_unavailable(self):
        proxy, client = self.through(grpc_config(self.server.port, protocol="http1"))
        code, _, _, trailers = client.call()
        self.assertEqual(code, grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(trailers.get("x-onelayer-error"), "bad_upstream_response")
        self.assertEqual(self.server.count(), 0)


class GrpcDocsTest(unittest.TestCase):
    def test_the_documented_grpc_route_passes_check(self):
        import os
        import re
        import tempfile
        with open(os.path.join(h.SOURCE_DIR, "docs", "grpc.md")) as f:
            m = re.search(r"```yaml\n(.*?)```", f.read(), re.S)
        self.assertIsNotNone(m, "docs/grpc.md shows a gRPC route in a yaml block")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "grpc.yaml")
            with open(path, "w") as out:
                out.write(m.group(1))
            code, stdout, stderr = h.run_onelayer(["--check", "--config", path])
        self.assertEqual(code, 0, stderr)
        self.assertIn("ok (1 listener(s), 1 upstream(s))", stdout)


class GrpcScriptedPeerTest(IntegrationTest):
    """What a real gRPC server does not do on demand, from a scripted h2 peer."""
    ROUTE = "grpc"

    def scripted(self, *script, retry=None):
        server = gp.H2ScriptedServer(*script)
        self.addCleanup(server.stop)
        proxy = self.start_proxy(grpc_config(server.port, retry))
        return server, proxy

    def value(self, text, name, **labels):
        return ops.value(text, name, route=self.ROUTE, **labels) or 0

    def test_refused_stream_is_sent_again_on_another_connection_whatever_the_method(self):
        # An unsafe route: only "never reached the application" makes this retryable.
        server, proxy = self.scripted(gp.refuse(), retry={"max_attempts": 3, "backoff": dict(FAST_BACKOFF)})
        frames = gp.raw_grpc_call(proxy.port())
        self.assertEqual(frames[-1], ("trailers", {"grpc-status": "0"}), frames)
        self.assertEqual(server.count(), 2)
        self.assertNotEqual(server.arrivals[0].conn_id, server.arrivals[1].conn_id)
        text = ops.settled_metrics(self, proxy, self.ROUTE, 1)
        # The first refusal is re-sent, not retried (no budget, no backoff).
        self.assertEqual(self.value(text, "onelayer_refused_resends_total"), 1)
        self.assertEqual(self.value(text, "onelayer_retries_total", reason="refused-stream"), 0)
        self.assertEqual(self.value(text, "onelayer_retries_declined_total", reason="not_idempotent"), 0)

    def test_stream_above_goaway_is_sent_again_whatever_the_method(self):
        server, proxy = self.scripted(gp.go_away(), retry={"max_attempts": 3, "backoff": dict(FAST_BACKOFF)})
        frames = gp.raw_grpc_call(proxy.port())
        self.assertEqual(frames[-1], ("trailers", {"grpc-status": "0"}), frames)
        self.assertEqual(server.count(), 2)
        text = ops.settled_metrics(self, proxy, self.ROUTE, 1)
        self.assertEqual(self.value(text, "onelayer_refused_resends_total"), 1)
        self.assertEqual(self.value(text, "onelayer_retries_total", reason="refused-stream"), 0)

    def test_x_retry_exhausted_in_trailers_is_final_and_passed_on(self):
        server, proxy = self.scripted(gp.answer("14", [("x-retry-exhausted", "3")], message=b""))
        frames = gp.raw_grpc_call(proxy.port())
        self.assertEqual([f[0] for f in frames], ["headers", "trailers"], frames)
        self.assertEqual(frames[1][1].get("grpc-status"), "14")
        self.assertEqual(frames[1][1].get("x-retry-exhausted"), "3")
        self.assertEqual(server.count(), 1)
        text = ops.settled_metrics(self, proxy, self.ROUTE, 1)
        self.assertEqual(self.value(text, "onelayer_retries_declined_total", reason="inner_exhausted"), 1)
        self.assertEqual(self.value(text, "onelayer_retries_total", reason="unavailable"), 0)

    def test_each_attempt_carries_the_time_left_in_grpc_format(self):
        server, proxy = self.scripted(gp.answer("14", message=b""), gp.answer("14", message=b""))
        client = gp.GrpcClient(proxy.port())
        self.addCleanup(client.close)
        client.call(timeout=0.6)
        self.assertEqual(server.count(), 3)
        received = [a.headers.get("grpc-timeout") for a in server.arrivals]
        micros = []
        for value in received:
            # onelayer's format: at most 8 digits and the finest unit that fits (u below 100 s).
            self.assertRegex(value, r"^[0-9]{1,8}u$", received)
            micros.append(int(value[:-1]))
        self.assertLessEqual(micros[0], 601000)  # what grpcio sent at most ("601m")
        self.assertGreater(micros[0], 400000)
        self.assertLess(micros[1], micros[0])
        self.assertLess(micros[2], micros[1])
        self.assertEqual([a.headers.get("x-request-timeout-ms") for a in server.arrivals],
                         [str(m // 1000) for m in micros])
        self.assertEqual([a.headers.get("grpc-previous-rpc-attempts") for a in server.arrivals], [None, "1", "2"])

    def test_exhausted_retries_on_trailers_mark_the_trailers(self):
        server, proxy = self.scripted(*[gp.answer("14", message=b"")] * 3)
        frames = gp.raw_grpc_call(proxy.port())
        self.assertEqual([f[0] for f in frames], ["headers", "trailers"], frames)
        self.assertNotIn("x-retry-exhausted", frames[0][1])
        self.assertEqual(frames[1][1].get("x-retry-exhausted"), "3")
        self.assertEqual(server.count(), 3)
        text = ops.settled_metrics(self, proxy, self.ROUTE, 1)
        self.assertEqual(self.value(text, "onelayer_retries_total", reason="unavailable"), 2)
        self.assertEqual(self.value(text, "onelayer_retries_declined_total", reason="attempts_exhausted"), 1)


if __name__ == "__main__":
    unittest.main()
