#!/usr/bin/env python3
"""Turn results.jsonl from tests/bench/run.sh into latest.md, latest.json and
SVG plots (gnuplot). Standard library only; gnuplot is optional."""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys

# onelayer-successes: onelayer with retry_budget.mode successes (storm phase only).
# onelayer-plain: onelayer without the single-layer headers (h2 phase only).
# onelayer-other: another onelayer build on onelayer's config (h2 phase only,
# BENCH_H2_OTHER_BIN); its label comes from the run's settings.
ORDER = ["direct", "onelayer", "onelayer-plain", "onelayer-other", "onelayer-successes", "haproxy", "nginx",
         "nghttpx"]
LABEL = {"direct": "direct (no proxy)", "onelayer": "onelayer",
         "onelayer-plain": "onelayer without single-layer headers",
         "onelayer-other": "onelayer, other build",
         "onelayer-successes": "onelayer (budget: successes)",
         "haproxy": "HAProxy", "nginx": "NGINX", "nghttpx": "nghttpx"}
NAME = {"direct": "direct", "onelayer": "onelayer", "onelayer-plain": "onelayer without single-layer headers",
        "onelayer-other": "onelayer, other build",
        "onelayer-successes": "onelayer, successes budget",
        "haproxy": "HAProxy", "nginx": "NGINX", "nghttpx": "nghttpx"}


# ---------------------------------------------------------------- helpers

def first_line(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "not found"
    text = (p.stdout + p.stderr).strip().splitlines()
    return text[0].strip() if text else "?"


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            mem = f.readline().split()[1]
        mem = f"{int(mem) / 1024 / 1024:.1f} GiB"
    except OSError:
        mem = "?"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "uname": first_line(["uname", "-a"]),
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "memory": mem,
        "loadavg_end": " ".join(open("/proc/loadavg").read().split()[:3]),
        "tools": {
            "nginx": first_line(["nginx", "-v"]),
            "haproxy": first_line(["haproxy", "-v"]),
            "wrk": first_line(["wrk", "-v"]),
            "python": platform.python_version(),
            "gnuplot": first_line(["gnuplot", "--version"]),
            "nghttpx": first_line(["nghttpx", "--version"]),
            "h2load": first_line(["h2load", "--version"]),
        },
    }


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=2, unit=""):
    if v is None:
        return "n/a"
    if isinstance(v, float) and abs(v) >= 1000:
        return f"{v:,.0f}{unit}"
    return f"{v:.{digits}f}{unit}"


def ratio(a, b):
    return a / b if (a is not None and b) else None


def kib(v):
    return "n/a" if v is None else f"{v / 1024:.1f} MiB" if v >= 1024 else f"{v} KiB"


def targets_in(rows):
    present = {r["target"] for r in rows}
    return [t for t in ORDER if t in present]


# ---------------------------------------------------------------- sections

def throughput(rows, settings):
    ts = targets_in(rows)
    summary = {}
    for t in ts:
        rs = [r for r in rows if r["target"] == t]
        summary[t] = {k: med([r.get(k) for r in rs]) for k in
                      ("rps", "p50_ms", "p99_ms", "cpu_s_per_100k", "origin_cpu_s_per_100k",
                       "user_us_per_req", "kernel_us_per_req", "tcp_segments_per_req")}
        summary[t]["errors"] = sum((r.get("socket_errors") or 0) + (r.get("non2xx") or 0) for r in rs)
        summary[t]["rounds"] = len(rs)
        summary[t]["rps_all"] = [r.get("rps") for r in sorted(rs, key=lambda r: r["round"])]
    out = [f"## Small body throughput\n",
           f"`wrk -t2 -c64 -d{settings.get('duration_s')}s --latency`, GET of a 100-byte file, "
           f"keep-alive; rounds interleaved (direct, onelayer, HAProxy, NGINX, then again), "
           f"**medians over {settings.get('rounds')} rounds**. CPU is user+system time of all the "
           f"proxy's processes and threads (from `/proc/<pid>/stat`) over the run, per 100k requests.\n",
           "| path | req/s | p50 | p99 | proxy CPU s / 100k req | origin CPU s / 100k req | errors | req/s per round |",
           "|---|---:|---:|---:|---:|---:|---:|---|"]
    for t in ts:
        s = summary[t]
        out.append(f"| {LABEL[t]} | {fmt(s['rps'], 0)} | {fmt(s['p50_ms'])} ms | {fmt(s['p99_ms'])} ms | "
                   f"{fmt(s['cpu_s_per_100k']) if t != 'direct' else '-'} | {fmt(s['origin_cpu_s_per_100k'])} | "
                   f"{s['errors']} | {', '.join(fmt(v, 0) for v in s['rps_all'])} |")
    proxies = [t for t in ts if t != "direct"]
    if proxies:
        out += ["", "Where a proxy's CPU goes, per request (medians): user space is the proxy's own code; "
                "kernel time is mostly its socket calls' TCP work over loopback. TCP segments are counted "
                "machine-wide (`/proc/net/snmp` OutSegs): 4 per request is the floor for a proxied keep-alive "
                "exchange (direct: 2).", "",
                "| path | user µs / req | kernel µs / req | TCP segments / req |", "|---|---:|---:|---:|"]
        for t in ts:
            s = summary[t]
            out.append(f"| {LABEL[t]} | {fmt(s['user_us_per_req']) if t != 'direct' else '-'} | "
                       f"{fmt(s['kernel_us_per_req']) if t != 'direct' else '-'} | "
                       f"{fmt(s['tcp_segments_per_req'])} |")
    if "onelayer" in summary:
        o = summary["onelayer"]
        others = [t for t in ("haproxy", "nginx", "direct") if t in summary]
        out += ["", "Ratios, onelayer / other (req/s: higher is better; latency and CPU: lower is better):", "",
                "| figure | " + " | ".join(f"onelayer / {NAME[t]}" for t in others) + " |",
                "|---|" + "---:|" * len(others)]
        for key, label in (("rps", "req/s"), ("p50_ms", "p50"), ("p99_ms", "p99"),
                           ("cpu_s_per_100k", "CPU per request")):
            cells = []
            for t in others:
                if key == "cpu_s_per_100k" and t == "direct":
                    cells.append("-")
                else:
                    cells.append(fmt(ratio(o[key], summary[t][key]), 2, "x"))
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        # Ratios within each round (targets run back to back) show how much drift remains.
        cells = []
        for t in others:
            per = [ratio(a, b) for a, b in zip(o["rps_all"], summary[t]["rps_all"])]
            cells.append(", ".join(fmt(v, 2) for v in per))
        out.append("| req/s, round by round | " + " | ".join(cells) + " |")
    spreads = [(max(s["rps_all"]) - min(s["rps_all"])) / s["rps"] for s in summary.values()
               if s["rps"] and len(s["rps_all"]) > 1 and None not in s["rps_all"]]
    if spreads and max(spreads) > 0.15:
        out += ["", f"**Noisy run**: req/s varied by up to {max(spreads):.0%} of the median between "
                "rounds (other load on the machine); ratios are uncertain by about as much. "
                "Rerun on a quiet machine or with more rounds (`BENCH_ROUNDS`)."]
    out += ["", "![throughput](throughput.svg) ![latency](latency.svg)", ""]
    return out, summary


def memory_rows(out, rows):
    """The rows of a memory table (the last result of each target) after its
    heading lines in out; a target that could not be measured says why."""
    summary = {}
    for t in targets_in(rows):
        r = [x for x in rows if x["target"] == t][-1]
        summary[t] = r
        if "unavailable" in r:
            out.append(f"| {LABEL[t]} | not available: {r['unavailable']} | | | |")
            continue
        per = r.get("bytes_per_conn")
        out.append(f"| {LABEL[t]} | {kib(r['rss_start_kib'])} | {kib(r['rss_with_kib'])} | "
                   f"{'n/a' if per is None else f'{per:,.0f} B'} | {r['alive']} of {r['n']} |")
    return out + [""], summary


def memory(rows, settings):
    out = ["## Memory per idle keep-alive connection\n",
           f"RSS (sum over the proxy's processes) before any traffic, and with "
           f"{settings.get('idle_conns')} downstream keep-alive connections that each made one "
           f"request and then stay idle; per connection = (RSS with - RSS at start) / connections.\n",
           "| proxy | RSS at start | RSS with idle connections | per connection | connections held |",
           "|---|---:|---:|---:|---:|"]
    return memory_rows(out, rows)


def large(rows, settings):
    sizes = [s for s in ("1m", "100m") if any(r["size"] == s for r in rows)]
    names = {"1m": "1 MiB", "100m": "100 MiB"}
    out = ["## Large bodies\n",
           "One keep-alive connection fetching the body repeatedly (1 MiB x 200, 100 MiB x 5; "
           "quick mode 1 MiB x 20), MB/s = 10^6 bytes per second of transfer time. Peak RSS is the "
           "proxy's VmHWM (reset to the current RSS before each size through /proc/<pid>/clear_refs), summed over "
           "its processes; in brackets, how far it rose above the RSS before the transfers.\n",
           "| path | " + " | ".join(f"{names[s]} MB/s | {names[s]} peak RSS" for s in sizes) + " |",
           "|---|" + "---:|---:|" * len(sizes)]
    for t in targets_in(rows):
        cells = []
        for s in sizes:
            r = next((x for x in rows if x["target"] == t and x["size"] == s), None)
            if r is None:
                cells += ["n/a", "n/a"]
                continue
            bad = "" if r["statuses"] == [200] else f" (status {r['statuses']})"
            if t == "direct" or r.get("peak_rss_kib") is None:
                peak = "-"
            else:
                grew = r["peak_rss_kib"] - (r.get("rss_before_kib") or 0)
                peak = f"{kib(r['peak_rss_kib'])} (+{kib(grew)})"
            cells += [fmt(r["mb_s"], 0) + bad, peak]
        out.append(f"| {LABEL[t]} | " + " | ".join(cells) + " |")
    return out + [""], {}


def storm(rows, settings):
    out = ["## Retry storm\n",
           f"{settings.get('storm_clients')} clients, each sending GET every 100 ms on a keep-alive "
           f"connection (5 s per-request timeout); the origin answers 503 to everything for "
           f"{settings.get('outage_s')} s, then 200. Depth 3 = three proxies of the same kind stacked "
           "(client -> proxy -> proxy -> proxy -> origin). *Arrivals per request* = origin arrivals "
           "during the outage / downstream requests sent during the outage. *Recovery* = time from "
           "the origin's recovery to the first 100 ms bucket from which >= 99% of downstream answers "
           "are 200 for the rest of the run. onelayer runs twice: with the default budget "
           "(`mode: requests`, ratio 0.1 + 5/s) and with `mode: successes` (same ratio and floor: a "
           "bucket of 50 tokens paid by successful attempts).\n",
           "| proxy | depth | downstream requests (outage) | origin arrivals (outage) | arrivals per request | "
           "2xx during outage | client errors/timeouts | recovery |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    summary = {}
    for t in targets_in(rows):
        for r in sorted((x for x in rows if x["target"] == t), key=lambda x: x["depth"]):
            summary[(t, r["depth"])] = r
            rec = r.get("recover_s")
            out.append(f"| {LABEL[t]} | {r['depth']} | {r['downstream_outage']} | {r['arrivals_outage']} | "
                       f"**{fmt(r['arrivals_per_request'])}** | {r['downstream_ok_outage']} | "
                       f"{r['downstream_errors']} | {'not within the run' if rec is None else fmt(rec, 1) + ' s'} |")
    out += ["", "![retry storm timeline](storm.svg)", ""]
    return out, summary


def workers(rows, settings):
    """onelayer with workers: 1 against workers: 2, same cores, interleaved."""
    summary = {}
    for w in (1, 2):
        rs = [r for r in rows if r.get("workers") == w]
        if not rs:
            continue
        s = {k: med([r.get(k) for r in rs]) for k in ("rps", "p99_ms", "cpu_s_per_100k")}
        # Share of the proxy's CPU taken by its busiest and second-busiest thread.
        for i, key in ((0, "share1"), (1, "share2")):
            s[key] = med([r["thread_ticks"][i] / sum(r["thread_ticks"])
                          for r in rs if len(r.get("thread_ticks") or []) > i and sum(r["thread_ticks"])])
        summary[w] = s
    if set(summary) != {1, 2}:
        return [], {}
    one, two = summary[1], summary[2]
    cpu1 = one["cpu_s_per_100k"]
    cpu2 = two["cpu_s_per_100k"]
    rps_ratio = ratio(two["rps"], one["rps"])
    # Both workers must carry load for two cores' worth of capacity to exist.
    spread = two["share2"] is not None and two["share2"] >= 0.3
    capacity = 2 * cpu1 / cpu2 if (cpu1 and cpu2 and spread) else None
    out = ["## workers: 2\n",
           f"onelayer with `workers: 1` and with `workers: 2`, {settings.get('rounds')} interleaved rounds of the "
           "small-body test (medians). wrk and the origin share the same 2 cores, so req/s cannot show "
           "what a second core gives the proxy. The capacity estimate below does: 2 × (CPU per request "
           "with 1 worker) ÷ (CPU per request with 2 workers). That is the req/s two workers would "
           "serve on 2 cores of their own, relative to one worker on one core, given the CPU each "
           "request costs them. It counts only when both worker threads took a real share of the "
           "load (≥ 30% each).\n",
           "| onelayer | req/s | p99 | CPU µs / req | busiest thread's share of the CPU | second busiest |",
           "|---|---:|---:|---:|---:|---:|"]
    for w in (1, 2):
        s = summary[w]
        pct = (lambda v: "n/a" if v is None else f"{v:.0%}")
        out.append(f"| `workers: {w}` | {fmt(s['rps'], 0)} | {fmt(s['p99_ms'])} ms | "
                   f"{fmt(s['cpu_s_per_100k'] * 10 if s['cpu_s_per_100k'] else None)} | "
                   f"{pct(s['share1'])} | {pct(s['share2'])} |")
    out += ["", f"- req/s, `workers: 2` / `workers: 1`, on these shared cores: **{fmt(rps_ratio, 2, 'x')}**",
            f"- capacity estimate for 2 cores of its own: **{fmt(capacity, 2, 'x')}**"
            + ("" if spread else " (not computed: the second worker took under 30% of the CPU)"), ""]
    return out, {"rps_ratio": rps_ratio, "capacity": capacity}


# The kernel's part of each process's CPU, and the proxy's sleeps (h2_tools).
H2_KERNEL_KEYS = ("proxy_sys_us_per_req", "origin_sys_us_per_req", "client_sys_us_per_req",
                  "proxy_sleeps_per_1k_req", "wakeup_interrupts_per_1k_req")


def h2_summary(rows):
    """Medians by target of the h2 phase's runs; a target with only an
    "unavailable" row gets {"unavailable": reason}."""
    summary = {}
    for t in targets_in(rows):
        rs = [r for r in rows if r["target"] == t and "unavailable" not in r]
        if not rs:
            summary[t] = {"unavailable": next(r["unavailable"] for r in rows if r["target"] == t)}
            continue
        s = {k: med([r.get(k) for r in rs]) for k in
             ("rps", "mean_ms", "max_ms", "proxy_cpu_us_per_req", "origin_cpu_us_per_req",
              "client_cpu_us_per_req") + H2_KERNEL_KEYS}
        s["errors"] = sum((r.get("failed") or 0) + (r.get("errored") or 0) + (r.get("timeout") or 0)
                          + (r.get("non2xx") or 0) for r in rs)
        s["rps_all"] = [r.get("rps") for r in sorted(rs, key=lambda r: r["round"])]
        summary[t] = s
    return summary


H2_PEERS = ("haproxy", "nghttpx", "nginx")


def round_ratios(a_all, b_all):
    """req/s of one path over another's, round by round (rounds missing on
    either side are left out)."""
    return [ratio(a, b) for a, b in zip(a_all, b_all) if ratio(a, b) is not None]


def pooled_h2_ratios(runs, target="onelayer"):
    """For several runs' h2 rows (one list of rows per run): `target`'s req/s
    over each peer's, per run (the ratio of medians and the median of the
    round-by-round ratios) and over every round of every run pooled. A round
    pairs two paths that ran seconds apart, so its ratio is less exposed to
    a drifting host than the two medians are. {peer: {"runs": [(ratio of
    medians, median of round ratios)], "rounds": n, "pooled": median}}."""
    out = {}
    for rows in runs:
        summary = h2_summary(rows)
        mine = summary.get(target, {})
        if mine.get("rps") is None:
            continue
        for peer in H2_PEERS:
            theirs = summary.get(peer, {})
            if theirs.get("rps") is None:
                continue
            rr = round_ratios(mine["rps_all"], theirs["rps_all"])
            entry = out.setdefault(peer, {"runs": [], "all": []})
            entry["runs"].append((ratio(mine["rps"], theirs["rps"]), med(rr)))
            entry["all"] += rr
    return {peer: {"runs": e["runs"], "rounds": len(e["all"]), "pooled": med(e["all"])}
            for peer, e in out.items()}


def h2_placement_lines(settings):
    """What BENCH_H2_PLACEMENT pinned, if anything (a paragraph of the h2 section)."""
    name = settings.get("h2_placement")
    if not name:
        return []
    proxy, origin, client = (settings.get("h2_placement_cpus") or "? ? ?").split()
    return [f"**Pinned: `BENCH_H2_PLACEMENT={name}`.** Every proxy's threads ran on CPU {proxy}, "
            f"the origin's on CPU {origin} and h2load on CPU {client}, in every round (unpinned, the "
            "scheduler moves the three between these arrangements from round to round).\n"]


def h2(rows, settings):
    if settings.get("h2_other_label"):
        LABEL["onelayer-other"] = NAME["onelayer-other"] = f"onelayer, {settings['h2_other_label']}"
    summary = h2_summary(rows)
    out = ["## HTTP/2 (h2c) throughput\n",
           f"`h2load -c{settings.get('h2_connections')} -m{settings.get('h2_streams')} "
           f"-n {settings.get('h2_requests')} -d body`: {settings.get('h2_connections')} connections x "
           f"{settings.get('h2_streams')} concurrent streams of 64-byte POSTs, cleartext HTTP/2 with prior "
           "knowledge on both sides of every proxy, to one NGINX h2c origin answering `ok`; each proxy with "
           "1 worker/thread. Rounds interleaved, a fixed number of requests per run, "
           f"**medians over {settings.get('h2_rounds')} rounds**. CPU is user+system time of the proxy's "
           "(and the origin's) processes over the run, per request answered; the load generator's is "
           "h2load's own, from its resource usage.\n",
           *h2_placement_lines(settings),
           "| path | req/s | mean time per request | proxy CPU µs / req | origin CPU µs / req | "
           "load generator CPU µs / req | errors | req/s per round |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for t, s in summary.items():
        if "unavailable" in s:
            out.append(f"| {LABEL[t]} | not available: {s['unavailable']} | | | | | | |")
            continue
        out.append(f"| {LABEL[t]} | {fmt(s['rps'], 0)} | {fmt(s['mean_ms'])} ms | "
                   f"{fmt(s['proxy_cpu_us_per_req']) if t != 'direct' else '-'} | "
                   f"{fmt(s['origin_cpu_us_per_req'])} | {fmt(s.get('client_cpu_us_per_req'))} | {s['errors']} | "
                   f"{', '.join(fmt(v, 0) for v in s['rps_all'])} |")
    o = summary.get("onelayer", {})
    other = summary.get("onelayer-other", {})  # BENCH_H2_OTHER_BIN's build
    peers = [t for t in H2_PEERS if t in summary and "unavailable" not in summary[t]]
    if peers and "onelayer" in summary:
        out += ["", "Ratios, onelayer / other (req/s: higher is better; CPU: lower is better):", "",
                "| figure | " + " | ".join(f"onelayer / {NAME[t]}" for t in peers) + " |",
                "|---|" + "---:|" * len(peers)]
        if "unavailable" in o:
            out.append("| req/s | " + " | ".join("n/a" for _ in peers) + " |")
        else:
            for key, label in (("rps", "req/s"), ("proxy_cpu_us_per_req", "CPU per request")):
                out.append(f"| {label} | " + " | ".join(fmt(ratio(o[key], summary[t][key]), 2, "x")
                                                      for t in peers) + " |")
            out.append("| req/s, round by round | " + " | ".join(
                ", ".join(fmt(ratio(a, b), 2) for a, b in zip(o["rps_all"], summary[t]["rps_all"]))
                for t in peers) + " |")
            out.append("| req/s, median of the round-by-round ratios | " + " | ".join(
                fmt(med(round_ratios(o["rps_all"], summary[t]["rps_all"])), 3) for t in peers) + " |")
            plain = summary.get("onelayer-plain", {})
            if plain.get("rps") is not None:
                # Not a target: the same proxy minus the headers that tell
                # inner hops about its retries, to show what they cost.
                out.append("| req/s without single-layer headers (not a target) | " + " | ".join(
                    fmt(ratio(plain["rps"], summary[t]["rps"]), 2, "x") for t in peers) + " |")
            if other.get("rps") is not None:
                out.append(f"| req/s of {NAME['onelayer-other']} (not a target) | " + " | ".join(
                    fmt(ratio(other["rps"], summary[t]["rps"]), 2, "x") for t in peers) + " |")
    out += h2_cpu_budget(summary, peers)
    out += h2_kernel_table(summary)
    if other.get("rps") is not None and o.get("rps") is not None:
        # The two builds side by side, round by round: each pair ran minutes
        # apart at most, so a round's ratio is less exposed to drift.
        out += ["", f"{NAME['onelayer-other']} / onelayer: req/s {fmt(ratio(other['rps'], o['rps']), 2, 'x')} "
                f"(rounds {', '.join(fmt(ratio(a, b), 2) for a, b in zip(other['rps_all'], o['rps_all']))}), "
                f"proxy CPU per request "
                f"{fmt(ratio(other['proxy_cpu_us_per_req'], o['proxy_cpu_us_per_req']), 2, 'x')}."]
    out.append("")
    return out, summary


def h2_machine_cpu(s):
    """CPU µs per request of the proxy, the origin and the load generator
    together; None when one of them is not known."""
    parts = [s.get("proxy_cpu_us_per_req"), s.get("origin_cpu_us_per_req"), s.get("client_cpu_us_per_req")]
    return None if any(p is None for p in parts) else sum(parts)


def h2_cpu_budget(summary, peers):
    """Where a request's CPU goes on the shared cores, for onelayer against
    each peer: all three processes run on the same cores, so what the origin
    or the load generator spends on a path's requests comes out of its
    req/s as much as what the proxy spends."""
    o = summary.get("onelayer", {})
    if "unavailable" in o or o.get("client_cpu_us_per_req") is None or o.get("proxy_cpu_us_per_req") is None:
        return []
    keys = (("proxy_cpu_us_per_req", "proxy"), ("origin_cpu_us_per_req", "origin"),
            ("client_cpu_us_per_req", "load generator"))
    out = ["", "CPU per request on the machine's shared cores, µs (the three processes together; on "
           "saturated cores req/s goes as its inverse), and onelayer's difference from each peer:", "",
           "| path | " + " | ".join(label for _, label in keys) + " | all three |",
           "|---|" + "---:|" * (len(keys) + 1)]
    for t, s in summary.items():
        if "unavailable" in s or t == "direct":
            continue
        out.append(f"| {LABEL[t]} | " + " | ".join(fmt(s.get(k)) for k, _ in keys)
                   + f" | {fmt(h2_machine_cpu(s))} |")

    def diff(a, b):
        return None if (a is None or b is None) else a - b

    for t in peers:
        p = summary[t]
        cells = [diff(o.get(k), p.get(k)) for k, _ in keys] + [diff(h2_machine_cpu(o), h2_machine_cpu(p))]
        out.append(f"| onelayer - {NAME[t]} | " + " | ".join("n/a" if c is None else f"{c:+.2f}" for c in cells)
                   + " |")
    return out


def h2_kernel_table(summary):
    """System time of the three processes, how busy the proxy kept its CPU,
    how often it slept and the wake-up interrupts of the machine, by path
    (medians): on a virtual machine, a write to a process whose CPU sleeps
    costs the writer the wake-up, and a proxy that needs less CPU per
    request is idle more of the time, so more of its peers' writes find it
    asleep. Empty for results without them."""
    paths = [t for t, s in summary.items()
             if "unavailable" not in s and t != "direct" and s.get("proxy_sleeps_per_1k_req") is not None]
    if not paths:
        return []
    out = ["", "The kernel's part of that CPU (system time, µs per request), the share of one CPU the proxy "
           "kept busy (its CPU per request times req/s), how often it went to sleep (voluntary context "
           "switches of its threads per 1,000 requests) and the interrupts the CPUs sent each other to "
           "wake a task (rescheduling and function-call interrupts, whole machine, per 1,000 requests):", "",
           "| path | proxy system | origin system | load generator system | proxy busy | "
           "proxy sleeps / 1,000 requests | wake-up interrupts / 1,000 requests |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for t in paths:
        s = summary[t]
        cpu, rps = s.get("proxy_cpu_us_per_req"), s.get("rps")
        busy = cpu * rps / 1e6 if cpu is not None and rps is not None else None
        out.append(f"| {LABEL[t]} | {fmt(s.get('proxy_sys_us_per_req'))} | {fmt(s.get('origin_sys_us_per_req'))} | "
                   f"{fmt(s.get('client_sys_us_per_req'))} | {fmt(busy)} | "
                   f"{fmt(s.get('proxy_sleeps_per_1k_req'), 1)} | {fmt(s.get('wakeup_interrupts_per_1k_req'), 1)} |")
    return out


def h2_memory(rows, settings):
    out = ["## Memory per idle HTTP/2 connection\n",
           f"RSS (sum over the proxy's processes) after one probe request, and with "
           f"{settings.get('h2_idle_conns')} idle h2c connections, each of which sent the preface and "
           "SETTINGS, acknowledged the proxy's SETTINGS, saw its own acknowledged and then sent nothing; "
           "per connection = (RSS with - RSS at start) / connections held.\n",
           "| proxy | RSS at start | RSS with idle connections | per connection | connections held |",
           "|---|---:|---:|---:|---:|"]
    return memory_rows(out, rows)


def h2_targets(h2s, h2m):
    """Rows for the targets table: onelayer against the HTTP/2 peers."""
    o = h2s.get("onelayer", {})
    rows = []
    for peer, need in (("haproxy", 1.0), ("nghttpx", 1.0), ("nginx", 1.2)):
        r = ratio(o.get("rps"), h2s.get(peer, {}).get("rps"))
        rows.append((f"HTTP/2 throughput >= {need:.1f}x {NAME[peer]} (1 worker)", fmt(r, 2, "x"),
                     None if r is None else r >= need))
    mine = h2m.get("onelayer", {}).get("bytes_per_conn")
    theirs = h2m.get("nghttpx", {}).get("bytes_per_conn")
    ok = None if (mine is None or theirs is None) else mine <= theirs
    rows.append(("idle h2c connection memory <= nghttpx's",
                 "n/a" if mine is None else f"{mine:,.0f} B" + ("" if theirs is None else f" vs {theirs:,.0f} B"),
                 ok))
    return rows


def targets_table(tp, mem, st, wk=None, extra=()):
    def status(ok):
        return "n/a" if ok is None else ("met" if ok else "**not met**")

    o = tp.get("onelayer", {})
    rows = []
    r_h = ratio(o.get("rps"), tp.get("haproxy", {}).get("rps"))
    rows.append(("throughput >= 1.0x HAProxy (1 worker, small body)", fmt(r_h, 2, "x"),
                 None if r_h is None else r_h >= 1.0))
    r_n = ratio(o.get("rps"), tp.get("nginx", {}).get("rps"))
    rows.append(("throughput >= 1.2x NGINX", fmt(r_n, 2, "x"), None if r_n is None else r_n >= 1.2))
    p_h = ratio(o.get("p99_ms"), tp.get("haproxy", {}).get("p99_ms"))
    rows.append(("p99 <= HAProxy's", fmt(p_h, 2, "x"), None if p_h is None else p_h <= 1.0))
    cap = (wk or {}).get("capacity")
    if cap is None:
        rows.append(("workers: 2 >= 1.6x workers: 1 (load generator elsewhere)",
                     "not measured (see docs/benchmarks.md)", None))
    else:
        rows.append(("workers: 2 >= 1.6x workers: 1 (load generator elsewhere)",
                     f"{fmt(cap, 2, 'x')} estimated from CPU per request; "
                     f"{fmt(wk.get('rps_ratio'), 2, 'x')} req/s on shared cores", cap >= 1.6))
    m = mem.get("onelayer")
    per = m.get("bytes_per_conn") if m else None
    rows.append(("<= 400 B RSS per idle keep-alive connection",
                 "n/a" if per is None else f"{per:,.0f} B", None if per is None else per <= 400))
    start = m.get("rss_start_kib") if m else None
    rows.append(("<= 8 MiB RSS at start (the bench config)", kib(start), None if start is None else start <= 8192))
    for d in (1, 3):
        r = st.get(("onelayer", d))
        a = r.get("arrivals_per_request") if r else None
        rows.append((f"retry storm, depth {d}: <= 1.15 origin arrivals per request",
                     fmt(a), None if a is None else a <= 1.15))
        r = st.get(("onelayer-successes", d))
        a = r.get("arrivals_per_request") if r else None
        rows.append((f"retry storm, depth {d}, budget mode successes: <= 1.03 origin arrivals per request",
                     fmt(a), None if a is None else a <= 1.03))
    rows += list(extra)
    out = ["## Targets\n", "| target | measured | status |", "|---|---:|---|"]
    out += [f"| {a} | {b} | {status(c)} |" for a, b, c in rows]
    return out + [""]


def sanity(by):
    """Problems that mean the run did not measure what it claims (CI smoke fails on them)."""
    out = []
    for r in by["throughput"] + by["workers"]:
        bad = (r.get("socket_errors") or 0) + (r.get("non2xx") or 0)
        if r.get("rps") is None or bad:
            out.append(f"{r['phase']} {r['target']} round {r['round']}: {bad} errors, rps {r.get('rps')}")
    for r in by["memory"]:
        if r["failures"] or r["alive"] < r["n"]:
            out.append(f"memory {r['target']}: {r['failures']} failed ({r['failure_kinds']}), "
                       f"{r['alive']} of {r['n']} held")
    for r in by["large"]:
        if r["statuses"] != [200] or not r["requests"]:
            out.append(f"large {r['size']} {r['target']}: statuses {r['statuses']}")
    for r in by["storm"]:
        if not r["downstream_outage"] or not r["arrivals_outage"]:
            out.append(f"storm {r['target']} depth {r['depth']}: no traffic measured")
    for r in by["h2"]:
        if "unavailable" in r:
            continue
        bad = sum(r.get(k) or 0 for k in ("failed", "errored", "timeout", "non2xx"))
        if r.get("rps") is None or bad or r.get("succeeded") != r.get("requests"):
            out.append(f"h2 {r['target']} round {r['round']}: {bad} errors, "
                       f"{r.get('succeeded')} of {r.get('requests')} succeeded, rps {r.get('rps')}")
    for r in by["h2mem"]:
        if "unavailable" not in r and (r["failures"] or r["alive"] < r["n"]):
            out.append(f"h2 memory {r['target']}: {r['failures']} failed ({r['failure_kinds']}), "
                       f"{r['alive']} of {r['n']} held")
    return out


# ---------------------------------------------------------------- plots

def gnuplot(script, cwd):
    if not shutil.which("gnuplot"):
        return "gnuplot not found: no plots"
    p = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True, cwd=cwd, timeout=60)
    return None if p.returncode == 0 else f"gnuplot failed: {p.stderr.strip()[:300]}"


SVG_HEAD = 'set terminal svg size {w},{h} dynamic enhanced font "sans,12" background rgb "white"\n'


def plot_throughput(tp, out_dir):
    ts = [t for t in ORDER if t in tp]
    with open(os.path.join(out_dir, "throughput.dat"), "w") as f:
        f.write("# target rps p50_ms p99_ms\n")
        for t in ts:
            s = tp[t]
            f.write(f'"{NAME[t]}" {s["rps"] or 0} {s["p50_ms"] or 0} {s["p99_ms"] or 0}\n')
    common = ("set style data histogram\nset style histogram clustered gap 1\n"
              "set style fill solid 0.85 border -1\nset grid ytics\nset yrange [0:*]\n"
              "set key top left\nset xtics nomirror\n")
    script = (SVG_HEAD.format(w=640, h=400) + 'set output "throughput.svg"\n' + common +
              'set title "Small-body throughput, 1 worker (median req/s, higher is better)"\n'
              'set ylabel "requests per second"\nset offsets 0,0,graph 0.1,0\n'
              'plot "throughput.dat" using 2:xtic(1) notitle lc rgb "#4477aa", '
              '"" using 0:2:(sprintf("%.0f",$2)) with labels offset 0,0.8 notitle\n'
              + SVG_HEAD.format(w=640, h=400) + 'set output "latency.svg"\n' + common +
              'set title "Small-body latency under load (median of rounds, lower is better)"\n'
              'set ylabel "milliseconds"\nset offsets 0,0,graph 0.1,0\nset key below horizontal\n'
              'plot "throughput.dat" using 3:xtic(1) title "p50" lc rgb "#66ccee", '
              '"" using 4 title "p99" lc rgb "#ee6677", '
              '"" using ($0-1.0/6):3:(sprintf("%.2f",$3)) with labels offset 0,0.8 notitle, '
              '"" using ($0+1.0/6):4:(sprintf("%.2f",$4)) with labels offset 0,0.8 notitle\n')
    return gnuplot(script, out_dir)


def plot_storm(st, settings, out_dir):
    kinds = [t for t in ORDER if any(k[0] == t for k in st)]
    depths = sorted({k[1] for k in st})
    if not kinds:
        return None
    ymax = 1
    for (t, d) in st:
        path = os.path.join(out_dir, f"storm-{t}-d{d}.tsv")
        with open(path) as f:
            for line in f:
                if not line.startswith("#"):
                    cols = line.split()
                    ymax = max(ymax, int(cols[1]), int(cols[2]))
    outage = float(settings.get("outage_s", 10))
    script = [SVG_HEAD.format(w=360 * len(kinds) + 40, h=280 * len(depths) + 40),
              'set output "storm.svg"\n',
              f'set multiplot layout {len(depths)},{len(kinds)} title '
              f'"Retry storm: origin arrivals vs downstream requests per 100 ms (outage shaded)"\n',
              f"set yrange [0:{ymax * 1.05:.0f}]\nset grid\nset key below horizontal font ',9'\n"
              "set xlabel 'seconds from outage start' font ',10'\nset ylabel 'per 100 ms' font ',10'\n",
              f"set object 1 rect from 0, graph 0 to {outage}, graph 1 fillcolor rgb '#f4d6d6' "
              "fillstyle solid 1.0 noborder behind\n"]
    for d in depths:
        for t in kinds:
            r = st.get((t, d))
            if r is None:
                script.append("set multiplot next\n")
                continue
            a = r.get("arrivals_per_request")
            script.append(f'set title "{NAME[t]}, depth {d}: {fmt(a)} arrivals/request"\n')
            script.append(f'plot "storm-{t}-d{d}.tsv" using 1:2 with steps lw 1.5 lc rgb "#cc3311" '
                          f'title "origin arrivals", "" using 1:3 with steps dt 2 lw 1.5 lc rgb "#0077bb" '
                          f'title "downstream requests"\n')
    script.append("unset multiplot\n")
    return gnuplot("".join(script), out_dir)


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--set", nargs="*", default=[], help="key=value run settings")
    ap.add_argument("--notes", default="[]", help="JSON list of notes from the run")
    a = ap.parse_args()
    settings = dict(kv.split("=", 1) for kv in a.set)
    notes = json.loads(a.notes)
    with open(a.results) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    by = {p: [r for r in rows if r["phase"] == p]
          for p in ("throughput", "workers", "memory", "large", "storm", "h2", "h2mem")}
    info = machine()

    md = ["# onelayer benchmark results", "",
          f"Generated by `tests/bench/run.sh` ({settings.get('mode')} mode) on {info['date']}.", "",
          "| | |", "|---|---|",
          f"| machine | `{info['uname']}` |", f"| CPUs | {info['nproc']} x {info['cpu']} |",
          f"| memory | {info['memory']} |",
          f"| load average (start / end) | {settings.get('loadavg_start', '?')} / {info['loadavg_end']} |",
          f"| onelayer | {settings.get('onelayer_version') or 'not run'}"
          f"{' (' + settings['onelayer_build'] + ' build)' if settings.get('onelayer_build') else ''} |"]
    if settings.get("h2_other_bin"):
        md += [f"| onelayer, {settings.get('h2_other_label') or 'other build'} (h2 phase) | "
               f"`{settings['h2_other_bin']}` |"]
    md += [f"| {k} | {v} |" for k, v in info["tools"].items()]
    if settings.get("onelayer_workers", "1") != "1":
        md += ["", f"**onelayer ran with `workers: {settings['onelayer_workers']}`** (the other proxies with 1)."]
    md += ["", "Everything runs on this one machine over 127.0.0.1: load generator, proxy and origin "
           "(NGINX, 1 worker, static files) share its cores, so figures are comparable within a run, "
           "not across machines. Every proxy runs 1 worker/thread with keep-alive to the origin and "
           "3 attempts in all on 503 or connection failure (HAProxy `retries 2` + `retry-on 503 "
           "conn-failure`; NGINX `proxy_next_upstream error timeout http_503` with "
           "`proxy_next_upstream_tries 3`; onelayer `max_attempts: 3` with its retry budget), and every "
           "proxy appends the client's address to `X-Forwarded-For`, as onelayer does by default "
           "(HAProxy `option forwardfor`; NGINX `proxy_set_header` or `grpc_set_header` with "
           "`$proxy_add_x_forwarded_for`; nghttpx `--add-x-forwarded-for`).", ""]
    sections = (("throughput", throughput), ("workers", workers), ("memory", memory), ("large", large),
                ("storm", storm), ("h2", h2), ("h2mem", h2_memory))
    summary = {}
    for phase, section in sections:
        if by[phase]:
            sec, summary[phase] = section(by[phase], settings)
            md += sec
    tp, mem, st, wk, h2s, h2m = (summary.get(p, {}) for p in ("throughput", "memory", "storm", "workers",
                                                               "h2", "h2mem"))
    md += targets_table(tp, mem, st, wk, h2_targets(h2s, h2m) if (h2s or h2m) else ())

    problems = sanity(by)
    notes += [f"CHECK FAILED: {p}" for p in problems]
    plot_notes = []
    if tp:
        plot_notes.append(plot_throughput(tp, a.out))
    if st:
        plot_notes.append(plot_storm(st, settings, a.out))
    notes += [n for n in plot_notes if n]
    md += ["## Notes", "",
           "- wrk is a closed-loop load generator: it does not correct for coordinated omission, "
           "so its p99 understates what an open-loop client would see when a proxy stalls.",
           ("- Nothing is pinned to CPUs" + (" outside the h2 phase (`BENCH_H2_PLACEMENT`)"
                                              if settings.get("h2_placement") else "") +
            "; rounds are interleaved so machine drift affects every target alike, and medians are reported."),
           "- NGINX lists the origin three times with `max_fails=0`: with one server, "
           "`proxy_next_upstream` has no other peer and never retries.",
           "- NGINX and its origin run with `keepalive_requests 1000000` so no path is measured "
           "reconnecting every 1000 requests (NGINX's default)."]
    md += [f"- {n}" for n in notes]
    md.append("")
    with open(os.path.join(a.out, "latest.md"), "w") as f:
        f.write("\n".join(md))
    with open(os.path.join(a.out, "latest.json"), "w") as f:
        json.dump({"machine": info, "settings": settings, "notes": notes, "results": rows}, f, indent=1)
    for p in problems:
        print(f"report.py: check failed: {p}", file=sys.stderr)
    return 3 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
