#!/usr/bin/env bash
# Who wakes the proxy on the HTTP/2 benchmark path, from a scheduler trace.
#
# Runs the h2 phase's path (an NGINX h2c origin answering "ok", h2load with
# 16 connections x 32 streams of 64-byte POSTs) through onelayer and then
# through nghttpx, pinned as BENCH_H2_PLACEMENT=proxy-alone pins them: the
# proxy on one CPU, the origin and h2load on another. While each load runs,
# `perf record -a` traces the scheduler's switches, the interrupts CPUs send
# each other and h2load's writes for WAKEUPS_TRACE_SECONDS, and
# wakeup_trace.py prints, per proxy: how often it slept, which peer's
# writes woke its idle CPU (and paid the interrupt), and how often the
# proxy was already asleep when h2load answered the proxy's last write.
# Needs root (system-wide tracepoints), perf and a kernel with the
# ipi:ipi_send_cpu tracepoint (Linux 6.3 or later). Everything is on
# 127.0.0.1 and stops by itself; perf slows the load down, so the req/s
# printed here are not the benchmark's.
#
# Usage: tests/bench/wakeups.sh [ONELAYER_BIN]   (default build-rel/onelayer)
# Environment: WAKEUPS_REQUESTS (h2load requests per proxy, default
#              300000), WAKEUPS_TRACE_SECONDS (default 1),
#              WAKEUPS_KEEP=1 keeps the temporary directory (the traces).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN=${1:-$REPO/build-rel/onelayer}
REQUESTS=${WAKEUPS_REQUESTS:-300000}
TRACE_SECONDS=${WAKEUPS_TRACE_SECONDS:-1}
PY=${PYTHON:-python3}
ECHO_MODULE=/usr/lib/nginx/modules/ngx_http_echo_module.so
for tool in perf nginx nghttpx h2load taskset "$PY"; do
  command -v "$tool" >/dev/null || { echo "wakeups.sh: $tool not found" >&2; exit 1; }
done
[[ -f $ECHO_MODULE ]] || { echo "wakeups.sh: $ECHO_MODULE not found (Debian libnginx-mod-http-echo)" >&2; exit 1; }
[[ -x $BIN ]] || { echo "wakeups.sh: $BIN is not executable" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "wakeups.sh: needs root for system-wide tracepoints" >&2; exit 1; }
[[ $(perf list 2>/dev/null | grep -c 'ipi:ipi_send_cpu') -gt 0 ]] ||
  { echo "wakeups.sh: this kernel has no ipi:ipi_send_cpu tracepoint (Linux 6.3 or later has it)" >&2; exit 1; }
read -r PROXY_CPU ORIGIN_CPU CLIENT_CPU < <("$PY" "$HERE/bench_util.py" placement proxy-alone)

. "$HERE/scratch.sh"
scratch_start wakeups WAKEUPS_KEEP

free_port() { "$PY" "$HERE/bench_util.py" freeports 1; }
ORIGIN_PORT=$(free_port)
. "$HERE/origin_conf.sh"
write_origin_conf "$TMP/origin" "load_module $ECHO_MODULE;" \
  "server { listen 127.0.0.1:$ORIGIN_PORT http2 backlog=4096; location / { echo_read_request_body; echo -n \"ok\"; } }"
taskset -c "$ORIGIN_CPU" nginx -p "$TMP/origin/" -c "$TMP/origin/nginx.conf" -e "$TMP/origin/error.log" &
PIDS+=($!)
"$PY" "$HERE/bench_util.py" waitport "$ORIGIN_PORT" --timeout 10
head -c 64 /dev/zero | tr '\0' 'p' >"$TMP/body.bin"

"$PY" "$HERE/bench_util.py" onelayer-config --upstream-port "$ORIGIN_PORT" --layer bench --workers 1 \
  --listener-protocols http1,h2c --upstream-protocol h2c --access-log off >"$TMP/onelayer.yaml"
taskset -c "$PROXY_CPU" "$BIN" --config "$TMP/onelayer.yaml" --ports-file "$TMP/ports" --log-level warn \
  >/dev/null 2>"$TMP/onelayer.log" &
PIDS+=($!)
ONELAYER_PORT=$("$PY" "$HERE/bench_util.py" portsfile "$TMP/ports" bench --timeout 10)
NGHTTPX_PORT=$(free_port)
# One process (no master), appending to X-Forwarded-For as onelayer does.
taskset -c "$PROXY_CPU" nghttpx --conf=/dev/null "--frontend=127.0.0.1,$NGHTTPX_PORT;no-tls" \
  "--backend=127.0.0.1,$ORIGIN_PORT;;proto=h2" -n1 --single-process --add-x-forwarded-for \
  --errorlog-file="$TMP/nghttpx.log" >>"$TMP/nghttpx.log" 2>&1 &
PIDS+=($!)
"$PY" "$HERE/bench_util.py" waitport "$NGHTTPX_PORT" --timeout 10
echo "proxy on CPU $PROXY_CPU, origin and h2load on CPU $ORIGIN_CPU; $REQUESTS requests per proxy, ${TRACE_SECONDS} s traced"

EVENTS=sched:sched_switch,ipi:ipi_send_cpu,syscalls:sys_enter_writev
for pair in "onelayer $ONELAYER_PORT" "nghttpx $NGHTTPX_PORT"; do
  read -r name port <<<"$pair"
  url="http://127.0.0.1:$port/"
  taskset -c "$CLIENT_CPU" h2load -c16 -m32 -n 50000 -d "$TMP/body.bin" "$url" >/dev/null  # warm-up
  taskset -c "$CLIENT_CPU" h2load -c16 -m32 -n "$REQUESTS" -d "$TMP/body.bin" "$url" >"$TMP/h2load.$name" &
  load=$!
  sleep 0.5
  perf record -q -o "$TMP/perf.$name" -e "$EVENTS" -a -- sleep "$TRACE_SECONDS" 2>/dev/null
  wait "$load"
  grep -q "succeeded, 0 failed, 0 errored" "$TMP/h2load.$name" ||
    { echo "wakeups.sh: h2load through $name did not succeed:" >&2; cat "$TMP/h2load.$name" >&2; exit 1; }
  echo
  echo "$name: $(grep -oE '[0-9.]+ req/s' "$TMP/h2load.$name" | head -n 1) (under perf)"
  perf script -i "$TMP/perf.$name" -F comm,tid,cpu,time,event,trace 2>/dev/null |
    "$PY" "$HERE/wakeup_trace.py" --name "$name" --proxy-comm "$name" --proxy-cpu "$PROXY_CPU" \
      --peer-cpu "$ORIGIN_CPU" --json "$TMP/wakeups.$name.json"
done
