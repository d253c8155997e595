#!/usr/bin/env python3
"""Process and port helpers for tests/bench/run.sh (standard library only).

Subcommands print plain text (ports, readiness) or one JSON object per line
(measurements) so the bash driver can append them to results.jsonl.
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- ports

def free_ports(count):
    """Bind `count` sockets to port 0 at once so the ports are distinct, then
    release them. Racy by nature; acceptable for nginx/haproxy, which cannot
    report the port they bound."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def wait_port(port, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def read_ports_file(path, names, timeout):
    """Wait for onelayer's --ports-file to name every listener in `names`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = {}
        try:
            with open(path) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2 and parts[1].isdigit():
                        found[parts[0]] = int(parts[1])
        except OSError:
            pass
        if all(n in found for n in names):
            return found
        time.sleep(0.05)
    return None


# ---------------------------------------------------------------- /proc

def tree_pids(root):
    """The root pid and all its descendants (nginx master + workers)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if os.path.exists(f"/proc/{pid}"):
            out.append(pid)
            todo.extend(children.get(pid, []))
    return out


def stat_times(path):
    """(utime, stime) ticks from a /proc stat file (fields 14 and 15 of
    stat(5): user space and kernel), or None once the process is gone."""
    try:
        with open(path) as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[11]), int(fields[12])


def cpu_split(pids):
    """(utime, stime) summed over the processes (the tgid line already sums
    their threads)."""
    times = [t for t in (stat_times(f"/proc/{pid}/stat") for pid in pids) if t]
    return sum(t[0] for t in times), sum(t[1] for t in times)


def cpu_ticks(pids):
    return sum(cpu_split(pids))


def thread_dirs(pids):
    """(thread id, its /proc directory) for every thread of the processes
    that still exist."""
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            yield int(tid), f"/proc/{pid}/task/{tid}"


def wakeup_interrupts(text=None):
    """Rescheduling and function-call interrupts summed over every CPU, from
    /proc/interrupts (or `text` in its format): the interrupts one CPU sends
    another to wake a task there (a function call when that CPU was idle, a
    rescheduling interrupt when a woken task should preempt the running
    one). Machine-wide; None where the file cannot be read."""
    if text is None:
        try:
            with open("/proc/interrupts") as f:
                text = f.read()
        except OSError:
            return None
    lines = text.splitlines()
    if not lines:
        return None
    cpus = len(lines[0].split())
    total = 0
    for line in lines[1:]:
        if "Rescheduling interrupts" in line or "Function call interrupts" in line:
            total += sum(int(v) for v in line.split()[1:1 + cpus] if v.isdigit())
    return total


def voluntary_switches(pids):
    """Voluntary context switches summed over every thread of the processes:
    how many times they went to sleep (for a proxy, mostly in epoll_wait
    with nothing to do); the thread list is read now, so count around a run
    in which no thread ends."""
    total = 0
    for _, d in thread_dirs(pids):
        try:
            with open(f"{d}/status") as f:
                total += next((int(line.split()[1]) for line in f
                               if line.startswith("voluntary_ctxt_switches:")), 0)
        except OSError:
            continue
    return total


def thread_ticks(pids):
    """utime + stime of every thread of the processes, by thread id."""
    out = {}
    for tid, d in thread_dirs(pids):
        t = stat_times(f"{d}/stat")
        if t:
            out[tid] = sum(t)
    return out


def tcp_out_segments(path="/proc/net/snmp"):
    """The kernel's count of TCP segments sent (all sockets, loopback too)."""
    try:
        with open(path) as f:
            lines = [l.split() for l in f if l.startswith("Tcp:")]
        return int(lines[1][lines[0].index("OutSegs")])
    except (OSError, ValueError, IndexError):
        return None


def status_kib(pids, key):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith(key + ":"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


def reset_hwm(pids):
    """Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0)."""
    ok = True
    for pid in pids:
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            ok = False
    return ok


# ---------------------------------------------------------------- wrk

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def to_ms(text):
    m = re.fullmatch(r"([0-9.]+)(us|ms|s|m|h)", text)
    return float(m.group(1)) * _UNITS[m.group(2)] if m else None


def parse_wrk(text):
    out = {"rps": None, "p50_ms": None, "p99_ms": None, "requests": None,
           "duration_s": None, "socket_errors": 0, "non2xx": 0}
    m = re.search(r"Requests/sec:\s+([0-9.]+)", text)
    if m:
        out["rps"] = float(m.group(1))
    m = re.search(r"(\d+) requests in ([0-9.]+)(us|ms|s|m)", text)
    if m:
        out["requests"] = int(m.group(1))
        out["duration_s"] = to_ms(m.group(2) + m.group(3)) / 1e3
    for pct, key in (("50", "p50_ms"), ("99", "p99_ms")):
        m = re.search(r"^\s+" + pct + r"(?:\.0+)?%\s+(\S+)", text, re.M)
        if m:
            out[key] = to_ms(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        out["socket_errors"] = sum(int(x) for x in m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        out["non2xx"] = int(m.group(1))
    return out


def run_wrk(args):
    """Run wrk once, sampling CPU of the proxy tree and of the origin tree."""
    proxy = tree_pids(args.pid) if args.pid else []
    origin = tree_pids(args.origin_pid) if args.origin_pid else []
    p0, o0, seg0 = cpu_split(proxy), cpu_ticks(origin), tcp_out_segments()
    t0 = thread_ticks(proxy)
    cmd = ["wrk", "-t", str(args.threads), "-c", str(args.connections),
           "-d", f"{args.duration}s", "--timeout", "5s", "--latency", args.url]
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          timeout=args.duration + 30)
    p1, o1, seg1 = cpu_split(proxy), cpu_ticks(origin), tcp_out_segments()
    t1 = thread_ticks(proxy)
    res = parse_wrk(proc.stdout)
    res.update(phase=args.phase, target=args.target, round=args.round,
               wrk_rc=proc.returncode)
    if args.workers:
        res["workers"] = args.workers
    # CPU ticks of each of the proxy's threads over the run, busiest first:
    # shows whether every worker thread took a share of the load.
    res["thread_ticks"] = sorted((t1[t] - t0.get(t, 0) for t in t1), reverse=True)
    n = res["requests"] or 0
    res["proxy_cpu_s"] = (sum(p1) - sum(p0)) / CLK_TCK if proxy else None
    res["origin_cpu_s"] = (o1 - o0) / CLK_TCK
    per = (lambda s: s / n * 1e5 if (s is not None and n) else None)
    res["cpu_s_per_100k"] = per(res["proxy_cpu_s"])
    # User space is the proxy's own code; kernel time is mostly the socket
    # calls' TCP work over loopback (the same calls for every proxy).
    res["user_us_per_req"] = (p1[0] - p0[0]) / CLK_TCK / n * 1e6 if (proxy and n) else None
    res["kernel_us_per_req"] = (p1[1] - p0[1]) / CLK_TCK / n * 1e6 if (proxy and n) else None
    # Machine-wide, so it counts the load generator's and origin's segments
    # too: 4 per request is the floor for a proxied keep-alive exchange
    # (request in, request out, response in, response out; ACKs ride along).
    res["tcp_segments_per_req"] = (seg1 - seg0) / n if (seg0 is not None and seg1 is not None and n) else None
    res["origin_cpu_s_per_100k"] = per(res["origin_cpu_s"])
    if args.raw:
        with open(args.raw, "w") as f:
            f.write(" ".join(cmd) + "\n" + proc.stdout + proc.stderr)
    print(json.dumps(res))
    return 0 if res["rps"] is not None else 1


# ---------------------------------------------------------------- configs

def metric_sum(text, name, **labels):
    """The sum of the samples `name` in Prometheus text whose labels include
    `labels` (0 when there is none)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all('%s="%s"' % (k, v) in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def onelayer_config(upstream_port, layer, workers, max_connections, budget_mode="requests",
                    listener_protocols=None, upstream_protocol=None,
                    retry_on=("connect-failure", "reset", "503"), idempotent=False, access_log=False,
                    single_layer_headers=True, max_requests_per_connection=0, reuse=None,
                    fleet_redis_port=0):
    """The benchmark's onelayer config: retries configured (3 attempts on
    503/connect failure/reset, budget on) but not triggered by a healthy
    origin, keep-alive pool to the origin, admin and listener on port 0.
    listener_protocols / upstream_protocol (e.g. ["http1", "h2c"], "h2c")
    are written only when given; idempotent marks the route's requests safe
    to repeat (gRPC calls are POSTs). The listener writes no access log
    unless access_log is true: HAProxy, NGINX and nghttpx run without one
    too, so every proxy does the same work per request. Without
    single_layer_headers the route still retries, but writes none of the
    headers that tell inner hops about it (inner_hops: pass, no baggage, no
    Via): what proxying alone costs, next to the full config.
    max_requests_per_connection sets the upstream pool's (0: not written);
    reuse the upstream's `reuse` (None: not written, the default).
    fleet_redis_port (0: none) adds a fleet block on the Redis at
    127.0.0.1:<port> and makes the upstream's budget `scope: fleet`
    (docs/fleet.md), with a timeout that a proxy under callgrind meets."""
    listener_extra = f"\n    protocols: [{', '.join(listener_protocols)}]" if listener_protocols else ""
    if not access_log:
        listener_extra += "\n    access_log: false"
    upstream_extra = f"\n    protocol: {upstream_protocol}" if upstream_protocol else ""
    if reuse:
        upstream_extra += f"\n    reuse: {reuse}"
    retry_extra = "\n          idempotent: true" if idempotent else ""
    route_extra = "" if single_layer_headers else "\n        inner_hops: pass"
    top_extra = "" if single_layer_headers else "via: false\npropagate_baggage: false\n"
    pool_extra = (", max_requests_per_connection: %d" % max_requests_per_connection
                  if max_requests_per_connection else "")
    limits = "{ idle_timeout: 60s }"
    if max_connections:
        limits = "{ max_connections: %d, idle_timeout: 60s }" % max_connections
    budget_extra = ""
    if fleet_redis_port:
        top_extra += ("fleet: { redis: 127.0.0.1:%d, sync_interval: 1s, timeout: 1s, stale_after: 5s }\n"
                      % fleet_redis_port)
        budget_extra = ", scope: fleet, service: origin"
    return f"""layer_id: {layer}
{top_extra}admin:
  listen: 127.0.0.1:0
workers: {workers}
listeners:
  - name: bench
    listen: 127.0.0.1:0{listener_extra}
    limits: {limits}
    routes:
      - name: all
        upstream: origin
        timeout: 15s{route_extra}
        retry:
          max_attempts: 3
          retry_on: [{', '.join(retry_on)}]{retry_extra}
          backoff: {{ base: 25ms, cap: 1s, jitter: full }}
upstreams:
  - name: origin
    endpoints: [127.0.0.1:{upstream_port}]{upstream_extra}
    connect_timeout: 1s
    pool: {{ max_idle: 256, idle_timeout: 60s{pool_extra} }}
    retry_budget: {{ mode: {budget_mode}, ratio: 0.1, min_per_second: 5{budget_extra} }}
"""


def haproxy_config(port, upstream_port, maxconn, nofile=None, proto=None, retry_on="503 conn-failure"):
    """The benchmark's HAProxy 2.6: 1 thread, keep-alive to the origin, 2
    retries on what retry_on lists; proto (h2) on the bind and the server."""
    on = f" proto {proto}" if proto else ""
    ulimit = f"\n  ulimit-n {nofile}" if nofile else ""
    return f"""global
  nbthread 1
  maxconn {maxconn}{ulimit}
  no strict-limits

defaults
  mode http
  timeout connect 1s
  timeout client 60s
  timeout server 15s
  timeout http-request 10s
  timeout http-keep-alive 60s
  retries 2
  retry-on {retry_on}
  http-reuse always
  option forwardfor

frontend fe
  bind 127.0.0.1:{port}{on}
  default_backend be

backend be
  server origin 127.0.0.1:{upstream_port}{on}
"""


# ---------------------------------------------------------------- placement

# Where the h2 phase's three busy processes run when BENCH_H2_PLACEMENT pins
# them (run.sh): which of them share a core. Unpinned, the scheduler moves
# them between these arrangements from one round to the next.
PLACEMENTS = ("proxy+origin", "proxy+client", "proxy-alone")


def placement_cpus(name, cpus):
    """(proxy, origin, client) CPU numbers for a placement, on the first two
    of the CPUs this process may use; ValueError for an unknown name or
    fewer than two CPUs."""
    if name not in PLACEMENTS:
        raise ValueError(f"unknown placement {name!r} (one of: {', '.join(PLACEMENTS)})")
    cpus = sorted(cpus)
    if len(cpus) < 2:
        raise ValueError(f"placement {name} needs two CPUs, this process may use {len(cpus)}")
    a, b = cpus[0], cpus[1]
    return {"proxy+origin": (a, a, b), "proxy+client": (a, b, a), "proxy-alone": (a, b, b)}[name]


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("freeports")
    p.add_argument("count", type=int)
    p = sub.add_parser("waitport")
    p.add_argument("port", type=int)
    p.add_argument("--timeout", type=float, default=10)
    p = sub.add_parser("portsfile")
    p.add_argument("path")
    p.add_argument("names", nargs="+")
    p.add_argument("--timeout", type=float, default=10)
    p = sub.add_parser("rss", help="sum of VmRSS (KiB) over the process tree")
    p.add_argument("pid", type=int)
    p = sub.add_parser("tree", help="a pid and its descendants, one a line")
    p.add_argument("pid", type=int)
    p.add_argument("--exclude", type=int, action="append", default=[])
    p = sub.add_parser("placement", help="the proxy's, the origin's and the client's CPU for a placement")
    p.add_argument("name", help=", ".join(PLACEMENTS))
    p = sub.add_parser("onelayer-config", help="print the benchmark's onelayer YAML")
    p.add_argument("--upstream-port", type=int, required=True)
    p.add_argument("--layer", default="bench")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--max-connections", type=int, default=0)
    p.add_argument("--budget-mode", choices=["requests", "successes"], default="requests")
    p.add_argument("--listener-protocols", help="comma list, e.g. http1,h2c (default: not written)")
    p.add_argument("--upstream-protocol", help="e.g. h2c (default: not written)")
    p.add_argument("--single-layer-headers", choices=["on", "off"], default="on",
                   help="off: inner_hops pass, no baggage, no Via (the route still retries)")
    p.add_argument("--access-log", choices=["on", "off"], default="off",
                   help="the listener's access log (default off, like the other proxies')")
    p.add_argument("--reuse", choices=["safe", "always"], help="the upstream's reuse (default: not written)")
    p.add_argument("--fleet-redis", type=int, default=0, metavar="PORT",
                   help="a fleet block on 127.0.0.1:PORT and a scope: fleet budget (default: none)")
    p = sub.add_parser("haproxy-config", help="print the benchmark's HAProxy config")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--upstream-port", type=int, required=True)
    p.add_argument("--maxconn", type=int, required=True)
    p.add_argument("--nofile", type=int)
    p.add_argument("--proto", help="h2: HTTP/2 on the bind and the server line")
    p = sub.add_parser("wrk")
    p.add_argument("--url", required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--round", type=int, default=0)
    p.add_argument("--pid", type=int, default=0, help="proxy root pid (0: none)")
    p.add_argument("--origin-pid", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--raw", help="file for the raw wrk output")
    p.add_argument("--phase", default="throughput", help="the phase the result belongs to")
    p.add_argument("--workers", type=int, default=0, help="onelayer's workers, for the workers phase")
    a = ap.parse_args()

    if a.cmd == "freeports":
        print(" ".join(str(p) for p in free_ports(a.count)))
    elif a.cmd == "waitport":
        return 0 if wait_port(a.port, a.timeout) else 1
    elif a.cmd == "portsfile":
        found = read_ports_file(a.path, a.names, a.timeout)
        if not found:
            return 1
        print(" ".join(str(found[n]) for n in a.names))
    elif a.cmd == "rss":
        print(status_kib(tree_pids(a.pid), "VmRSS"))
    elif a.cmd == "tree":
        skip = set(a.exclude) | {os.getpid()}
        for pid in tree_pids(a.pid):
            if pid not in skip:
                print(pid)
    elif a.cmd == "placement":
        try:
            print(" ".join(str(c) for c in placement_cpus(a.name, os.sched_getaffinity(0))))
        except ValueError as e:
            print(f"bench_util: {e}", file=sys.stderr)
            return 1
    elif a.cmd == "onelayer-config":
        protocols = a.listener_protocols.split(",") if a.listener_protocols else None
        sys.stdout.write(onelayer_config(a.upstream_port, a.layer, a.workers, a.max_connections,
                                         a.budget_mode, protocols, a.upstream_protocol,
                                         access_log=a.access_log == "on",
                                         single_layer_headers=a.single_layer_headers == "on",
                                         reuse=a.reuse, fleet_redis_port=a.fleet_redis))
    elif a.cmd == "haproxy-config":
        sys.stdout.write(haproxy_config(a.port, a.upstream_port, a.maxconn, a.nofile, a.proto))
    elif a.cmd == "wrk":
        return run_wrk(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
