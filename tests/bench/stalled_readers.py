#!/usr/bin/env python3
"""What each HTTP/2 proxy holds for clients that ask for large responses and read none.

A client that opens its streams, asks for a large response on each and then
reads nothing leaves a proxy to hold whatever it has taken from the origin
for those streams. This starts one NGINX h2c origin serving a 1 MiB file,
then onelayer (the benchmark's config: h2c on both sides, 1 worker),
nghttpx and HAProxy 2.6 (their h2 benchmark settings,
tests/bench/h2_phase.sh) in front of it, one after the other. For each, it
opens `--clients` connections of `--streams` GETs of that file each, reads
nothing more once the proxy's SETTINGS have arrived (a 4 KiB receive
buffer), waits until the proxy's RSS stops growing, and closes them. It
prints the RSS at start, with the streams held, per stream held, and 6 s
after they closed.

With `--download`, it also times `h2load -c4 -m4` fetching a 10 MB file
100 times through each proxy, 5 runs, and prints the median GB/s: what a
client that does read gets.

Everything is on 127.0.0.1 and stops by itself.

Usage: tests/bench/stalled_readers.py [--onelayer BIN] [--other BIN]
           [--clients N] [--streams N] [--proxies LIST] [--download]
`--other` adds a row for another onelayer build (an older commit, say).
"""
import argparse
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_util  # noqa: E402
from origin_rotation import Run, start_haproxy, start_nghttpx, start_nginx_origin, start_onelayer  # noqa: E402

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# The "after" reading waits this long: onelayer hands freed memory back to
# the system every 5 s (malloc_trim), the others whenever their allocator does.
AFTER_CLOSE_S = 6


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def get_block(path):
    """A GET head in HPACK without the dynamic table: :method GET and
    :scheme http from the static table, :path and :authority as literals
    with an indexed name."""
    return b"\x82\x86" + b"\x04" + bytes([len(path)]) + path + b"\x01\x01t"


def start_static_origin(run, files):
    """An NGINX h2c origin serving `files` (name -> size, random bytes)."""
    www = os.path.join(run.tmp, "www")
    os.makedirs(www)
    for name, size in files.items():
        with open(os.path.join(www, name), "wb") as f:
            f.write(os.urandom(size))
    return start_nginx_origin(run, "root %s;" % www,
                              http="keepalive_requests 1000000;\n  http2_max_concurrent_streams 1000;")[0]


def rss_kib(pid):
    return bench_util.status_kib(bench_util.tree_pids(pid), "VmRSS")


def settled_rss(pid, timeout=15.0):
    """The RSS once two readings 0.5 s apart are within 1%."""
    last, deadline = rss_kib(pid), time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = rss_kib(pid)
        if abs(now - last) <= last * 0.01:
            return now
        last = now
    return last


def stalled_clients(port, clients, streams, path):
    """`clients` connections with `streams` GETs of `path` each; the
    proxy's SETTINGS are read and acknowledged, then nothing more."""
    socks = []
    block = get_block(path)
    for _ in range(clients):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        s.sendall(PREFACE + frame(0x4, 0, 0))
        s.settimeout(5)
        s.recv(4096)  # the proxy's SETTINGS (and maybe its WINDOW_UPDATE)
        heads = b"".join(frame(0x1, 0x5, 2 * i + 1, block) for i in range(streams))
        s.sendall(frame(0x4, 0x1, 0) + heads)  # SETTINGS ACK, then every stream
        socks.append(s)
    return socks


def download_rate(port, rounds=5):
    """The median of `rounds` h2load runs of 100 downloads, in GB/s; None
    if any download failed."""
    rates = []
    for _ in range(rounds):
        out = subprocess.run(["h2load", "-c4", "-m4", "-n", "100", "http://127.0.0.1:%d/download.bin" % port],
                             capture_output=True, text=True, errors="replace", timeout=300).stdout
        m = re.search(r"finished in [^,]+, [0-9.]+ req/s, ([0-9.]+)([KMG])B/s", out)
        if not re.search(r"\b100 succeeded\b", out) or not m:
            return None
        rates.append(float(m.group(1)) * {"K": 1e-6, "M": 1e-3, "G": 1.0}[m.group(2)])
    return sorted(rates)[len(rates) // 2]


def stop_last(run):
    p = run.procs.pop()
    os.killpg(p.pid, signal.SIGTERM)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onelayer", default=os.path.join(HERE, "..", "..", "build", "onelayer"))
    ap.add_argument("--other", help="another onelayer build: a row of its own")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--streams", type=int, default=100, help="per client (default 100, every proxy's limit)")
    ap.add_argument("--proxies", default="onelayer,nghttpx,haproxy")
    ap.add_argument("--download", action="store_true", help="also time 10 MB downloads that are read")
    a = ap.parse_args()
    for tool in ("nginx", "h2load") if a.download else ("nginx",):
        if not shutil.which(tool):
            sys.exit("stalled_readers: %s not found" % tool)

    tmp = tempfile.mkdtemp(prefix="onelayer-stalled.")
    os.chmod(tmp, 0o755)  # NGINX's worker (not root) reads the files below it
    run = Run(tmp)
    rows = []
    try:
        origin = start_static_origin(run, {"big.bin": 1 << 20, "download.bin": 10_000_000})
        kinds = a.proxies.split(",")
        if a.other:
            kinds.insert(1, "other")
        for kind in kinds:
            if kind == "onelayer":
                name, port = "onelayer", start_onelayer(run, "onelayer", a.onelayer, origin)[0]
            elif kind == "other":
                name, port = "onelayer (--other)", start_onelayer(run, "onelayer-other", a.other, origin)[0]
            elif kind == "nghttpx":
                name, port = "nghttpx", start_nghttpx(run, origin)
            elif kind == "haproxy":
                name, port = "HAProxy", start_haproxy(run, origin)
            else:
                sys.exit("stalled_readers: unknown proxy %s" % kind)
            pid = run.procs[-1].pid
            print("stalled_readers: %s, %d x %d streams" % (name, a.clients, a.streams), file=sys.stderr)
            start = settled_rss(pid)
            socks = stalled_clients(port, a.clients, a.streams, b"/big.bin")
            held = settled_rss(pid)
            for s in socks:
                s.close()
            time.sleep(AFTER_CLOSE_S)
            after = rss_kib(pid)
            rate = download_rate(port) if a.download else None
            rows.append((name, start, held, after, rate))
            stop_last(run)  # this proxy's turn is over
    finally:
        run.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    streams = a.clients * a.streams
    print("Origin: NGINX h2c serving a 1 MiB file; %d connections x %d streams asking for it, read by no one.\n"
          % (a.clients, a.streams))
    print("| proxy | RSS at start | RSS with %d streams held | per stream | RSS 6 s after they closed |%s"
          % (streams, " 10 MB downloads, read (h2load -c4 -m4, median of 5) |" if a.download else ""))
    print("|---|---:|---:|---:|---:|" + ("---:|" if a.download else ""))
    for name, start, held, after, rate in rows:
        print("| %s | %.1f MiB | %.1f MiB | %d KiB | %.1f MiB |%s" % (
            name, start / 1024, held / 1024, round((held - start) / streams), after / 1024,
            (" %s |" % ("%.2f GB/s" % rate if rate else "failed")) if a.download else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
