"""What the three-hop demo's Python processes share (app.py, origin.py):
reading LISTEN, writing the port file, and serving until SIGTERM.
Standard library only; imported from the script's own directory (compose
mounts it next to them in /srv)."""
import http.server
import os
import signal
import sys


def split_listen(value):
    host, _, port = value.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


def write_port_file(path, port):
    # Written under a temporary name and renamed so a reader never sees half a line.
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"http {port}\n")
    os.replace(tmp, path)


def serve(handler):
    """Serves `handler` on LISTEN (default 0.0.0.0:8080; port 0 = any free
    port), one thread per connection, writing "http <port>" to PORT_FILE once
    bound, until SIGTERM."""
    server = http.server.ThreadingHTTPServer(split_listen(os.environ.get("LISTEN", "0.0.0.0:8080")), handler)
    server.daemon_threads = True
    # PID 1 in a container ignores SIGTERM unless a handler is installed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if os.environ.get("PORT_FILE"):
        write_port_file(os.environ["PORT_FILE"], server.server_address[1])
    try:
        server.serve_forever()
    finally:
        server.server_close()
