"""Idle keep-alive connections parked as their sockets alone: a connection
idle for a while leaves the event loop's connection objects for an epoll set
of its own (seen here in /proc/<pid>/fdinfo: a one-shot registration), and
whatever it does next works as before: its next request, a partial head
(header timeout), the idle timeout, the client closing it, drain, and the
connection limit, which still counts it."""

import os
import signal
import socket
import time
import unittest

import harness as h
import ops_helpers as ops
from harness import IntegrationTest

EPOLLONESHOT = 1 << 30
PARK_WAIT = 0.8  # past the 250 ms after which an idle connection is parked


def parked_sockets(pid):
    """Sockets registered one-shot in any epoll set of `pid` (the parked set
    is the only one-shot user: libuv registers level-triggered)."""
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) != "anon_inode:[eventpoll]":
                continue
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                for line in f:
                    if line.startswith("tfd:"):
                        events = int(line.split("events:")[1].split()[0], 16)
                        n += 1 if events & EPOLLONESHOT else 0
        except OSError:
            continue  # closed meanwhile
    return n


class ParkedConnectionTest(IntegrationTest):
    def active(self, proxy):
        return ops.value(ops.metrics(self, proxy), "onelayer_downstream_connections_active", protocol="http1")

    def wait_parked(self, proxy, n):
        got = ops.wait_until(lambda: parked_sockets(proxy.proc.pid) == n or None, 5)
        self.assertTrue(got, "expected %d parked sockets, have %d" % (n, parked_sockets(proxy.proc.pid)))

    def test_an_idle_connection_is_parked_and_its_next_request_is_answered(self):
        origin = self.start_origin(handler=lambda a: h.respond(200, body=a.target.encode()))
        proxy = self.proxy_for(origin)
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/1").body, b"/1")
            time.sleep(PARK_WAIT)
            self.wait_parked(proxy, 1)
            self.assertEqual(self.active(proxy), 1)  # still open, still counted
            for i in range(2, 5):
                r = c.request("POST", "/%d" % i, body=b"x" * 100)
                self.assertEqual((r.status, r.body), (200, b"/%d" % i))
                time.sleep(PARK_WAIT)  # parked again in between
                self.wait_parked(proxy, 1)
        self.assertEqual([a.target for a in origin.snapshot()], ["/1", "/2", "/3", "/4"])
        ops.wait_until(lambda: self.active(proxy) == 0 or None, 5)
        self.assertEqual(self.active(proxy), 0)
        self.assertEqual(parked_sockets(proxy.proc.pid), 0)

    def test_a_request_that_arrives_in_pieces_after_parking_still_gets_the_header_timeout(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin, limits={"header_timeout": "1s"})
        with h.Conn(proxy.port(), timeout=5) as c:
            self.assertEqual(c.request("GET", "/a").status, 200)
            time.sleep(PARK_WAIT)
            self.wait_parked(proxy, 1)
            c.send(b"GET /b HTTP/1.1\r\nHost: x\r\n")
            t0 = time.monotonic()
            data = b""
            while True:
                got = c.sock.recv(4096)
                if not got:
                    break
                data += got
            self.assertTrue(data.startswith(b"HTTP/1.1 408"), data)
            self.assertGreater(time.monotonic() - t0, 0.7)

    def test_a_parked_connection_is_closed_at_its_idle_timeout(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin, limits={"idle_timeout": "1500ms"})
        with h.Conn(proxy.port(), timeout=5) as c:
            self.assertEqual(c.request("GET", "/").status, 200)
            t0 = time.monotonic()
            time.sleep(PARK_WAIT)
            self.wait_parked(proxy, 1)
            self.assertEqual(c.sock.recv(1), b"")  # the proxy closed it
            waited = time.monotonic() - t0
        self.assertGreater(waited, 1.3)
        self.assertLess(waited, 3.0)
        ops.wait_until(lambda: self.active(proxy) == 0 or None, 5)
        self.assertEqual(self.active(proxy), 0)
        self.assertEqual(parked_sockets(proxy.proc.pid), 0)

    def test_a_client_closing_a_parked_connection_is_counted_closed(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin)
        c = h.Conn(proxy.port())
        self.assertEqual(c.request("GET", "/").status, 200)
        time.sleep(PARK_WAIT)
        self.wait_parked(proxy, 1)
        c.close()
        ops.wait_until(lambda: self.active(proxy) == 0 or None, 5)
        self.assertEqual(self.active(proxy), 0)
        self.assertEqual(parked_sockets(proxy.proc.pid), 0)

    def test_drain_closes_parked_connections_at_once(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin, drain_timeout="10s")
        with h.Conn(proxy.port(), timeout=5) as c:
            self.assertEqual(c.request("GET", "/").status, 200)
            time.sleep(PARK_WAIT)
            self.wait_parked(proxy, 1)
            t0 = time.monotonic()
            proxy.signal(signal.SIGTERM)
            self.assertEqual(c.sock.recv(1), b"")
            self.assertLess(time.monotonic() - t0, 2.0)
        proxy.proc.wait(5)
        self.assertEqual(proxy.proc.returncode, 0)

    def test_a_parked_connection_still_counts_against_max_connections(self):
        origin = self.start_origin()
        proxy = self.proxy_for(origin, limits={"max_connections": 1})
        with h.Conn(proxy.port()) as c1:
            self.assertEqual(c1.request("GET", "/c1").status, 200)
            time.sleep(PARK_WAIT)
            self.wait_parked(proxy, 1)
            served = False
            try:
                with h.Conn(proxy.port(), timeout=2) as c2:
                    served = c2.request("GET", "/c2").status == 200
            except (OSError, AssertionError, socket.timeout):
                pass
            self.assertFalse(served, "second connection served over max_connections: 1")
            self.assertEqual(c1.request("GET", "/c1-again").status, 200)
        self.assertEqual([a.target for a in origin.snapshot()], ["/c1", "/c1-again"])


if __name__ == "__main__":
    unittest.main()
