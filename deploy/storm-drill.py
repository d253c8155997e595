#!/usr/bin/env python3
"""Outage drill against a running onelayer, in one command (docs/storm.md).

Starts a timed fault drill on one upstream through onelayer's admin port
(POST /fault: every attempt to the upstream is answered with --status for
--for), samples /metrics every --interval seconds before, during and after
it, ends the drill (DELETE /fault, also on Ctrl-C or an error), and prints
per interval, then for the drill as a whole:

  attempts/req    upstream attempts per downstream request: how many times
                  each call would have reached the upstream (1.00 = no
                  retries). The number that must stay close to one.
  first-fail      share of requests whose first attempt failed
  budget          the upstream's retry budget tokens at the end of the interval
  hidden          hidden retries counted (a hop in between retrying on its own)

and a plot of the same (gnuplot: an SVG file, and a text plot on the
terminal). Traffic is yours: run it while your staging load runs.

    python3 deploy/storm-drill.py --admin 127.0.0.1:9901 --upstream inventory \\
        --status 503 --for 30s [--percent 100] [--route NAME] [--interval 1] \\
        [--before 5] [--after 10] [--out DIR] [--max-ratio 1.1]

--max-ratio R  exit 1 when attempts per request during the drill is above R
               (a check a staging pipeline can run).
Standard library only; the admin port must be reachable from where it runs.
"""

import argparse
import http.client
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_duration(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError("a duration with a unit: 500ms, 30s, 2m")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--admin", default="127.0.0.1:9901", help="onelayer's admin address (host:port)")
    p.add_argument("--upstream", required=True, help="the upstream to take down (its name in the config)")
    p.add_argument("--status", type=int, default=503, help="the injected answer (default 503)")
    p.add_argument("--for", dest="duration", default="30s", help="how long the outage lasts (default 30s)")
    p.add_argument("--percent", type=float, default=100, help="share of attempts that fail (default 100)")
    p.add_argument("--route", help="only this route's requests (default: every route)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples (default 1)")
    p.add_argument("--before", type=float, default=5.0, help="seconds sampled before the drill (default 5)")
    p.add_argument("--after", type=float, default=10.0, help="seconds sampled after it (default 10)")
    p.add_argument("--out", default=".", help="directory for drill.tsv and drill.svg (default .)")
    p.add_argument("--max-ratio", type=float, help="exit 1 if attempts per request in the drill exceed this")
    a = p.parse_args(argv)
    parse_duration(a.duration)
    return a


class Admin:
    def __init__(self, address):
        host, _, port = address.rpartition(":")
        self.host, self.port = host.strip("[]") or "127.0.0.1", int(port)

    def call(self, method, path):
        c = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            c.request(method, path)
            r = c.getresponse()
            return r.status, r.read().decode("utf-8", "replace")
        finally:
            c.close()


def scrape(admin):
    status, text = admin.call("GET", "/metrics")
    if status != 200:
        raise RuntimeError("GET /metrics answered %d" % status)
    out = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and not line.startswith("#"):
            labels = dict((k, v.replace('\\"', '"').replace("\\\\", "\\")) for k, v in LABEL.findall(m.group(2) or ""))
            out.append((m.group(1), labels, float(m.group(3))))
    return out


class Reading:
    """The totals one scrape gives for the drill's upstream (and route)."""

    def __init__(self, samples, upstream, route):
        def total(name, **want):
            return sum(v for n, labels, v in samples if n == name and
                       all(labels.get(k) == w for k, w in want.items()))
        routes = {l.get("route") for n, l, _ in samples
                  if n == "onelayer_upstream_attempts_total" and l.get("upstream") == upstream}
        if route:
            routes &= {route}
        self.requests = sum(total("onelayer_requests_total", route=r) for r in routes)
        self.attempts = sum(total("onelayer_upstream_attempts_total", route=r, upstream=upstream) for r in routes)
        self.first_failures = sum(total("onelayer_attempt_failures_total", route=r, attempt="first") for r in routes)
        self.hidden = total("onelayer_hidden_retries_total")
        self.faults = sum(total("onelayer_faults_injected_total", route=r, kind="abort") for r in routes)
        self.budget = total("onelayer_retry_budget_tokens", upstream=upstream)
        self.routes = routes


def ratio(a, b):
    return a / b if b else None


def fmt(v, digits=2, pct=False):
    if v is None:
        return "-"
    return ("%.1f%%" % (v * 100)) if pct else ("%.*f" % (digits, v))


def row(t, phase, prev, cur):
    req = cur.requests - prev.requests
    return {"t": t, "phase": phase, "requests": req, "attempts": cur.attempts - prev.attempts,
            "ratio": ratio(cur.attempts - prev.attempts, req),
            "first_fail": ratio(cur.first_failures - prev.first_failures, req),
            "budget": cur.budget, "hidden": cur.hidden - prev.hidden, "faults": cur.faults - prev.faults}


HEADER = "%7s %-7s %9s %9s %13s %10s %8s %7s %7s" % (
    "t(s)", "phase", "requests", "attempts", "attempts/req", "first-fail", "budget", "hidden", "faults")


def show(r):
    print("%7.1f %-7s %9d %9d %13s %10s %8s %7d %7d" % (
        r["t"], r["phase"], r["requests"], r["attempts"], fmt(r["ratio"]), fmt(r["first_fail"], pct=True),
        fmt(r["budget"], 1), r["hidden"], r["faults"]), flush=True)


def plot(rows, out_dir, drill_s):
    tsv = os.path.join(out_dir, "drill.tsv")
    with open(tsv, "w") as f:
        f.write("# t_s\tphase\trequests\tattempts\tattempts_per_request\tfirst_attempt_failure_rate\t"
                "budget_tokens\thidden_retries\n")
        for r in rows:
            f.write("%.1f\t%s\t%d\t%d\t%s\t%s\t%.3f\t%d\n" % (
                r["t"], r["phase"], r["requests"], r["attempts"], fmt(r["ratio"], 4).replace("-", "NaN"),
                fmt(r["first_fail"], 4).replace("-", "NaN"), r["budget"], r["hidden"]))
    if not shutil.which("gnuplot"):
        print("\n(gnuplot not found: %s has the numbers, no plot)" % tsv)
        return tsv, None
    body = ("set datafile missing 'NaN'\nset xlabel 'seconds from drill start'\nset grid\n"
            "set object 1 rect from 0, graph 0 to %g, graph 1 fillcolor rgb '#f4d6d6' fillstyle solid 1.0 "
            "noborder behind\nset y2tics\nset ytics nomirror\nset key below\n"
            "plot 'drill.tsv' using 1:5 with steps lw 2 title 'attempts per request', "
            "'' using 1:6 with steps lw 2 title 'first-attempt failure rate', "
            "'' using 1:7 axes x1y2 with steps dt 2 title 'budget tokens (right)', "
            "'' using 1:8 axes x1y2 with impulses title 'hidden retries (right)'\n" % drill_s)
    svg = os.path.join(out_dir, "drill.svg")
    subprocess.run(["gnuplot"], input="set terminal svg size 900,420\nset output 'drill.svg'\n" + body,
                   text=True, cwd=out_dir, capture_output=True, timeout=60)
    dumb = subprocess.run(["gnuplot"], input="set terminal dumb size 100,24\n" + body.replace(
        "set object 1 rect", "# set object 1 rect"), text=True, cwd=out_dir, capture_output=True, timeout=60)
    print(dumb.stdout)
    return tsv, svg if os.path.exists(svg) else None


def main(argv):
    a = parse_args(argv)
    admin = Admin(a.admin)
    drill_s = parse_duration(a.duration)
    os.makedirs(a.out, exist_ok=True)
    first = Reading(scrape(admin), a.upstream, a.route)
    if not first.routes:
        print("storm-drill: no route sends to upstream %r%s" % (
            a.upstream, " as route %r" % a.route if a.route else ""), file=sys.stderr)
        return 2
    print("drill: upstream %s answers %d to %g%% of attempts for %s; routes %s" % (
        a.upstream, a.status, a.percent, a.duration, ", ".join(sorted(first.routes))))
    print(HEADER)
    rows = []
    started = False
    prev = first
    drill_start = drill_end = None
    begin = time.monotonic()
    t0 = begin + a.before  # re-anchored when the drill really starts
    k = 0
    try:
        while True:
            if not started and time.monotonic() >= t0 - a.interval / 2:
                q = urllib.parse.urlencode({"upstream": a.upstream, "status": a.status,
                                            "for": a.duration, "percent": a.percent})
                status, body = admin.call("POST", "/fault?" + q)
                if status != 200:
                    print("storm-drill: POST /fault answered %d: %s" % (status, body.strip()), file=sys.stderr)
                    return 2
                started, t0 = True, time.monotonic()
                drill_start = prev
            if started and time.monotonic() >= t0 + drill_s + a.after:
                break
            k += 1
            time.sleep(max(0.0, begin + k * a.interval - time.monotonic()))
            cur = Reading(scrape(admin), a.upstream, a.route)
            t = time.monotonic() - t0
            phase = "before" if not started else ("drill" if t <= drill_s + a.interval / 2 else "after")
            if phase == "drill":
                drill_end = cur
            r = row(t, phase, prev, cur)
            rows.append(r)
            show(r)
            prev = cur
    except KeyboardInterrupt:
        print("\nstorm-drill: interrupted")
    finally:
        if started:
            admin.call("DELETE", "/fault")
    drill_end = drill_end or prev
    summary = None
    if drill_start is not None:
        req = drill_end.requests - drill_start.requests
        summary = ratio(drill_end.attempts - drill_start.attempts, req)
        print("\nduring the drill: %d requests, %d attempts: %s attempts per request; first-attempt failure "
              "rate %s; %d faults injected; %d hidden retries; budget %s tokens at the end" % (
                  req, drill_end.attempts - drill_start.attempts, fmt(summary),
                  fmt(ratio(drill_end.first_failures - drill_start.first_failures, req), pct=True),
                  drill_end.faults - drill_start.faults, drill_end.hidden - drill_start.hidden,
                  fmt(drill_end.budget, 1)))
    tsv, svg = plot(rows, a.out, drill_s)
    print("wrote %s%s" % (tsv, " and " + svg if svg else ""))
    if a.max_ratio is not None and summary is not None and summary > a.max_ratio:
        print("storm-drill: %.2f attempts per request during the drill is above --max-ratio %g" % (
            summary, a.max_ratio), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
