"""The gRPC peers themselves (grpc_peers.py), client against server with
nothing between: what the onelayer tests rely on them to do."""

import time
import unittest

import grpc_peers as gp
from grpc_peers import grpc

CLIENT_ROUNDING = 1.01  # grpcio's grpc-timeout is the caller's deadline rounded up, by well under 1%


class GrpcPeersTest(unittest.TestCase):
    def setUp(self):
        self.server = gp.GrpcServer()
        self.addCleanup(self.server.stop)
        self.client = gp.GrpcClient(self.server.port)
        self.addCleanup(self.client.close)

    def test_scripted_failures_then_ok_are_three_arrivals(self):
        self.server.push(gp.fail(), gp.fail(headers_first=True))
        self.assertEqual(self.client.call()[0], grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(self.client.call()[0], grpc.StatusCode.UNAVAILABLE)
        code, resp, _, _ = self.client.call(b"hi")
        self.assertEqual((code, resp), (grpc.StatusCode.OK, b"ok"))
        self.assertEqual(self.server.count(), 3)

    def test_trailers_only_and_headers_first_look_different_on_the_wire(self):
        self.server.push(gp.fail(), gp.fail(headers_first=True))
        only = gp.raw_grpc_call(self.server.port)
        self.assertEqual(len(only), 1, only)
        kind, fields, ended = only[0]
        self.assertEqual((kind, fields.get("grpc-status"), ended), ("headers", "14", True))
        split = gp.raw_grpc_call(self.server.port)
        self.assertEqual([e[0] for e in split], ["headers", "trailers"], split)
        self.assertNotIn("grpc-status", split[0][1])
        self.assertEqual(split[1][1].get("grpc-status"), "14")

    def test_pushback_travels_in_the_trailing_metadata(self):
        self.server.push(gp.fail(pushback=300))
        code, _, _, trailers = self.client.call()
        self.assertEqual(code, grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(trailers.get("grpc-retry-pushback-ms"), "300")

    def test_client_deadline_reaches_the_server(self):
        self.client.call(timeout=0.6)
        remaining = self.server.calls[0].time_remaining
        self.assertIsNotNone(remaining)
        # grpcio rounds the grpc-timeout it sends up (600ms can go out as
        # "601m"): the server may see a little more than the caller set.
        self.assertLessEqual(remaining, 0.6 * CLIENT_ROUNDING)
        self.assertGreater(remaining, 0.3)

    def test_streaming_failure_after_two_messages(self):
        self.server.push(gp.stream([b"one", b"two"], grpc.StatusCode.UNAVAILABLE), method=gp.STREAM)
        code, got = self.client.list()
        self.assertEqual((code, got), (grpc.StatusCode.UNAVAILABLE, [b"one", b"two"]))

    def test_metadata_is_recorded(self):
        self.client.call(metadata=(("idempotency-key", "k1"),))
        self.assertEqual(self.server.calls[0].header("idempotency-key"), "k1")

    def test_slow_reply_waits(self):
        t0 = time.monotonic()
        self.server.push(gp.slow(0.2))
        self.assertEqual(self.client.call()[0], grpc.StatusCode.OK)
        self.assertGreaterEqual(time.monotonic() - t0, 0.2)


class H2ScriptedServerTest(unittest.TestCase):
    def test_refuse_goaway_and_trailers_as_scripted(self):
        server = gp.H2ScriptedServer(gp.refuse(), gp.go_away(),
                                     gp.answer("14", [("x-retry-exhausted", "3")], message=b""))
        self.addCleanup(server.stop)
        self.assertEqual(gp.raw_grpc_call(server.port), [("reset", 7)])  # REFUSED_STREAM
        self.assertEqual(gp.raw_grpc_call(server.port), [("goaway", 0)])
        frames = gp.raw_grpc_call(server.port)
        self.assertEqual([f[0] for f in frames], ["headers", "trailers"], frames)
        self.assertEqual(frames[1][1], {"grpc-status": "14", "x-retry-exhausted": "3"})
        ok = gp.raw_grpc_call(server.port)  # the default answer
        self.assertEqual(ok[1], ("data", gp.grpc_frame(b"ok")))
        self.assertEqual(server.count(), 4)
        self.assertEqual(server.connections(), 4)


if __name__ == "__main__":
    unittest.main()
