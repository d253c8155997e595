#!/usr/bin/env python3
"""Example service for the three-hop demo (compose and deploy/local-three-hop.sh).

For every request it receives, it calls its next hop (NEXT_HOP, e.g.
http://onelayer-b:15001) with the same method, path and body, and answers with
the next hop's status and body. Like most services it builds its own response
and copies no response headers (Content-Type aside), so an inner layer's
x-retry-exhausted does not reach the outer layers through it: what keeps the
retries to one layer here is the ownership carried in baggage.

Of the incoming request headers it carries on only `baggage`, the way an
application instrumented with OpenTelemetry does: it knows nothing about
x-retry-* headers. That is the realistic case onelayer's protocol is built for:
retry ownership survives the app because it rides in W3C baggage.

Environment:
  LISTEN     host:port to listen on (default 0.0.0.0:8080; port 0 = any free port)
  NEXT_HOP   base URL of the next hop (required)
  PORT_FILE  optional: after binding, write "http <port>" to this file
  TIMEOUT_S  timeout for the call to the next hop (default 30)
  QUIET      set to 1 to silence the one-line-per-request log
Standard library only.
"""
import http.client
import http.server
import os
import sys
import urllib.parse

from demo_server import serve


class NextHop:
    def __init__(self, url, timeout):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"NEXT_HOP must be an http:// URL, got {url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.base_path = parts.path.rstrip("/")
        self.timeout = timeout

    def call(self, method, path, body, baggage):
        headers = {}
        if baggage:
            headers["baggage"] = baggage
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request(method, self.base_path + path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            kept = [("Content-Type", resp.getheader("Content-Type"))] if resp.getheader("Content-Type") else []
            return resp.status, kept, data
        finally:
            conn.close()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    next_hop = None
    quiet = False

    def forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else None
        baggage = ",".join(self.headers.get_all("baggage") or [])
        try:
            status, headers, data = self.next_hop.call(self.command, self.path, body, baggage)
        except (OSError, http.client.HTTPException) as e:
            status, headers, data = 502, [("Content-Type", "text/plain")], f"app: next hop failed: {e}\n".encode()
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = forward

    def log_message(self, fmt, *args):
        if not self.quiet:
            sys.stderr.write("app: " + (fmt % args) + "\n")


def main():
    next_hop = os.environ.get("NEXT_HOP")
    if not next_hop:
        sys.exit("app: NEXT_HOP is required")
    Handler.next_hop = NextHop(next_hop, float(os.environ.get("TIMEOUT_S", "30")))
    Handler.quiet = os.environ.get("QUIET") == "1"
    serve(Handler)


if __name__ == "__main__":
    main()
