"""Interleaved latency load for the fleet fault tests: one request to each
of a few proxies in turn, every `period` seconds, one keep-alive connection
each, from a process of its own, so that the test's threads (origin, relay,
polling) do not hold the clock while a request is timed. Whatever else the
machine does at a moment slows them all alike; the order rotates, since the
first request after the pause pays for waking up.

    load = InterleavedLoad([port_a, port_b, ...]); ...; load.stop()
    load.samples, load.errors, load.between(start, end)
"""

import os
import select
import subprocess
import sys
import time

import harness as h

HERE = os.path.dirname(os.path.abspath(__file__))


class InterleavedLoad:
    """Runs this file as a child process until stop(). samples: (time,
    [latency to each port]) on the CLOCK_MONOTONIC the test shares; errors:
    (port index, what went wrong) for every answer that was not a 200."""

    def __init__(self, ports, period=0.005):
        self.n = len(ports)
        self.samples = []
        self.errors = []
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "interleaved_load.py"), str(period)]
                                     + [str(p) for p in ports], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, cwd=HERE)
        if self.proc.stdout.readline().strip() != "ready":
            self.proc.kill()
            raise AssertionError("the interleaved load did not start")

    def stop(self):
        if self.proc is None:
            return
        out, _ = self.proc.communicate(input="", timeout=30)
        self.proc = None
        for line in out.splitlines():
            kind, rest = line.split(" ", 1)
            if kind == "S":
                fields = rest.split()
                self.samples.append((float(fields[0]), [float(x) for x in fields[1:]]))
            else:
                i, what = rest.split(" ", 1)
                self.errors.append((int(i), what))

    def between(self, start, end):
        """[latencies to each port] of the rounds sent in [start, end)."""
        inside = [lat for t, lat in self.samples if start <= t < end]
        return [[lat[i] for lat in inside] for i in range(self.n)]


def _one(port, conns, i, errors):
    t = time.monotonic()
    try:
        if conns[i] is None:
            conns[i] = h.Conn(port, timeout=5)
        r = conns[i].request("GET", "/")
        if r.status != 200:
            errors.append("E %d status %d" % (i, r.status))
    except Exception as e:  # noqa: BLE001 - reported to the test
        errors.append("E %d %r" % (i, e))
        conns[i] = None
    return time.monotonic() - t


def main():
    period = float(sys.argv[1])
    ports = [int(p) for p in sys.argv[2:]]
    conns = [None] * len(ports)
    lines, errors = [], []
    for i, port in enumerate(ports):  # connected before the first round
        _one(port, conns, i, errors)
    print("ready", flush=True)
    turn = 0
    # Until the test closes our stdin; the wait for it is the pause.
    while not select.select([sys.stdin], [], [], period)[0]:
        t = time.monotonic()
        lat = [0.0] * len(ports)
        for k in range(len(ports)):
            i = (turn + k) % len(ports)
            lat[i] = _one(ports[i], conns, i, errors)
        turn = (turn + 1) % len(ports)
        lines.append("S %.6f " % t + " ".join("%.6f" % x for x in lat))
    sys.stdout.write("\n".join(lines + errors) + "\n")


if __name__ == "__main__":
    main()
