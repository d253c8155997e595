"""A small service for the three-hop chain test (standard library only).

It stands for an application between two onelayer sidecars: for every
request it receives it calls the next hop once (same method, path and body)
and answers with the next hop's status and body. Like an app instrumented
with OpenTelemetry, it carries only the W3C `baggage` header into its
outbound call by default; `x-retry-*` and every other incoming header stop
here. It copies `x-retry-exhausted` from the next hop's response into its
own, so the owning layer's verdict reaches the client.

    python3 chain_app.py --next 127.0.0.1:PORT --port-file F
        [--propagate baggage,x-request-timeout-ms | --propagate '*']
        [--copy-response x-retry-exhausted | --copy-response '']
        [--record FILE] [--retry-503 N]

--port-file  written (atomically) with the bound port once listening (port 0).
--propagate  comma-separated header names carried into the outbound call;
             `x-request-timeout-ms` is carried as what is left of it (the
             time spent here subtracted), as a deadline-aware app does;
             `*` carries every end-to-end header (an app that forwards
             headers blindly).
--copy-response  comma-separated response headers copied from the next
             hop's answer into this app's answer (default x-retry-exhausted;
             '' copies none, like an app that knows nothing of onelayer).
--record     appends one JSON line per received request: method, path,
             headers (as received), to look at what a layer sent on.
--retry-503  calls the next hop up to N more times while it answers 503,
             with the same headers (an app or SDK that retries on its own,
             as urllib3's Retry does); default 0.

SIGTERM/SIGINT stop the server and exit 0.
"""

import argparse
import http.client
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Never forwarded, whatever --propagate says: framing and hop-by-hop fields
# (RFC 9110 7.6.1), and Host, which the outbound call sets for its own target.
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer",
              "transfer-encoding", "upgrade", "content-length", "host"}
TIMEOUT_HEADER = "x-request-timeout-ms"
NEXT_HOP_TIMEOUT_S = 30.0


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--next", required=True, help="host:port of the next hop")
    p.add_argument("--port-file", required=True)
    p.add_argument("--propagate", default="baggage")
    p.add_argument("--copy-response", default="x-retry-exhausted")
    p.add_argument("--record", default=None)
    p.add_argument("--retry-503", type=int, default=0)
    return p.parse_args(argv)


class ChainApp:
    def __init__(self, next_hop, propagate, copy_response, record_path, retry_503=0):
        self.retry_503 = retry_503
        host, _, port = next_hop.rpartition(":")
        self.next_host = host or "127.0.0.1"
        self.next_port = int(port)
        names = [n.strip().lower() for n in propagate.split(",") if n.strip()]
        self.propagate_all = "*" in names
        self.propagate = set(names) - {"*"}
        self.copy_response = [n.strip() for n in copy_response.split(",") if n.strip()]
        self.record_path = record_path
        self.record_lock = threading.Lock()

    def outbound_headers(self, incoming, arrived):
        out = []
        for name, value in incoming:
            lname = name.lower()
            if lname in HOP_BY_HOP:
                continue
            if not self.propagate_all and lname not in self.propagate:
                continue
            if lname == TIMEOUT_HEADER:
                value = self.time_left(value, arrived)
                if value is None:
                    continue
            out.append((name, value))
        return out

    @staticmethod
    def time_left(value, arrived):
        try:
            budget = int(value.strip())
        except ValueError:
            return None
        spent = int((time.monotonic() - arrived) * 1000)
        return str(max(0, budget - spent))

    def record(self, method, path, headers):
        if not self.record_path:
            return
        line = json.dumps({"method": method, "path": path, "headers": headers})
        with self.record_lock, open(self.record_path, "a") as f:
            f.write(line + "\n")

    def call_next(self, method, path, headers, body):
        """(status, [(name, value)] to copy, body) from the next hop."""
        conn = http.client.HTTPConnection(self.next_host, self.next_port,
                                          timeout=NEXT_HOP_TIMEOUT_S)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            for name, value in headers:
                conn.putheader(name, value)
            if body or method in ("POST", "PUT", "PATCH"):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)
            resp = conn.getresponse()
            data = resp.read()
            copied = [(n, resp.getheader(n)) for n in self.copy_response
                      if resp.getheader(n) is not None]
            return resp.status, copied, data
        finally:
            conn.close()


def make_handler(app):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def handle_any(self):
            arrived = time.monotonic()
            incoming = list(self.headers.items())
            app.record(self.command, self.path, incoming)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length > 0 else b""
            try:
                outbound = app.outbound_headers(incoming, arrived)
                status, copied, data = app.call_next(self.command, self.path, outbound, body)
                for _ in range(app.retry_503):
                    if status != 503:
                        break
                    status, copied, data = app.call_next(self.command, self.path, outbound, body)
            except (OSError, http.client.HTTPException) as e:
                status, copied, data = 502, [], ("chain_app: next hop failed: %s" % e).encode()
            self.send_response(status)
            for name, value in copied:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = handle_any

        def log_message(self, fmt, *args):  # quiet: the test reads the proxies' logs
            pass

    return Handler


def write_port_file(path, port):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.replace(tmp, path)  # readers never see a half-written file


def main(argv):
    args = parse_args(argv)
    app = ChainApp(args.next, args.propagate, args.copy_response, args.record, args.retry_503)
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(app))
    server.daemon_threads = True

    def stop(signum, frame):
        # shutdown() waits for serve_forever to return: call it off this thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    write_port_file(args.port_file, server.server_address[1])
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
