#!/usr/bin/env python3
"""gRPC retry storm: every call UNAVAILABLE for the outage, then OK.

A gRPC server (python3-grpcio, generic handlers, bytes in and out) answers
every call to /bench.Storm/Call with UNAVAILABLE (Trailers-Only) for
--outage seconds, then OK, and logs every arrival. 100 callers, each on its
own channel (grpc.enable_retries 0: only the proxies retry), call it every
100 ms through one path at a time:

  direct      straight to the server
  onelayer    one onelayer (h2c both sides, retry_on unavailable, retry.idempotent,
              3 attempts, retry budget)
  onelayer3   three onelayers stacked, each configured to retry
  haproxy     HAProxy 2.6 (proto h2 both sides, retries 2, retry-on 503
              response-timeout conn-failure: it cannot see gRPC statuses)
  haproxy3    three HAProxies stacked

Reported per path: server arrivals per call during the outage and the time
to recover after it. A path that cannot be set up gets a row saying why.

Usage: tests/bench/grpc_storm.py [--quick] [--out DIR] [--targets LIST]
(runs under a python3 with grpcio: Debian's /usr/bin/python3 with
python3-grpcio; started with another, it re-runs itself under that one)
"""
import argparse
import asyncio
import collections
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util  # noqa: E402
import load_clients  # noqa: E402

try:
    import grpc
    import grpc.aio
except ImportError:  # the pure parts (analysis, configs) are tested without it
    grpc = None

DEBIAN_PYTHON = "/usr/bin/python3"
SERVICE = "bench.Storm"
OK, DEADLINE_EXCEEDED, UNAVAILABLE = 0, 4, 14
STATUS_NAMES = {0: "OK", 1: "CANCELLED", 2: "UNKNOWN", 4: "DEADLINE_EXCEEDED", 8: "RESOURCE_EXHAUSTED",
                12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE"}
TARGETS = ("direct", "onelayer", "onelayer3", "haproxy", "haproxy3")
LABEL = {"direct": ("direct (no proxy)", 0), "onelayer": ("onelayer", 1), "onelayer3": ("onelayer", 3),
         "haproxy": ("HAProxy", 1), "haproxy3": ("HAProxy", 3)}


# ---------------------------------------------------------------- analysis (pure)

def as_http_status(code):
    """The storm analysis counts 200 as success and 0 as a client error or
    timeout: OK -> 200, DEADLINE_EXCEEDED (the caller's timeout) -> 0, any
    other gRPC status -> 1000 + status (a failure)."""
    if code == OK:
        return 200
    if code == DEADLINE_EXCEEDED:
        return 0
    return 1000 + code


def analyze(args, records, arrivals, t0):
    """records: (t_sent, t_done, grpc status) per call; arrivals: (t, grpc
    status) per call at the server; t0: the outage's start."""
    mapped = [(s, d, as_http_status(c)) for s, d, c in records]
    res = load_clients.storm_analyze(args, mapped, [(t, as_http_status(c)) for t, c in arrivals], t0)
    outage_end = t0 + args.outage
    codes = collections.Counter(STATUS_NAMES.get(c, str(c)) for s, _, c in records if t0 <= s < outage_end)
    res["caller_status_outage"] = dict(sorted(codes.items()))
    # Renamed for gRPC: calls, not requests.
    res["calls_outage"] = res.pop("downstream_outage")
    res["ok_outage"] = res.pop("downstream_ok_outage")
    res["arrivals_per_call"] = res.pop("arrivals_per_request")
    return res


def fmt(v, digits=2):
    return "n/a" if v is None else f"{v:.{digits}f}"


def markdown(results, settings):
    lines = ["## gRPC retry storm\n",
             f"`tests/bench/grpc_storm.py`: {settings['callers']} callers, each on its own channel "
             "(`grpc.enable_retries: 0`) calling a unary method every 100 ms with a "
             f"{settings['call_timeout_s']:g} s deadline; the server (python3-grpcio) answers every call "
             f"UNAVAILABLE (Trailers-Only) for {settings['outage_s']:g} s, then OK. *Arrivals per call* = "
             "calls arriving at the server during the outage / calls made during the outage. *Recovery* = "
             "time from the server's recovery to the first 100 ms bucket from which >= 99% of calls end OK "
             "for the rest of the run.\n",
             "| path | depth | calls (outage) | server arrivals (outage) | arrivals per call | "
             "OK during outage | callers' statuses (outage) | recovery |",
             "|---|---:|---:|---:|---:|---:|---|---:|"]
    for r in results:
        name, depth = LABEL[r["target"]]
        if "unavailable" in r:
            lines.append(f"| {name} | {depth} | not available: {r['unavailable']} | | | | | |")
            continue
        rec = r.get("recover_s")
        statuses = ", ".join(f"{k} {v}" for k, v in r["caller_status_outage"].items())
        lines.append(f"| {name} | {depth} | {r['calls_outage']} | {r['arrivals_outage']} | "
                     f"**{fmt(r['arrivals_per_call'])}** | {r['ok_outage']} | {statuses} | "
                     f"{'not within the run' if rec is None else fmt(rec, 1) + ' s'} |")
    targets = []
    for t in ("onelayer", "onelayer3"):
        r = next((x for x in results if x["target"] == t), None)
        a = None if r is None else r.get("arrivals_per_call")
        status = "n/a" if a is None else ("met" if a <= 1.15 else "**not met**")
        targets.append(f"| gRPC storm, depth {LABEL[t][1]}: <= 1.15 server arrivals per call | {fmt(a)} | {status} |")
    lines += ["", "| target | measured | status |", "|---|---:|---|"] + targets + [""]
    return "\n".join(lines)


def sanity(results):
    """Problems that mean a row did not measure what it claims."""
    out = []
    for r in results:
        if "unavailable" not in r and (not r["calls_outage"] or not r["arrivals_outage"]):
            out.append(f"{r['target']}: no traffic measured")
    return out


# ---------------------------------------------------------------- configs (pure)

def onelayer_config(upstream_port, layer):
    """onelayer for the storm: h2c on both sides, gRPC UNAVAILABLE retried
    (the calls are POSTs: the route says they are safe to repeat), the
    benchmark's 3 attempts and retry budget."""
    return bench_util.onelayer_config(upstream_port, layer, 1, 0, listener_protocols=["h2c"],
                                      upstream_protocol="h2c", retry_on=("unavailable", "reset", "503"),
                                      idempotent=True)


def haproxy_config(port, upstream_port):
    """HAProxy 2.6, the benchmark's settings with HTTP/2 on both sides and
    every retry it can make: a gRPC status is in the trailers (or a
    Trailers-Only HEADERS with HTTP status 200), which retry-on cannot see."""
    return bench_util.haproxy_config(port, upstream_port, maxconn=4096, proto="h2",
                                     retry_on="503 response-timeout conn-failure")


# ---------------------------------------------------------------- the server

class Outage:
    """The server's state: the failing window and the arrivals log."""

    def __init__(self):
        self.fail_from = self.fail_until = 0.0
        self.armed = False
        self.arrivals = []

    def arm(self, t0, outage):
        self.fail_from, self.fail_until = t0, t0 + outage
        self.arrivals.clear()
        self.armed = True

    def arrive(self, now):
        """The status for a call arriving now (logged once armed)."""
        failing = self.armed and self.fail_from <= now < self.fail_until
        code = UNAVAILABLE if failing else OK
        if self.armed:
            self.arrivals.append((now, code))
        return code


async def serve(args):
    state = Outage()

    async def call(request, context):
        if state.arrive(time.monotonic()) == UNAVAILABLE:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "outage")
        return b"ok"

    async def arm(request, context):
        q = json.loads(request)
        state.arm(q["t0"], q["outage"])
        return b"armed"

    async def dump(request, context):
        return json.dumps(state.arrivals).encode()

    handler = grpc.method_handlers_generic_handler(SERVICE, {
        "Call": grpc.unary_unary_rpc_method_handler(call),
        "Arm": grpc.unary_unary_rpc_method_handler(arm),
        "Dump": grpc.unary_unary_rpc_method_handler(dump)})
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, args.port_file)
    await asyncio.sleep(args.lifetime)  # bounded: the driver stops it sooner
    await server.stop(0)


# ---------------------------------------------------------------- the callers

CHANNEL_OPTIONS = [("grpc.enable_retries", 0), ("grpc.use_local_subchannel_pool", 1)]


async def control(port, method, body):
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS) as ch:
        return await ch.unary_unary(f"/{SERVICE}/{method}")(body, timeout=10)


async def one_call(stub, timeout):
    try:
        await stub(b"p" * 64, timeout=timeout)
        return OK
    except grpc.aio.AioRpcError as e:
        return e.code().value[0]


async def probe(port):
    """One call through the path before the storm: its status."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS) as ch:
        return await one_call(ch.unary_unary(f"/{SERVICE}/Call"), 5)


async def callers(args, port, t_start, end):
    records = []

    async def caller():
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS) as ch:
            stub = ch.unary_unary(f"/{SERVICE}/Call")

            async def one():
                sent = time.monotonic()
                code = await one_call(stub, args.call_timeout)
                records.append((sent, time.monotonic(), code))

            await load_clients.paced(t_start, end, args.interval, one)

    await asyncio.gather(*(caller() for _ in range(args.callers)))
    return records


async def storm(args, front_port, server_port):
    t_start = time.monotonic() + 0.5
    t0 = t_start + args.lead
    end = t0 + args.outage + args.tail
    await control(server_port, "Arm", json.dumps({"t0": t0, "outage": args.outage}).encode())
    records = await callers(args, front_port, t_start, end)
    await asyncio.sleep(0.2)  # let attempts in flight land
    arrivals = [tuple(a) for a in json.loads(await control(server_port, "Dump", b""))]
    return records, arrivals, t0


# ---------------------------------------------------------------- processes

class Processes:
    """Every process this run starts, stopped (TERM, then KILL) at the end."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []

    def start(self, name, cmd):
        log = open(os.path.join(self.tmp, name + ".log"), "w")
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 3
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()


def wait_file(path, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and os.path.getsize(path):
            return open(path).read().strip()
        time.sleep(0.05)
    return None


def start_server(procs, name):
    port_file = os.path.join(procs.tmp, name + ".port")
    procs.start(name, [sys.executable, os.path.abspath(__file__), "serve", "--port-file", port_file])
    port = wait_file(port_file, 15)
    if port is None:
        raise RuntimeError("the gRPC server did not start")
    return int(port)


def start_onelayer(procs, args, name, upstream_port, layer):
    """The port of a onelayer in front of upstream_port, or raises
    Unavailable (onelayer refuses the config) or RuntimeError."""
    path = os.path.join(procs.tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(onelayer_config(upstream_port, layer))
    check = subprocess.run([args.onelayer, "--check", "--config", path], capture_output=True, text=True)
    if check.returncode != 0:
        errors = [line.split(": ", 1)[-1] for line in (check.stdout + check.stderr).splitlines() if line.strip()]
        raise Unavailable("onelayer refused the gRPC config: " + "; ".join(errors[:3]))
    ports = path + ".ports"
    procs.start(name, [args.onelayer, "--config", path, "--ports-file", ports, "--log-level", "warn"])
    found = bench_util.read_ports_file(ports, ["bench"], 10)
    if not found:
        raise RuntimeError(f"{name} wrote no ports file")
    return found["bench"]


def start_haproxy(procs, name, upstream_port):
    port = bench_util.free_ports(1)[0]
    path = os.path.join(procs.tmp, name + ".cfg")
    with open(path, "w") as f:
        f.write(haproxy_config(port, upstream_port))
    procs.start(name, ["haproxy", "-f", path, "-db"])
    if not bench_util.wait_port(port, 10):
        raise RuntimeError(f"{name} did not listen")
    return port


class Unavailable(Exception):
    """A path that cannot be set up on this build (the reason in str())."""


def run_target(args, target, tmp):
    procs = Processes(tmp)
    try:
        server_port = start_server(procs, f"{target}-server")
        depth = LABEL[target][1]
        front = server_port
        for hop in range(depth, 0, -1):  # the innermost hop first
            if target.startswith("onelayer"):
                front = start_onelayer(procs, args, f"{target}-hop{hop}", front, f"hop{hop}")
            else:
                front = start_haproxy(procs, f"{target}-hop{hop}", front)
        code = asyncio.run(probe(front))
        if code != OK:
            raise Unavailable(f"a call through it ended {STATUS_NAMES.get(code, code)} before the outage")
        print(f"[grpc-storm {time.strftime('%T')}] {target}: {args.callers} callers, "
              f"{args.outage:g} s of UNAVAILABLE", file=sys.stderr)
        records, arrivals, t0 = asyncio.run(storm(args, front, server_port))
        res = {"phase": "grpc_storm", "target": target, "depth": depth, "callers": args.callers}
        res.update(analyze(args, records, arrivals, t0))
        load_clients.storm_timeline(args, [(s, d, as_http_status(c)) for s, d, c in records],
                                    [(t, as_http_status(c)) for t, c in arrivals], t0,
                                    os.path.join(args.out, f"grpc-storm-{target}.tsv"))
        return res
    except Unavailable as e:
        return {"phase": "grpc_storm", "target": target, "unavailable": str(e)}
    finally:
        procs.stop_all()


# ---------------------------------------------------------------- main

def ensure_grpc():
    """Re-run under Debian's python3 when this one has no grpcio."""
    if grpc is not None:
        return
    if os.path.realpath(sys.executable) != os.path.realpath(DEBIAN_PYTHON) and os.access(DEBIAN_PYTHON, os.X_OK):
        os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON] + sys.argv)
    sys.exit("grpc_storm.py: no grpcio in this python3 (Debian: python3-grpcio)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")
    p = sub.add_parser("serve", help="the storm's gRPC server (started by the run)")
    p.add_argument("--port-file", required=True)
    p.add_argument("--lifetime", type=float, default=300)
    ap.add_argument("--quick", action="store_true", help="3 s outage, short lead and tail")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--callers", type=int, default=100)
    ap.add_argument("--interval", type=float, default=0.1, help="seconds between a caller's calls")
    ap.add_argument("--call-timeout", type=float, default=5.0, help="each call's deadline (s)")
    ap.add_argument("--outage", type=float)
    ap.add_argument("--lead", type=float)
    ap.add_argument("--tail", type=float)
    ap.add_argument("--onelayer", default=os.environ.get("ONELAYER_BIN") or os.path.join(
        os.environ.get("BUILD_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build"),
        "onelayer"))
    a = ap.parse_args()
    ensure_grpc()
    if a.cmd == "serve":
        asyncio.run(serve(a))
        return 0
    quick = a.quick
    a.outage = a.outage if a.outage is not None else (3.0 if quick else 10.0)
    a.lead = a.lead if a.lead is not None else (0.5 if quick else 1.0)
    a.tail = a.tail if a.tail is not None else (2.0 if quick else 5.0)
    targets = [t for t in a.targets.split(",") if t]
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        sys.exit(f"grpc_storm.py: unknown targets {unknown} (known: {', '.join(TARGETS)})")
    if any(t.startswith("haproxy") for t in targets) and not shutil.which("haproxy"):
        sys.exit("grpc_storm.py: haproxy not found")
    if any(t.startswith("onelayer") for t in targets) and not os.access(a.onelayer, os.X_OK):
        sys.exit(f"grpc_storm.py: {a.onelayer} is not executable (set ONELAYER_BIN)")
    load_clients.raise_nofile()
    os.makedirs(a.out, exist_ok=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="onelayer-grpc-storm.") as tmp:
        for t in targets:
            results.append(run_target(a, t, tmp))
    settings = {"callers": a.callers, "outage_s": a.outage, "lead_s": a.lead, "tail_s": a.tail,
                "call_timeout_s": a.call_timeout, "interval_s": a.interval, "mode": "quick" if quick else "full",
                "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "onelayer": a.onelayer, "grpcio": grpc.__version__}
    md = markdown(results, settings)
    problems = sanity(results)
    md += "".join(f"\n- CHECK FAILED: {p}" for p in problems)
    with open(os.path.join(a.out, "grpc-storm.md"), "w") as f:
        f.write(md + "\n")
    with open(os.path.join(a.out, "grpc-storm.json"), "w") as f:
        json.dump({"settings": settings, "results": results}, f, indent=1)
    print(md)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
