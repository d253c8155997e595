#!/usr/bin/env python3
"""One dead endpoint among two, measured: N requests at
concurrency C through a proxy whose upstream has a healthy origin and a
dead endpoint: a port that refuses connections (`refuse`), a listener whose
accept queue is full so SYNs are dropped (`blackhole`), or a listener that
accepts and resets every connection at once (`reset`: each attempt there is
one accepted connection, so the extra attempts of HAProxy and NGINX can be
counted from outside too).

  endpoint_health.py --proxy onelayer [--breaker] [--dead refuse|blackhole|reset]
  endpoint_health.py --proxy haproxy   (option redispatch, observe layer4)
  endpoint_health.py --proxy nginx     (max_fails / fail_timeout, proxy_next_upstream)
  endpoint_health.py --compare [--dead ...]   all three in one run, a table

Prints one JSON object per proxy: requests, errors (non-2xx or no answer),
error rate, the same after the first second, extra attempts per request
(onelayer: from /metrics; with `reset`, for every proxy: connections the dead
endpoint accepted), the same after the first second, p50/p99 latency.
--compare also prints a table and checks the targets: at most 0.5% errors
and at most 0.05 extra attempts per request after the first second, and
onelayer no worse than either peer on both after the first second (the
first second is when every proxy finds out which endpoint is dead). 127.0.0.1 only; bounded by
--requests.
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import struct
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import harness as h  # noqa: E402
sys.path.insert(0, HERE)
from bench_util import metric_sum  # noqa: E402


class ResettingEndpoint:
    """A 127.0.0.1 listener that accepts each connection and resets it at
    once; it keeps the time of every accept."""

    def __init__(self):
        self.accepts = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self._sock.settimeout(0.1)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                c, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.accepts.append(time.monotonic())
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()

    def close(self):
        self._stop.set()
        self._thread.join(2)
        self._sock.close()


def dead_endpoint(kind):
    """(port, things to close, ResettingEndpoint or None)."""
    if kind == "blackhole":
        port, keep = h.black_hole_port()
        return port, keep, None
    if kind == "reset":
        r = ResettingEndpoint()
        return r.port, [r], r
    port, sock = h.closed_port()
    return port, [sock], None


def count_dead_attempts(out, resetter, t_begin):
    """With a resetting dead endpoint: its accepted connections are the
    attempts every proxy sent it."""
    if resetter is None:
        return
    n = out["requests"]
    late = [t for t in resetter.accepts if t - t_begin >= 1.0]
    out["dead_attempts"] = len(resetter.accepts)
    out["extra_attempts_per_request"] = round(len(resetter.accepts) / max(1, n), 4)
    out["extra_attempts_per_request_after_1s"] = round(len(late) / max(1, out["requests_after_1s"]), 4)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_load(port, total, concurrency):
    return h.concurrent_gets(port, total, concurrency, host="bench")


def summarize(results, t_begin):
    lat = sorted(r[2] for r in results)
    errors = sum(1 for r in results if not 200 <= r[1] < 300)
    late = [r for r in results if r[0] - t_begin >= 1.0]
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else 0.0
    return {
        "requests": len(results),
        "errors": errors,
        "error_rate": errors / max(1, len(results)),
        "errors_after_1s": sum(1 for r in late if not 200 <= r[1] < 300),
        "requests_after_1s": len(late),
        "p50_ms": round(pct(0.50), 2),
        "p99_ms": round(pct(0.99), 2),
    }


def run_onelayer(args, origin, dead, resetter):
    upstream = {"name": "origin", "endpoints": [origin.endpoint, "127.0.0.1:%d" % dead],
                "connect_timeout": args.connect_timeout}
    if args.breaker:
        upstream["circuit_breaker"] = {"consecutive_failures": 5, "open_for": "10s"}
    if args.balance:
        upstream["balance"] = args.balance
    cfg = h.simple_config(endpoints=upstream["endpoints"], upstream=upstream,
                          retry={"max_attempts": 3, "backoff": {"base": "5ms", "cap": "20ms"}},
                          timeout="5s")
    proxy = h.Proxy(cfg, log_level="warn")
    proxy.start()
    try:
        t_begin = time.monotonic()
        results = run_load(proxy.port(), args.requests, args.concurrency)
        text = proxy.admin_get("/metrics").body.decode()
        out = summarize(results, t_begin)
        attempts = metric_sum(text, "onelayer_upstream_attempts_total")
        out["attempts"] = attempts
        out["extra_attempts_per_request"] = round((attempts - len(results)) / max(1, len(results)), 4)
        out["retries"] = metric_sum(text, "onelayer_retries_total")
        out["budget_exhausted"] = metric_sum(text, "onelayer_retries_declined_total",
                                             reason="budget_exhausted")
        out["circuit_open"] = metric_sum(text, "onelayer_retries_declined_total", reason="circuit_open")
        out["ejections"] = metric_sum(text, "onelayer_endpoint_ejections_total")
        count_dead_attempts(out, resetter, t_begin)
        return out
    finally:
        proxy.stop(expect_code=None)
        proxy.cleanup()


HAPROXY_CFG = """global
  maxconn 4096
defaults
  mode http
  timeout connect {connect_ms}ms
  timeout client 30s
  timeout server 30s
  retries 2
  option redispatch 1
frontend fe
  bind 127.0.0.1:{port}
  default_backend be
backend be
  balance roundrobin
  default-server check observe layer4 error-limit 5 on-error mark-down inter 2s
  server healthy {healthy}
  server dead {dead}
"""

NGINX_CFG = """worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  upstream be {{
    server {healthy} max_fails=1 fail_timeout=10s;
    server {dead} max_fails=1 fail_timeout=10s;
    keepalive 32;
  }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://be;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_connect_timeout {connect_ms}ms;
      proxy_next_upstream error timeout http_502 http_503 http_504;
      proxy_next_upstream_tries 3;
    }}
  }}
}}
"""


def run_peer(args, origin, dead, resetter):
    exe = shutil.which(args.proxy) or "/usr/sbin/" + args.proxy
    tmp = tempfile.mkdtemp(prefix="ep-health-")
    port = free_port()
    connect_ms = int(float(re.sub(r"ms$", "", args.connect_timeout))) if args.connect_timeout.endswith(
        "ms") else int(float(args.connect_timeout.rstrip("s")) * 1000)
    fields = {"port": port, "healthy": origin.endpoint, "dead": "127.0.0.1:%d" % dead,
              "connect_ms": connect_ms, "dir": tmp}
    path = os.path.join(tmp, args.proxy + ".conf")
    with open(path, "w") as f:
        f.write((HAPROXY_CFG if args.proxy == "haproxy" else NGINX_CFG).format(**fields))
    cmd = [exe, "-f", path, "-db"] if args.proxy == "haproxy" else [exe, "-c", path, "-g", "daemon off;",
                                                                    "-p", tmp]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        before = origin.count()
        t_begin = time.monotonic()
        results = run_load(port, args.requests, args.concurrency)
        out = summarize(results, t_begin)
        # The dead endpoint never answers, so the origin's arrivals are the
        # successful attempts; extra attempts are not visible from outside.
        out["healthy_arrivals"] = origin.count() - before
        count_dead_attempts(out, resetter, t_begin)
        return out
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def run_one(args, proxy):
    origin = h.Origin(default=h.respond(200, body=b"ok"))
    dead, keep, resetter = dead_endpoint(args.dead)
    try:
        run = run_onelayer if proxy == "onelayer" else run_peer
        args.proxy = proxy
        out = run(args, origin, dead, resetter)
    finally:
        origin.stop()
        for s in keep:
            s.close()
    out.update({"proxy": proxy, "dead": args.dead, "breaker": args.breaker,
                "concurrency": args.concurrency})
    return out


def compare(args):
    """All three proxies in one run; a table; the targets checked."""
    rows = [run_one(args, p) for p in ("onelayer", "haproxy", "nginx")]
    print("| proxy | requests | errors | error rate | errors after 1 s | extra attempts/request "
          "| after 1 s | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| %s | %d | %d | %.2f%% | %d | %s | %s | %.2f | %.2f |" % (
            r["proxy"], r["requests"], r["errors"], 100 * r["error_rate"], r["errors_after_1s"],
            r.get("extra_attempts_per_request", "not visible"),
            r.get("extra_attempts_per_request_after_1s", "not visible"), r["p50_ms"], r["p99_ms"]))
    ol, peers = rows[0], rows[1:]
    late_rate = lambda r: r["errors_after_1s"] / max(1, r["requests_after_1s"])
    if ol["requests_after_1s"] == 0:
        print("\nthe run ended within its first second: raise --requests")
        return 2
    checks = [("errors after 1 s <= 0.5%", late_rate(ol) <= 0.005)]
    if "extra_attempts_per_request_after_1s" in ol:
        checks.append(("extra attempts/request after 1 s <= 0.05",
                       ol["extra_attempts_per_request_after_1s"] <= 0.05))
    for p in peers:
        checks.append(("error rate after 1 s <= %s's" % p["proxy"], late_rate(ol) <= late_rate(p)))
        if "extra_attempts_per_request_after_1s" in p:
            checks.append(("extra attempts/request after 1 s <= %s's" % p["proxy"],
                           ol["extra_attempts_per_request_after_1s"] <= p["extra_attempts_per_request_after_1s"]))
    print()
    for name, ok in checks:
        print("- %s: %s" % (name, "met" if ok else "NOT met"))
    print(json.dumps(rows, sort_keys=True))
    return 0 if all(ok for _, ok in checks) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--proxy", default="onelayer", choices=["onelayer", "haproxy", "nginx"])
    ap.add_argument("--compare", action="store_true", help="run all three proxies, print a table")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--breaker", action="store_true", help="onelayer: add a circuit breaker")
    ap.add_argument("--balance", default=None, help="onelayer: p2c or round_robin")
    ap.add_argument("--dead", default="refuse", choices=["refuse", "blackhole", "reset"])
    ap.add_argument("--connect-timeout", default="250ms")
    args = ap.parse_args()
    if args.compare:
        return compare(args)
    print(json.dumps(run_one(args, args.proxy), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
