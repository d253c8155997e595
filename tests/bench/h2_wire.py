#!/usr/bin/env python3
"""What each HTTP/2 proxy sends its origin per request, byte by byte.

The h2 benchmark (tests/bench/h2_phase.sh) counts req/s and CPU; this shows
the wire between a proxy and its origin that the CPU goes into. It starts
the benchmark's NGINX h2c origin ("ok" to every POST), and in front of it,
for each proxy, a TCP relay on 127.0.0.1 that forwards every byte and
reads the proxy's side: HTTP/2 frames by type, the bytes of every header
block (HEADERS and its CONTINUATIONs), and, on the proxy's first
connection, every block HPACK-decoded (RFC 7541), field by field: how each
field went (indexed, a literal with or without indexing or never indexed,
its name by index or as a literal), its bytes, and whether its strings are
Huffman-coded. Each proxy (onelayer with the benchmark's config, onelayer
without the single-layer headers, nghttpx, HAProxy: their h2 benchmark
settings) then carries h2load's 16 connections x 32 streams of 64-byte
POSTs. Two tables come out: per proxy, what reached the origin per request
answered; and field by field, the last request decoded on each proxy's
first connection (a connection's first requests fill the HPACK table; by
then every repeated field is indexed).

Everything is on 127.0.0.1 and stops by itself. The relay is Python, so
req/s here mean nothing: only the bytes are the figures.

Usage: tests/bench/h2_wire.py [--onelayer BIN] [--requests N] [--proxies LIST]
       LIST: comma list of onelayer, onelayer-plain, nghttpx, haproxy (default all)
"""
import argparse
import asyncio
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
import h2_tools  # noqa: E402
from hpack_reading import header_block_fragment, representations  # noqa: E402
from origin_rotation import Run, need_tools, start_haproxy, start_nghttpx, start_onelayer, start_origin  # noqa: E402

try:
    import hpack  # Debian python3-hpack, which python3-h2 depends on
except ImportError:  # Debian's; this interpreter may be another 3.11
    sys.path.append("/usr/lib/python3/dist-packages")
    try:
        import hpack
    except ImportError:  # reported by main(): deploy/install-deps.sh test installs it
        hpack = None

DATA, HEADERS, CONTINUATION = 0x0, 0x1, 0x9
END_HEADERS = 0x4


# ---------------------------------------------------------------- frames

class ClientSide:
    """What an HTTP/2 client sent on one connection, fed in pieces: bytes
    after the preface, frames by type, header blocks and their bytes; with
    `decode`, that many first blocks are HPACK-decoded and the last one is
    kept as (name, value, Representation) triples."""

    def __init__(self, decode=0):
        self.buf = b""
        self.preface = False
        self.bytes = 0
        self.frames = collections.Counter()
        self.blocks = 0
        self.block_bytes = 0
        self.pending = None
        self.decode_left = decode
        self.decoder = hpack.Decoder() if decode else None
        self.last_block = None

    def feed(self, data):
        self.buf += data
        if not self.preface:
            if len(self.buf) < len(h2_tools.PREFACE):
                return
            if not self.buf.startswith(h2_tools.PREFACE):
                raise ValueError("not an HTTP/2 client preface")
            self.buf = self.buf[len(h2_tools.PREFACE):]
            self.preface = True
        frames, self.buf = h2_tools.split_frames(self.buf)
        for kind, flags, _stream, payload in frames:
            self.bytes += h2_tools.FRAME_HEADER + len(payload)
            self.frames[kind] += 1
            if kind == HEADERS:
                self.pending = header_block_fragment(flags, payload)
            elif kind == CONTINUATION and self.pending is not None:
                self.pending += payload
            if kind in (HEADERS, CONTINUATION) and flags & END_HEADERS and self.pending is not None:
                self._block(self.pending)
                self.pending = None

    def _block(self, block):
        self.blocks += 1
        self.block_bytes += len(block)
        if self.decode_left <= 0:
            return
        self.decode_left -= 1
        fields = self.decoder.decode(block, raw=True)
        reps = representations(block)
        if len(fields) != len(reps):
            raise ValueError("decoded %d fields from %d representations" % (len(fields), len(reps)))
        self.last_block = [(n.decode("latin-1"), v.decode("latin-1"), r) for (n, v), r in zip(fields, reps)]


# ---------------------------------------------------------------- relay

class Relay:
    """A TCP relay on 127.0.0.1 (its own thread and event loop) in front of
    `upstream`: every byte goes through; what clients send is read by one
    ClientSide per connection, the first connection's blocks decoded."""

    def __init__(self, upstream, decode=200):
        self.upstream = upstream
        self.decode = decode
        self.sides = []
        self.errors = []
        self.port = None
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(10) or self.port is None:
            raise RuntimeError("the relay did not start")

    def _run(self):
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader, writer):
        side = ClientSide(self.decode if not self.sides else 0)
        self.sides.append(side)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError as e:
            self.errors.append("connect to the origin: %s" % e)
            writer.close()
            return

        async def pipe(src, dst, side=None):
            try:
                while True:
                    data = await src.read(65536)
                    if not data:
                        break
                    dst.write(data)
                    if side is not None:
                        side.feed(data)
                    await dst.drain()
            except ConnectionError:
                pass
            except ValueError as e:  # from side.feed: not HTTP/2
                self.errors.append(str(e))
            finally:
                dst.close()
        await asyncio.gather(pipe(reader, up_writer, side), pipe(up_reader, writer))

    async def _shutdown(self):
        self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def close(self):
        """Stops relaying: every connection through it is closed."""
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def totals(self):
        frames = collections.Counter()
        for s in self.sides:
            frames.update(s.frames)
        return {"connections": len(self.sides), "bytes": sum(s.bytes for s in self.sides), "frames": frames,
                "block_bytes": sum(s.block_bytes for s in self.sides),
                "fields": self.sides[0].last_block if self.sides else None}


# ---------------------------------------------------------------- runs

def start_proxy(run, kind, binary, upstream):
    """The proxy's port, in front of `upstream`."""
    if kind == "onelayer":
        return start_onelayer(run, "onelayer", binary, upstream)[0]
    if kind == "onelayer-plain":
        return start_onelayer(run, "onelayer-plain", binary, upstream, single_layer_headers=False)[0]
    if kind == "nghttpx":
        return start_nghttpx(run, upstream)
    if kind == "haproxy":
        return start_haproxy(run, upstream)
    sys.exit("h2_wire: unknown proxy %s" % kind)


LABELS = {"onelayer": "onelayer", "onelayer-plain": "onelayer without single-layer headers",
          "nghttpx": "nghttpx", "haproxy": "HAProxy"}


def per_request(value, answered):
    return "%.1f" % (value / answered) if answered else "-"


def print_tables(requests, rows):
    print("Origin: NGINX h2c answering `ok`; h2load -c16 -m32, %d 64-byte POSTs per proxy, through a relay "
          "that reads what the proxy sends the origin. Per request answered 2xx:\n" % requests)
    print("| proxy | answered 2xx | bytes to the origin | header block bytes | HEADERS frames | DATA frames | "
          "other frames | connections to the origin |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for kind, res, t in rows:
        ok = res["status_2xx"] or 0
        other = sum(n for k, n in t["frames"].items() if k not in (HEADERS, DATA, CONTINUATION))
        print("| %s | %d | %s | %s | %s | %s | %s | %d |" % (
            LABELS[kind], ok, per_request(t["bytes"], ok), per_request(t["block_bytes"], ok),
            per_request(t["frames"][HEADERS], ok), per_request(t["frames"][DATA], ok), per_request(other, ok),
            t["connections"]))
    for kind, _res, t in rows:
        fields = t["fields"]
        if not fields:
            print("\n%s: no header block decoded" % LABELS[kind])
            continue
        print("\n%s, the last request decoded on its first connection to the origin (%d bytes of header block):\n"
              % (LABELS[kind], sum(r.size for _, _, r in fields)))
        print("| field | value | sent as | bytes | Huffman |")
        print("|---|---|---|---:|---|")
        for name, value, r in fields:
            shown = value if len(value) <= 60 else value[:57] + "..."
            print("| `%s` | `%s` | %s | %d | %s |" % (name, shown.replace("|", "\\|"), r.how(), r.size,
                                                        "yes" if r.huffman else "no"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onelayer", default=os.path.join(HERE, "..", "..", "build", "onelayer"))
    ap.add_argument("--requests", type=int, default=20000, help="per proxy (default 20000)")
    ap.add_argument("--proxies", default="onelayer,onelayer-plain,nghttpx,haproxy")
    a = ap.parse_args()
    if hpack is None:
        sys.exit("h2_wire: the Python module hpack is missing (Debian python3-hpack, with python3-h2)")
    kinds = a.proxies.split(",")
    for k in kinds:
        if k not in LABELS:
            sys.exit("h2_wire: unknown proxy %s (one of %s)" % (k, ", ".join(LABELS)))
    need_tools("h2_wire", ["nginx", "h2load"] + [t for t in ("nghttpx", "haproxy") if t in kinds])

    tmp = tempfile.mkdtemp(prefix="onelayer-h2wire.")
    run = Run(tmp)
    rows, failed = [], []
    try:
        body = os.path.join(tmp, "body.bin")
        with open(body, "wb") as f:
            f.write(b"p" * 64)
        origin, _master = start_origin(run, 1000000)
        for kind in kinds:
            relay = Relay(origin)
            try:
                port = start_proxy(run, kind, a.onelayer, relay.port)
                print("h2_wire: %s, %d requests" % (LABELS[kind], a.requests), file=sys.stderr)
                out = subprocess.run(["h2load", "-c16", "-m32", "-n", str(a.requests), "-d", body,
                                      "http://127.0.0.1:%d/" % port],
                                     capture_output=True, text=True, errors="replace", timeout=600)
                res = h2_tools.parse_h2load(out.stdout)
            finally:
                relay.close()
            if relay.errors:
                failed.append("%s: %s" % (LABELS[kind], relay.errors[0]))
            rows.append((kind, res, relay.totals()))
    finally:
        run.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print_tables(a.requests, rows)
    for f in failed:
        print("h2_wire: the relay could not read %s" % f, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
