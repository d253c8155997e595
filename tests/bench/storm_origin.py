#!/usr/bin/env python3
"""Retry-storm origin: an HTTP/1.1 keep-alive server that answers 200 until
armed, then 503 to every request for the outage window, then 200 again.

It binds port 0 and writes the port to --port-file (no race). Control paths,
sent straight to it rather than through the proxies:
  GET /__arm?t0=<monotonic>&outage=<seconds>  start logging; fail in [t0, t0+outage)
  GET /__dump                                  write arrivals to --log, answer 200
Arrivals are logged as "<monotonic seconds> <status>" lines. CLOCK_MONOTONIC is
system-wide on Linux, so the storm client compares its own timestamps with these.
"""
import argparse
import asyncio
import os
import time
from urllib.parse import parse_qs, urlsplit

BODY_OK = b"x" * 99 + b"\n"
OK = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "
      + str(len(BODY_OK)).encode() + b"\r\n\r\n" + BODY_OK)
FAIL = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
        b"Content-Length: 12\r\n\r\nunavailable\n")


class State:
    def __init__(self, log_path):
        self.log_path = log_path
        self.armed = False
        self.fail_from = 0.0
        self.fail_until = 0.0
        self.arrivals = []  # (t, status)

    def control(self, target):
        url = urlsplit(target)
        if url.path == "/__arm":
            q = parse_qs(url.query)
            self.fail_from = float(q["t0"][0])
            self.fail_until = self.fail_from + float(q["outage"][0])
            self.arrivals.clear()
            self.armed = True
        elif url.path == "/__dump":
            with open(self.log_path, "w") as f:
                f.writelines(f"{t:.6f} {s}\n" for t, s in self.arrivals)
        return OK

    def answer(self, target):
        if target.startswith("/__"):
            return self.control(target)
        now = time.monotonic()
        failing = self.armed and self.fail_from <= now < self.fail_until
        if self.armed:
            self.arrivals.append((now, 503 if failing else 200))
        return FAIL if failing else OK


class Conn(asyncio.Protocol):
    def __init__(self, state):
        self.state = state
        self.buf = b""
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.buf += data
        out = []
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                break
            head = self.buf[:end].decode("latin-1")
            need = end + 4 + content_length(head)
            if len(self.buf) < need:
                break
            self.buf = self.buf[need:]
            parts = head.split(" ", 2)
            out.append(self.state.answer(parts[1] if len(parts) > 1 else "/"))
        if out:
            self.transport.write(b"".join(out))


def content_length(head):
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            return int(value.strip() or 0)
    return 0


async def serve(args):
    state = State(args.log)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Conn(state), "127.0.0.1", 0,
                                      backlog=4096, reuse_address=True)
    port = server.sockets[0].getsockname()[1]
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, args.port_file)
    await asyncio.sleep(args.lifetime)  # bounded: the driver kills it sooner


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--lifetime", type=float, default=300)
    asyncio.run(serve(ap.parse_args()))


if __name__ == "__main__":
    main()
