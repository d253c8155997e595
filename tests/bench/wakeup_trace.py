#!/usr/bin/env python3
"""Who wakes the proxy, read from a scheduler trace (tests/bench/wakeups.sh).

Input: `perf script -F comm,tid,cpu,time,event,trace` of a system-wide
record of sched:sched_switch, ipi:ipi_send_cpu and
syscalls:sys_enter_writev, taken while h2load drives the HTTP/2 benchmark
path with the proxy pinned to one CPU and the origin and h2load to another.

Output, per second of trace:
  - how often the proxy went to sleep (switched out in state S);
  - the interrupts sent to the proxy's CPU, by sender: a function-call
    interrupt is how the kernel wakes a task on an idle CPU, so these are
    the peers' writes that found the proxy asleep, and the sender pays;
  - for each time the proxy interrupted the peers' CPU (its write woke
    h2load or the origin there), whether the proxy was asleep when h2load
    next wrote, and the median delays: from that interrupt to h2load's
    next write, and to the proxy's next sleep.
"""
import argparse
import bisect
import json
import re
import statistics
import sys

LINE = re.compile(r"\s*(\S+)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)")


def parse(lines):
    """(seconds, cpu, comm, event name, trace text) for each event line."""
    out = []
    for line in lines:
        m = LINE.match(line)
        if m:
            comm, _, cpu, t, ev, rest = m.groups()
            out.append((float(t), int(cpu), comm, ev.rsplit(":", 1)[-1], rest))
    return out


def field(text, name):
    m = re.search(rf"\b{name}=(\S+)", text)
    return m.group(1) if m else None


def summarize(events, proxy_comm, proxy_cpu, peer_cpu, writer_comm="h2load"):
    if len(events) < 2:
        return None
    seconds = events[-1][0] - events[0][0]
    if seconds <= 0:
        return None
    sleeps = 0
    senders = {}
    # The proxy's CPU: times it went idle and came back, in order.
    idle_from, idle_to = [], []
    proxy_irqs = []  # times the proxy interrupted the peers' CPU
    writes = []  # times the writer wrote, on the peers' CPU
    for t, cpu, comm, ev, rest in events:
        if ev == "sched_switch" and cpu == proxy_cpu:
            prev, nxt = field(rest, "prev_comm"), field(rest, "next_comm")
            if prev and prev.startswith(proxy_comm) and field(rest, "prev_state") == "S":
                sleeps += 1
            if nxt and nxt.startswith("swapper"):
                idle_from.append(t)
            elif prev and prev.startswith("swapper"):
                idle_to.append(t)
        elif ev == "ipi_send_cpu":
            target = field(rest, "cpu")
            if target is None or not target.isdigit():
                continue
            if int(target) == proxy_cpu and cpu != proxy_cpu:
                senders[comm] = senders.get(comm, 0) + 1
            elif int(target) == peer_cpu and cpu == proxy_cpu and comm.startswith(proxy_comm):
                proxy_irqs.append(t)
        elif ev == "sys_enter_writev" and cpu == peer_cpu and comm.startswith(writer_comm):
            writes.append(t)

    def asleep(t):
        # Asleep at t: the CPU's last switch before t was to the idle task.
        i = bisect.bisect_right(idle_from, t)
        if i == 0:
            return False
        went = idle_from[i - 1]
        j = bisect.bisect_right(idle_to, went)
        return j >= len(idle_to) or idle_to[j] > t

    asleep_at_write, to_write, to_sleep = [], [], []
    for k, t in enumerate(proxy_irqs):
        nxt_irq = proxy_irqs[k + 1] if k + 1 < len(proxy_irqs) else float("inf")
        w = bisect.bisect_right(writes, t)
        if w >= len(writes) or writes[w] >= nxt_irq:
            continue
        asleep_at_write.append(asleep(writes[w]))
        to_write.append((writes[w] - t) * 1e6)
        s = bisect.bisect_right(idle_from, t)
        if s < len(idle_from):
            to_sleep.append((idle_from[s] - t) * 1e6)
    med = lambda v: statistics.median(v) if v else None
    return {
        "seconds": seconds,
        "proxy_sleeps_per_s": sleeps / seconds,
        "wakeups_of_proxy_cpu_per_s": {c: n / seconds for c, n in sorted(senders.items(), key=lambda kv: -kv[1])},
        "proxy_interrupts_of_peer_cpu_per_s": len(proxy_irqs) / seconds,
        "writer_writes_after_proxy_interrupt": len(asleep_at_write),
        "proxy_asleep_at_writer_write": (sum(asleep_at_write) / len(asleep_at_write)) if asleep_at_write else None,
        "median_us_to_writer_write": med(to_write),
        "median_us_to_proxy_sleep": med(to_sleep),
    }


def describe(name, s):
    if s is None:
        return [f"{name}: no events"]
    fmt = lambda v, d=0: "n/a" if v is None else f"{v:,.{d}f}"
    out = [f"{name} ({s['seconds']:.2f} s traced):",
           f"  proxy went to sleep {fmt(s['proxy_sleeps_per_s'])} times/s",
           "  interrupts to the proxy's CPU (its wake-ups), by sender: " +
           (", ".join(f"{c} {fmt(n)}/s" for c, n in s["wakeups_of_proxy_cpu_per_s"].items()) or "none"),
           f"  the proxy interrupted the peers' CPU {fmt(s['proxy_interrupts_of_peer_cpu_per_s'])} times/s; "
           f"h2load wrote next {fmt(s['median_us_to_writer_write'])} µs later (median), "
           f"the proxy slept {fmt(s['median_us_to_proxy_sleep'])} µs after it (median)",
           "  the proxy was asleep at that write " +
           ("n/a" if s["proxy_asleep_at_writer_write"] is None else f"{100 * s['proxy_asleep_at_writer_write']:.0f}%") +
           f" of {s['writer_writes_after_proxy_interrupt']} times"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", required=True, help="what the trace is of, for the printout")
    ap.add_argument("--proxy-comm", required=True, help="the proxy's thread name (prefix)")
    ap.add_argument("--proxy-cpu", type=int, required=True)
    ap.add_argument("--peer-cpu", type=int, required=True)
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    s = summarize(parse(sys.stdin), a.proxy_comm, a.proxy_cpu, a.peer_cpu)
    print("\n".join(describe(a.name, s)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(s, f)
    return 0 if s is not None else 1


if __name__ == "__main__":
    sys.exit(main())
