"""The "remote" side of tests/integration/test_transparent.py, run inside the
test's remote network namespace (`ip netns exec ... python3 transparent_peers.py
ADDRS CERT KEY`): real servers on the remote's own addresses (ADDRS: a
comma list, IPv4 and IPv6) that the app calls by address, with no proxy
settings. Every address serves every port below, with one shared record.

* 8080 HTTP/1.1 (http.server): records every request head; `/flaky/<id>`
  answers 503 to its first arrival and 200 after; a path ending in `/503`
  always answers 503;
  `GET /seen` answers the recorded heads as JSON (and is not recorded).
* 8082 gRPC (python3-grpcio, h2c): `/onelayer.test.Echo/Get` echoes its
  payload with "echo:" in front; records each call's metadata (in /seen too).
* 8443 TLS echo (the app does its own TLS): echoes every byte back.
* 2525 a server that speaks first: "220 remote ready\\r\\n", then echoes
  each line it gets with "250 " in front until the client closes.

Prints "ready" once every port listens. Standard library plus Debian's
python3-grpcio.
"""
import json
import socket
import ssl
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    import grpc
except ImportError:
    sys.path.append("/usr/lib/python3/dist-packages")
    import grpc  # noqa: E402

ADDRS, CERT, KEY = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
lock = threading.Lock()
seen = []      # request heads on 8080 and gRPC calls, in arrival order
arrivals = {}  # path -> count


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path == "/seen":
            with lock:
                data = json.dumps({"seen": seen, "arrivals": arrivals}).encode()
            self.answer(200, data)
            return
        with lock:
            seen.append({"method": self.command, "path": self.path,
                         "headers": [[k.lower(), v] for k, v in self.headers.items()],
                         "body": body.decode("latin-1")})
            n = arrivals[self.path] = arrivals.get(self.path, 0) + 1
        if self.path.startswith("/flaky/") and n == 1:
            self.answer(503, b"try again\n")
        elif self.path.endswith("/503"):
            self.answer(503, b"down\n")
        else:
            self.answer(200, b"hello from remote " + self.path.encode() + b"\n")

    do_GET = do_POST = do_PUT = do_DELETE = handle_any


def grpc_get(request, context):
    with lock:
        seen.append({"method": "grpc", "path": "/onelayer.test.Echo/Get",
                     "headers": [[k, v] for k, v in context.invocation_metadata()], "body": ""})
    return b"echo:" + request


def serve_tls(listener, ctx):
    while True:
        conn, _ = listener.accept()

        def run(c=conn):
            try:
                with ctx.wrap_socket(c, server_side=True) as s:
                    while True:
                        data = s.recv(65536)
                        if not data:
                            break
                        s.sendall(data)
            except (OSError, ssl.SSLError):
                pass
        threading.Thread(target=run, daemon=True).start()


def serve_first(listener):
    while True:
        conn, _ = listener.accept()

        def run(c=conn):
            try:
                c.sendall(b"220 remote ready\r\n")
                f = c.makefile("rb")
                for line in f:
                    c.sendall(b"250 " + line)
            except OSError:
                pass
            finally:
                c.close()
        threading.Thread(target=run, daemon=True).start()


def family(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


class HttpServer6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def listen(addr, port):
    s = socket.socket(family(addr))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(128)
    return s


def main():
    ThreadingHTTPServer.request_queue_size = 256  # the default 5 refuses a burst of new connections
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    handler = grpc.method_handlers_generic_handler(
        "onelayer.test.Echo", {"Get": grpc.unary_unary_rpc_method_handler(grpc_get)})
    server.add_generic_rpc_handlers((handler,))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(CERT, KEY)
    for addr in ADDRS:
        http = (HttpServer6 if family(addr) == socket.AF_INET6 else ThreadingHTTPServer)((addr, 8080), Handler)
        http.daemon_threads = True
        threading.Thread(target=http.serve_forever, daemon=True).start()
        grpc_addr = "[%s]:8082" % addr if family(addr) == socket.AF_INET6 else "%s:8082" % addr
        if server.add_insecure_port(grpc_addr) == 0:
            raise SystemExit("grpc: cannot bind " + grpc_addr)
        threading.Thread(target=serve_tls, args=(listen(addr, 8443), ctx), daemon=True).start()
        threading.Thread(target=serve_first, args=(listen(addr, 2525),), daemon=True).start()
    server.start()
    print("ready", flush=True)
    sys.stdin.read()  # until the test closes our stdin (or dies)


if __name__ == "__main__":
    main()
