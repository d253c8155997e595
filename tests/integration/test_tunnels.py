"""Upgrade tunnels through the real onelayer: a WebSocket echo origin and
client from Debian's python3-websockets, and a raw origin for the refusals:
the handshake, 1 MiB each way, a close from either side, the idle cut,
backpressure, and upgrades the listener does not forward."""

import asyncio
import os
import socket
import sys
import threading
import time
import unittest

import harness as h
from harness import IntegrationTest

try:
    import websockets
except ImportError:  # python3-websockets is Debian's; ctest's interpreter may be another 3.11
    sys.path.append("/usr/lib/python3/dist-packages")
    import websockets  # noqa: E402  (missing: deploy/install-deps.sh test installs it)

MIB = 1024 * 1024


class WsOrigin:
    """A WebSocket server on 127.0.0.1:0 in its own thread and loop.
    /echo echoes every message; /bye closes (code 4000) after the first
    message; /flood sends ``flood`` bytes in 64 KiB messages, then waits."""

    def __init__(self, flood=0):
        self.flood = flood
        self.closed = []  # (path, close code) as the server saw each connection end
        self.paths = []
        self.headers = []
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        if not self.ready.wait(10):
            raise AssertionError("websocket origin did not start")

    def _run(self):
        asyncio.set_event_loop(self.loop)

        async def handler(ws, path=None):
            path = path or ws.path
            self.paths.append(path)
            self.headers.append(ws.request_headers)
            try:
                if path == "/echo":
                    async for msg in ws:
                        await ws.send(msg)
                elif path == "/bye":
                    await ws.recv()
                    await ws.close(4000, "bye")
                elif path == "/flood":
                    block = b"f" * (64 * 1024)
                    for _ in range(self.flood // len(block)):
                        await ws.send(block)
                    await ws.wait_closed()
                else:
                    await ws.wait_closed()
            except websockets.ConnectionClosed:
                pass
            self.closed.append((path, ws.close_code))

        async def main():
            self.stop_event = asyncio.Event()
            async with websockets.serve(handler, "127.0.0.1", 0, max_size=None, compression=None) as server:
                self.port = server.sockets[0].getsockname()[1]
                self.ready.set()
                await self.stop_event.wait()

        self.loop.run_until_complete(main())

    def stop(self):
        self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(10)


def run(coro, timeout=30):
    return asyncio.run(asyncio.wait_for(coro, timeout))


class TunnelTest(IntegrationTest):
    def ws_origin(self, **kw):
        o = WsOrigin(**kw)
        self.addCleanup(o.stop)
        return o

    def proxy_to(self, origin, **kw):
        return self.start_proxy(h.simple_config(origin.port, **kw))

    def url(self, proxy, path):
        return "ws://127.0.0.1:%d%s" % (proxy.port(), path)

    def test_handshake_and_one_mib_each_way(self):
        origin = self.ws_origin()
        proxy = self.proxy_to(origin)
        payload = os.urandom(MIB)

        async def talk():
            async with websockets.connect(self.url(proxy, "/echo"), max_size=None, compression=None) as ws:
                await ws.send(payload)
                back = await ws.recv()
                await ws.send("text too")
                return back, await ws.recv(), ws.response_headers

        back, text, headers = run(talk())
        self.assertEqual(back, payload)
        self.assertEqual(text, "text too")
        self.assertIn("1.1 onelayer", headers.get("Via", ""))
        self.assertEqual(origin.paths, ["/echo"])
        self.assertEqual(origin.headers[0].get("X-Retry-Owner"), None)  # a route without retries
        self.assertIn("onelayer", origin.headers[0].get("Via", ""))
        h.wait_until(lambda: origin.closed)
        self.assertEqual(origin.closed, [("/echo", 1000)], "the client's close reached the origin")
        line = h.wait_until(lambda: [l for l in proxy.access_log() if "/echo" in l])
        self.assertIn("status=101", line[0])
        metrics = proxy.admin_get("/metrics").body.decode()
        self.assertIn('onelayer_requests_total{listener="main",route="default",code="101",protocol="http1"} 1', metrics)

    def test_close_from_the_origin_reaches_the_client_with_its_code(self):
        origin = self.ws_origin()
        proxy = self.proxy_to(origin)

        async def talk():
            async with websockets.connect(self.url(proxy, "/bye")) as ws:
                await ws.send("hi")
                try:
                    await ws.recv()
                except websockets.ConnectionClosed as e:
                    return e.code, e.reason
            return None

        self.assertEqual(run(talk()), (4000, "bye"))
        line = h.wait_until(lambda: [l for l in proxy.access_log() if "/bye" in l])
        self.assertIn("status=101", line[0])

    def test_client_vanishing_closes_the_origin_side(self):
        origin = self.ws_origin()
        proxy = self.proxy_to(origin)
        s = socket.create_connection(("127.0.0.1", proxy.port()))
        s.sendall(b"GET /wait HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                  b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        head = s.recv(4096)
        self.assertTrue(head.startswith(b"HTTP/1.1 101 "), head)
        self.assertIn(b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", head)
        s.close()  # no close frame: a plain TCP close
        self.assertTrue(h.wait_until(lambda: origin.closed, 5), "the origin side stayed open")
        self.assertEqual(origin.closed[0][0], "/wait")

    def test_idle_tunnel_is_cut_after_idle_timeout(self):
        origin = self.ws_origin()
        proxy = self.proxy_to(origin, limits={"idle_timeout": "400ms"})

        async def talk():
            async with websockets.connect(self.url(proxy, "/wait"), ping_interval=None) as ws:
                t0 = time.monotonic()
                try:
                    await ws.recv()
                except websockets.ConnectionClosed:
                    return time.monotonic() - t0
            return None

        took = run(talk())
        self.assertIsNotNone(took)
        self.assertGreaterEqual(took, 0.3)
        self.assertLess(took, 3.0)
        line = h.wait_until(lambda: [l for l in proxy.access_log() if "/wait" in l])
        self.assertIn("error=tunnel_idle", line[0])
        self.assertTrue(h.wait_until(lambda: origin.closed, 5))

    def test_traffic_keeps_a_tunnel_alive_past_idle_timeout(self):
        origin = self.ws_origin()
        proxy = self.proxy_to(origin, limits={"idle_timeout": "400ms"})

        async def talk():
            async with websockets.connect(self.url(proxy, "/echo"), ping_interval=None) as ws:
                for i in range(8):
                    await asyncio.sleep(0.15)
                    await ws.send("tick %d" % i)
                    assert await ws.recv() == "tick %d" % i
                return True

        self.assertTrue(run(talk()))

    def test_backpressure_holds_a_flood_to_a_client_that_does_not_read(self):
        origin = self.ws_origin(flood=64 * MIB)
        proxy = self.proxy_to(origin)
        start_kb = proxy.rss_kb()
        s = socket.create_connection(("127.0.0.1", proxy.port()))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        s.sendall(b"GET /flood HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                  b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        time.sleep(1.5)  # the origin floods; nobody reads
        grown_kb = proxy.rss_kb() - start_kb
        got = 0
        s.settimeout(10)
        while got < 64 * MIB:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += len(chunk)
        s.close()
        self.assertGreaterEqual(got, 64 * MIB, "the whole flood arrives once the client reads")
        limit = 48 * 1024 if os.environ.get("ONELAYER_SANITIZED") != "1" else 96 * 1024
        self.assertLess(grown_kb, limit, "the proxy buffered the flood: grew %d KiB" % grown_kb)

    def test_upgrade_the_listener_does_not_forward_is_refused_before_the_origin(self):
        origin = self.start_origin()
        proxy = self.start_proxy(h.simple_config(origin.port, listener={"upgrades": []}))
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/ws", headers=[("Connection", "Upgrade"), ("Upgrade", "websocket")])
        self.assertProxyError(r, 400, "upgrade_not_allowed")
        self.assertIn(b"listeners[].upgrades", r.body)
        self.assertNoArrivals(origin)
        proxy2 = self.proxy_for(origin)
        with h.Conn(proxy2.port()) as c:
            r = c.request("GET", "/irc", headers=[("Connection", "Upgrade"), ("Upgrade", "IRC/6.9")])
        self.assertProxyError(r, 400, "upgrade_not_allowed")
        self.assertIn(b"does not forward Upgrade: IRC/6.9", r.body)
        self.assertIn(b"forwards Upgrade: websocket", r.body)
        self.assertNoArrivals(origin)

    def test_upgrade_to_an_http2_upstream_is_refused_before_the_origin(self):
        origin = self.start_origin()
        proxy = self.start_proxy(h.simple_config(origin.port, upstream={"protocol": "h2c"}))
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/ws", headers=[("Connection", "Upgrade"), ("Upgrade", "websocket")])
        self.assertProxyError(r, 400, "upgrade_not_allowed")
        self.assertIn(b"protocol: http1", r.body)
        self.assertNoArrivals(origin)

    def test_an_h2c_offer_is_ignored_and_the_request_forwarded_as_http11(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/h2c", headers=[("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"),
                                                  ("HTTP2-Settings", "AAMAAABkAAQCAAAAAAIAAAAA")])
            self.assertEqual(r.status, 200)
            self.assertEqual(c.request("GET", "/again").status, 200, "the connection stays HTTP/1.1")
        a = origin.wait_for(2)[0]
        self.assertEqual((a.header_all("upgrade"), a.header_all("http2-settings")), ([], []))

    def test_an_origin_that_declines_the_upgrade_is_answered_as_is_and_the_connection_closes(self):
        origin = self.start_origin(script=[h.respond(426, headers=[("Upgrade", "websocket")], body=b"no")])
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/ws", headers=[("Connection", "Upgrade"), ("Upgrade", "websocket")])
            self.assertEqual((r.status, r.body), (426, b"no"))
            self.assertTrue(c.closed_by_peer(2))
        (a,) = origin.wait_for(1)
        self.assertEqual(a.header("upgrade"), "websocket")
        self.assertIn("upgrade", a.header("connection").lower())

    def test_a_101_to_another_protocol_is_a_bad_upstream_response(self):
        origin = self.start_origin(script=[h.raw(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                                                 b"Upgrade: h2c\r\n\r\n", close=False)])
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            r = c.request("GET", "/ws", headers=[("Connection", "Upgrade"), ("Upgrade", "websocket")])
        self.assertProxyError(r, 502, "bad_upstream_response")

    def test_upgrade_is_retried_before_a_response_and_never_after_the_101(self):
        switch = (b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
                  b"after-101")
        origin = self.start_origin(script=[h.close_without_response(), h.raw(switch, close=True)])
        proxy = self.proxy_for(origin, retry={"max_attempts": 3, "retry_on": ["reset"]})
        s = socket.create_connection(("127.0.0.1", proxy.port()), timeout=5)
        self.addCleanup(s.close)
        s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        self.assertTrue(got.startswith(b"HTTP/1.1 101 "), got)
        self.assertTrue(got.endswith(b"\r\n\r\nafter-101"), got)
        time.sleep(0.3)
        self.assertEqual(origin.count(), 2, "one retry before the response, none after the 101 and the close")
        line = h.wait_until(lambda: [l for l in proxy.access_log() if "/ws" in l])
        self.assertIn("status=101", line[0])
        self.assertIn("attempts=2", line[0])

    def test_websocket_over_a_tls_upstream(self):
        import tls_helpers as tls
        pki = tls.Pki()
        self.addCleanup(pki.cleanup)
        origin = self.ws_origin()
        n = tls.Nginx(pki, http2=False, locations=(
            "location /echo { proxy_pass http://127.0.0.1:%d; proxy_http_version 1.1; "
            "proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection upgrade; }" % origin.port))
        self.addCleanup(n.stop)
        proxy = self.start_proxy(h.simple_config(n.port, upstream={"tls": {"sni": "origin.test",
                                                                           "ca_file": pki.path("ca.pem")}}))
        payload = os.urandom(256 * 1024)

        async def talk():
            async with websockets.connect(self.url(proxy, "/echo"), max_size=None, compression=None) as ws:
                await ws.send(payload)
                return await ws.recv()

        self.assertEqual(run(talk()), payload)


if __name__ == "__main__":
    unittest.main()
