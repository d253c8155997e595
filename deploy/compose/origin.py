#!/usr/bin/env python3
"""Flaky origin for the three-hop demo (compose and deploy/local-three-hop.sh).

Counts every request that arrives (its "arrivals") and answers according to
ORIGIN_MODE:
  fail   every request gets 503 (default: the worst case for amplification)
  flaky  ORIGIN_FAILS requests (default 2) get 503, the next one 200, and so on
  ok     every request gets 200

Two paths are not counted, for the operator:
  GET  /count   the number of arrivals so far, as text ("27\n")
  POST /reset   sets the count back to 0

Environment: LISTEN (default 0.0.0.0:8080; port 0 = any free port),
PORT_FILE (optional: after binding, write "http <port>" to it), QUIET=1.
Standard library only.
"""
import http.server
import os
import sys
import threading

from demo_server import serve


class Origin:
    def __init__(self, mode, fails):
        if mode not in ("fail", "flaky", "ok"):
            raise ValueError(f"ORIGIN_MODE must be fail, flaky or ok, got {mode!r}")
        self.mode = mode
        self.fails = fails
        self.arrivals = 0
        self.lock = threading.Lock()

    def arrive(self):
        """Counts one arrival and returns the status to answer with."""
        with self.lock:
            self.arrivals += 1
            n = self.arrivals
        if self.mode == "fail":
            return 503
        if self.mode == "ok":
            return 200
        return 503 if (n - 1) % (self.fails + 1) < self.fails else 200

    def count(self):
        with self.lock:
            return self.arrivals

    def reset(self):
        with self.lock:
            self.arrivals = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    origin = None
    quiet = False

    def reply(self, status, text):
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def serve(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > 0:
            self.rfile.read(length)
        if self.path == "/count" and self.command == "GET":
            return self.reply(200, f"{self.origin.count()}\n")
        if self.path == "/reset" and self.command == "POST":
            self.origin.reset()
            return self.reply(200, "0\n")
        status = self.origin.arrive()
        self.reply(status, "origin: ok\n" if status == 200 else "origin: unavailable\n")

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = serve

    def log_message(self, fmt, *args):
        if not self.quiet:
            sys.stderr.write("origin: " + (fmt % args) + "\n")


def main():
    Handler.origin = Origin(os.environ.get("ORIGIN_MODE", "fail"), int(os.environ.get("ORIGIN_FAILS", "2")))
    Handler.quiet = os.environ.get("QUIET") == "1"
    serve(Handler)


if __name__ == "__main__":
    main()
