#!/usr/bin/env bash
# Instructions per proxied request, by function, under callgrind.
#
# Starts an NGINX origin serving the benchmark's 100-byte file and onelayer
# (the benchmark's config: 1 worker, retries on, access log to /dev/null)
# under `valgrind --tool=callgrind`, warms it up, zeroes the counters, drives
# PROFILE_SECONDS of keep-alive load with wrk (64 connections) and prints
# user-space instructions per request and the top functions. Instruction
# counts do not depend on what else the machine runs, so two builds can be
# compared on a busy machine. Everything is on 127.0.0.1 and stops by itself.
#
# With --syscalls, onelayer runs on its own and `strace -c -f` counts its
# system calls over the same load instead: calls per request, by name
# (`--syscalls --tls [--haproxy]`: on the TLS path, or HAProxy's;
# `--syscalls --tls-handshake [--haproxy]` on the handshake row's).
#
# With --h2, the path is the HTTP/2 benchmark's (tests/bench/h2_phase.sh):
# an NGINX h2c origin answering "ok", onelayer with an h2c listener and an
# h2c upstream, and h2load (16 connections x 32 streams of 64-byte POSTs,
# PROFILE_H2_REQUESTS of them, default 20000) instead of wrk; the report
# adds instructions per request by library (onelayer's own code, nghttp2,
# the allocator, libc). `--h2 --nghttpx` profiles nghttpx (Debian
# nghttp2-proxy, one worker, in one process, appending to X-Forwarded-For
# as onelayer does) on the same path instead of onelayer, for a
# side-by-side count.
#
# With --h2 --origin the NGINX origin runs under callgrind instead and the
# proxy in front of it (onelayer, or nghttpx with --nghttpx) runs normally:
# what the requests a proxy forwards cost the origin per request.
# PROFILE_SINGLE_LAYER_HEADERS=off runs onelayer without the single-layer
# headers (the benchmark's onelayer-plain row), to show what they cost the
# origin.
#
# With --tls, the path is tests/bench/tls.sh's keep-alive row: an NGINX
# origin over TLS 1.3 (TLS_AES_128_GCM_SHA256, X25519, a certificate of a CA
# made here), onelayer verifying it and pooling its TLS connections.
# `--tls --haproxy` profiles HAProxy (one thread, `http-reuse always`,
# verifying the same certificate) in onelayer's place, for a side-by-side
# count: where each proxy's instructions per request go, by library.
# `--tls [--haproxy] --origin` profiles the NGINX TLS origin instead (the
# proxy in front runs normally): what each proxy's pooled requests cost it.
#
# With --tls-handshake, the path is tls.sh's handshake row: a new TLS
# connection to the origin per request (onelayer `pool.max_idle: 0`;
# `--tls-handshake --haproxy`: HAProxy with `http-reuse never`), 16 wrk
# connections for PROFILE_SECONDS (default 20; handshakes under callgrind
# are slow). The origin runs under callgrind too: the report adds its
# instructions per request (= per handshake) by library, how many of its
# handshakes resumed a session and with which group (its access log's
# $ssl_session_reused and $ssl_curve), and, from four requests made one
# after another before the load through tests/bench/tls_hello.py (a relay
# between a second proxy of the same config and the origin), what each
# ClientHello carried (key shares, groups, a pre-shared key and its modes)
# and whether the origin answered with a HelloRetryRequest or resumed.
# On that row the proxy's and the origin's instructions add up: the two
# processes and wrk share the machine's two cores.
#
# Usage: tests/bench/profile.sh [--syscalls] [--h2 [--origin] [--nghttpx] | --tls [--haproxy] [--origin] | --tls-handshake [--haproxy]] [ONELAYER_BIN]   (default build-rel/onelayer)
# Environment: PROFILE_SECONDS (default 5; 20 with --tls-handshake), PROFILE_TOP (default 30),
#              PROFILE_KEEP=1 keeps the temporary directory,
#              PROFILE_VALGRIND_ARGS adds callgrind options for the proxy
#              (--cache-sim=yes: the report adds simulated first-level cache
#              misses per request, and the instruction cache's by library),
#              PROFILE_ACCESS_LOG=on turns onelayer's access log on (default
#              off, as in tests/bench/run.sh), PROFILE_REUSE=safe|always
#              sets the upstream's reuse (default: onelayer's),
#              PROFILE_FLEET=1 starts a redis-server and gives onelayer a
#              fleet block and a `scope: fleet` budget (docs/fleet.md): run
#              it with and without to see what the fleet budget costs per
#              request (the syncs included); the report adds /fleet's view.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MODE=callgrind
H2=0
if [[ ${1:-} == --syscalls ]]; then MODE=syscalls; shift; fi
if [[ ${1:-} == --h2 ]]; then H2=1; shift; fi
ORIGIN_PROFILE=0
if [[ $H2 == 1 && $MODE == callgrind && ${1:-} == --origin ]]; then ORIGIN_PROFILE=1; shift; fi
NGHTTPX=0
if [[ $H2 == 1 && $MODE == callgrind && ${1:-} == --nghttpx ]]; then NGHTTPX=1; shift; fi
TLS=0 HANDSHAKE=0 HAPROXY=0
if [[ $H2 == 0 && ${1:-} == --tls ]]; then TLS=1; shift
elif [[ $H2 == 0 && ${1:-} == --tls-handshake ]]; then TLS=1 HANDSHAKE=1; shift; fi
if [[ $TLS == 1 && ${1:-} == --haproxy ]]; then HAPROXY=1; shift; fi
if [[ $TLS == 1 && $HANDSHAKE == 0 && $MODE == callgrind && ${1:-} == --origin ]]; then ORIGIN_PROFILE=1; shift; fi
H2_REQUESTS=${PROFILE_H2_REQUESTS:-20000}
BIN=${1:-$REPO/build-rel/onelayer}
SECONDS_LOAD=${PROFILE_SECONDS:-$([[ $HANDSHAKE == 1 ]] && echo 20 || echo 5)}
TOP=${PROFILE_TOP:-30}
ACCESS_LOG=${PROFILE_ACCESS_LOG:-off}
SINGLE_LAYER_HEADERS=${PROFILE_SINGLE_LAYER_HEADERS:-on}
if [[ $MODE == syscalls ]]; then tools="strace wrk nginx python3"; else tools="valgrind callgrind_control callgrind_annotate wrk nginx python3"; fi
[[ $H2 == 1 ]] && tools="$tools h2load"
FLEET=${PROFILE_FLEET:-0}
[[ $FLEET == 1 ]] && tools="$tools redis-server"
H2_ECHO_MODULE=/usr/lib/nginx/modules/ngx_http_echo_module.so
[[ $H2 == 0 || -f $H2_ECHO_MODULE ]] || { echo "profile.sh: $H2_ECHO_MODULE not found (Debian libnginx-mod-http-echo)" >&2; exit 1; }
for tool in $tools; do
  command -v "$tool" >/dev/null || { echo "profile.sh: $tool not found" >&2; exit 1; }
done
[[ $NGHTTPX == 1 ]] && { tools="$tools nghttpx"; BIN=$(command -v nghttpx || echo nghttpx); }
[[ $TLS == 1 ]] && tools="$tools openssl"
[[ $HANDSHAKE == 1 ]] && tools="$tools curl"
[[ $HAPROXY == 1 ]] && { tools="$tools haproxy"; BIN=$(command -v haproxy || echo haproxy); }
[[ $FLEET == 1 && ($NGHTTPX == 1 || $ORIGIN_PROFILE == 1 || $TLS == 1) ]] && { echo "profile.sh: PROFILE_FLEET=1 profiles onelayer itself on the HTTP/1 or --h2 path (not with --origin, --nghttpx or --tls)" >&2; exit 1; }
[[ -x $BIN ]] || { echo "profile.sh: $BIN is not executable" >&2; exit 1; }

. "$HERE/scratch.sh"
scratch_start profile PROFILE_KEEP

free_port() { python3 "$HERE/bench_util.py" freeports 1; }
ORIGIN_PORT=$(free_port)
mkdir -p "$TMP/www"
head -c 100 /dev/zero | tr '\0' 'x' >"$TMP/www/small.txt"
if [[ $TLS == 1 ]]; then
  # tests/bench/tls.sh's origin and certificates.
  . "$HERE/tls_conf.sh"
  tls_certs "$TMP"
  ORIGIN_MODULE=""
  # --tls-handshake: the origin logs, per request (= per handshake), whether
  # it resumed a session and the key exchange group.
  ORIGIN_LOG=""
  [[ $HANDSHAKE == 1 ]] && ORIGIN_LOG="access_log $TMP/origin/handshakes.log handshake buffer=64k flush=1s;"
  ORIGIN_SERVER="log_format handshake '\$ssl_session_reused \$ssl_curve';
    server { listen 127.0.0.1:$ORIGIN_PORT ssl backlog=4096; root $TMP/www; $ORIGIN_LOG
    ssl_certificate $TMP/origin.pem; ssl_certificate_key $TMP/origin.key; ssl_protocols TLSv1.3;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256; ssl_ecdh_curve X25519; ssl_session_cache shared:s:10m; }"
elif [[ $H2 == 1 ]]; then
  ORIGIN_MODULE="load_module $H2_ECHO_MODULE;"
  # h2c with prior knowledge; the echo module reads the body, then "ok".
  ORIGIN_SERVER="server { listen 127.0.0.1:$ORIGIN_PORT http2 backlog=4096; location / { echo_read_request_body; echo -n \"ok\"; } }"
else
  ORIGIN_MODULE=""
  ORIGIN_SERVER="server { listen 127.0.0.1:$ORIGIN_PORT; root $TMP/www; }"
fi
# --tls-handshake profiles the origin too: the handshakes a proxy asks for
# are most of the origin's work on that row, and the origin is its bound.
[[ $HANDSHAKE == 1 && $MODE == callgrind ]] && ORIGIN_PROFILE=2
# Under callgrind, the origin runs as one process (no master).
ORIGIN_MASTER=""
[[ $ORIGIN_PROFILE != 0 ]] && ORIGIN_MASTER="master_process off;"
. "$HERE/origin_conf.sh"
write_origin_conf "$TMP/origin" "$ORIGIN_MODULE
$ORIGIN_MASTER" "$ORIGIN_SERVER"
OUTFILE="$TMP/callgrind.out"
ORIGIN_OUTFILE="$TMP/origin.callgrind.out"
if [[ $ORIGIN_PROFILE != 0 ]]; then
  valgrind --tool=callgrind --callgrind-out-file="$([[ $ORIGIN_PROFILE == 1 ]] && echo "$OUTFILE" || echo "$ORIGIN_OUTFILE")" \
    nginx -p "$TMP/origin/" -c "$TMP/origin/nginx.conf" -e "$TMP/origin/error.log" >/dev/null 2>&1 &
  VG_ORIGIN=$!
  [[ $ORIGIN_PROFILE == 1 ]] && VG=$VG_ORIGIN
  PIDS+=($VG_ORIGIN)
  python3 "$HERE/bench_util.py" waitport "$ORIGIN_PORT" --timeout 60
else
  nginx -p "$TMP/origin/" -c "$TMP/origin/nginx.conf" -e "$TMP/origin/error.log" &
  PIDS+=($!)
  python3 "$HERE/bench_util.py" waitport "$ORIGIN_PORT" --timeout 10
fi

FLEET_ARGS=()
if [[ $FLEET == 1 ]]; then
  REDIS_PORT=$(free_port)
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$TMP" \
    --daemonize no >"$TMP/redis.log" 2>&1 &
  PIDS+=($!)
  python3 "$HERE/bench_util.py" waitport "$REDIS_PORT" --timeout 10
  FLEET_ARGS=(--fleet-redis "$REDIS_PORT")
fi

# tests/bench/tls.sh's keep-alive or handshake row.
TLS_ROW=keepalive TLS_MAX_IDLE=64
[[ $HANDSHAKE == 1 ]] && TLS_ROW=handshake TLS_MAX_IDLE=0
if [[ $TLS == 1 ]]; then
  # tests/bench/tls.sh's configs; handshakes under callgrind are slow, so
  # connects get 10 s (tls.sh: 1 s).
  tls_onelayer_config "$ORIGIN_PORT" "$TMP/ca.pem" "$TLS_MAX_IDLE" 10s >"$TMP/onelayer.yaml"
elif [[ $H2 == 1 ]]; then
  python3 "$HERE/bench_util.py" onelayer-config --upstream-port "$ORIGIN_PORT" --layer profile \
    --listener-protocols http1,h2c --upstream-protocol h2c --access-log "$ACCESS_LOG" \
    --single-layer-headers "$SINGLE_LAYER_HEADERS" "${FLEET_ARGS[@]}" >"$TMP/onelayer.yaml"
  head -c 64 /dev/zero | tr '\0' 'p' >"$TMP/body.bin"
else
  python3 "$HERE/bench_util.py" onelayer-config --upstream-port "$ORIGIN_PORT" --layer profile \
    --access-log "$ACCESS_LOG" ${PROFILE_REUSE:+--reuse "$PROFILE_REUSE"} "${FLEET_ARGS[@]}" >"$TMP/onelayer.yaml"
fi

load() {  # load SECONDS [warm]: wrk (or h2load with --h2) against onelayer; prints "requests: N"; fails on non-2xx
  local out non2xx
  if [[ $H2 == 1 ]]; then
    # A fixed number of requests (a fifth of them for the warm-up).
    local n=$H2_REQUESTS
    [[ ${2:-} == warm ]] && n=$((H2_REQUESTS / 5))
    out=$(timeout 300 h2load -c16 -m32 -n "$n" -d "$TMP/body.bin" "$URL")
    grep -q " $n succeeded" <<<"$out" || { echo "profile.sh: not every h2load request succeeded:" >&2; grep requests: <<<"$out" >&2; return 1; }
    echo "requests: $n"
    return 0
  fi
  # --tls-handshake: 16 connections, and time for handshakes under callgrind.
  local conns=64 wait=2s
  [[ $HANDSHAKE == 1 ]] && conns=16 wait=60s
  out=$(timeout $(($1 + 90)) wrk -t1 -c"$conns" --timeout "$wait" -d"${1}s" "$URL")
  non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
  [[ -z $non2xx ]] || { echo "profile.sh: $non2xx non-2xx answers" >&2; return 1; }
  awk '/requests in/ {print "requests: " $1}' <<<"$out"
}

if [[ $MODE == syscalls ]]; then
  if [[ $HAPROXY == 1 ]]; then
    PORT=$(free_port)
    tls_haproxy_config "$PORT" "$ORIGIN_PORT" "$TMP/ca.pem" "$TLS_ROW" 10s >"$TMP/haproxy.cfg"
    haproxy -f "$TMP/haproxy.cfg" -db >/dev/null 2>"$TMP/haproxy.log" &
    OL=$!
    PIDS+=($OL)
    python3 "$HERE/bench_util.py" waitport "$PORT" --timeout 10
  else
    "$BIN" --config "$TMP/onelayer.yaml" --ports-file "$TMP/ports" --log-level warn >/dev/null 2>"$TMP/onelayer.log" &
    OL=$!
    PIDS+=($OL)
    PORT=$(python3 "$HERE/bench_util.py" portsfile "$TMP/ports" bench --timeout 10)
  fi
  URL="http://127.0.0.1:$PORT/small.txt"
  [[ $H2 == 1 ]] && URL="http://127.0.0.1:$PORT/"
  load 2 warm >/dev/null  # warm-up, and every wrk connection open before counting starts
  timeout $((SECONDS_LOAD + 40)) strace -c -f -o "$TMP/strace.txt" -p "$OL" 2>/dev/null &
  ST=$!
  sleep 1  # strace attaches to every thread
  WRK_OUT=$(load "$SECONDS_LOAD")
  kill -INT "$ST" 2>/dev/null || true
  wait "$ST" 2>/dev/null || true
  REQS=$(awk '/^requests:/ {print $2}' <<<"$WRK_OUT")
  [[ -n $REQS && $REQS -gt 0 && -s $TMP/strace.txt ]] || { echo "profile.sh: no requests or no strace output" >&2; exit 1; }
  echo "requests: $REQS (wrk under strace runs far slower than without it; the counts per request still hold)"
  echo "system calls per request, by name:"
  # strace -c rows: % time, seconds, usecs/call, calls, [errors,] syscall.
  awk -v reqs="$REQS" '$1 ~ /^[0-9.]+$/ && $NF != "total" { printf "%8.3f  %s\n", $4 / reqs, $NF }' "$TMP/strace.txt" | sort -rn | awk -v n="$TOP" 'NR <= n'
  exit 0
fi

# --tls-handshake: first a few requests, one after another, through a
# proxy of the same config whose origin is tests/bench/tls_hello.py's
# relay to the origin: it tells what each handshake's hellos carried (key
# shares, a pre-shared key, a HelloRetryRequest, resumed or not).
HELLOS=""
if [[ $HANDSHAKE == 1 && $MODE == callgrind ]]; then
  RELAY_PORT=$(free_port)
  python3 "$HERE/tls_hello.py" relay --port "$RELAY_PORT" --to "$ORIGIN_PORT" >"$TMP/hellos.txt" 2>&1 &
  PIDS+=($!)
  python3 "$HERE/bench_util.py" waitport "$RELAY_PORT" --timeout 10
  if [[ $HAPROXY == 1 ]]; then
    PROBE_PORT=$(free_port)
    tls_haproxy_config "$PROBE_PORT" "$RELAY_PORT" "$TMP/ca.pem" handshake 10s >"$TMP/probe-haproxy.cfg"
    haproxy -f "$TMP/probe-haproxy.cfg" -db >/dev/null 2>"$TMP/probe.log" &
    PROBE=$!
    PIDS+=($PROBE)
    python3 "$HERE/bench_util.py" waitport "$PROBE_PORT" --timeout 10
  else
    tls_onelayer_config "$RELAY_PORT" "$TMP/ca.pem" 0 10s >"$TMP/probe.yaml"
    "$BIN" --config "$TMP/probe.yaml" --ports-file "$TMP/probe-ports" --log-level warn >/dev/null 2>"$TMP/probe.log" &
    PROBE=$!
    PIDS+=($PROBE)
    PROBE_PORT=$(python3 "$HERE/bench_util.py" portsfile "$TMP/probe-ports" bench --timeout 10)
  fi
  for _ in 1 2 3 4; do curl -s -o /dev/null -m 60 "http://127.0.0.1:$PROBE_PORT/small.txt" || true; done
  kill "$PROBE" 2>/dev/null || true
  wait "$PROBE" 2>/dev/null || true
  sleep 1  # the relay prints a connection once both its sides have closed
  HELLOS=$(grep -v '^no ClientHello' "$TMP/hellos.txt" || true)  # waitport's connection sent none
fi

# The proxy: under callgrind, unless the origin is the one profiled.
PROXY_WRAP=(valgrind --tool=callgrind --callgrind-out-file="$OUTFILE" ${PROFILE_VALGRIND_ARGS:-})
[[ $ORIGIN_PROFILE == 1 ]] && PROXY_WRAP=()
if [[ $HAPROXY == 1 ]]; then
  PORT=$(free_port)
  tls_haproxy_config "$PORT" "$ORIGIN_PORT" "$TMP/ca.pem" "$TLS_ROW" 10s >"$TMP/haproxy.cfg"
  "${PROXY_WRAP[@]}" haproxy -f "$TMP/haproxy.cfg" -db >/dev/null 2>"$TMP/haproxy.log" &
  [[ $ORIGIN_PROFILE == 1 ]] || VG=$!
  PIDS+=($!)
  python3 "$HERE/bench_util.py" waitport "$PORT" --timeout 60
elif [[ $NGHTTPX == 1 ]]; then
  # The h2 benchmark's nghttpx: cleartext frontend, h2 backend, one worker
  # (in the main process, so one process to count), no access log.
  PORT=$(free_port)
  "${PROXY_WRAP[@]}" nghttpx --conf=/dev/null "--frontend=127.0.0.1,$PORT;no-tls" "--backend=127.0.0.1,$ORIGIN_PORT;;proto=h2" \
    -n1 --single-process --add-x-forwarded-for --errorlog-file="$TMP/nghttpx.log" >/dev/null 2>&1 &
  [[ $ORIGIN_PROFILE == 1 ]] || VG=$!
  PIDS+=($!)
  python3 "$HERE/bench_util.py" waitport "$PORT" --timeout 60
else
  "${PROXY_WRAP[@]}" "$BIN" --config "$TMP/onelayer.yaml" --ports-file "$TMP/ports" --log-level warn \
    >/dev/null 2>"$TMP/onelayer.log" &
  [[ $ORIGIN_PROFILE == 1 ]] || VG=$!
  PIDS+=($!)
  PORT=$(python3 "$HERE/bench_util.py" portsfile "$TMP/ports" bench --timeout 60)
fi
URL="http://127.0.0.1:$PORT/small.txt"
[[ $H2 == 1 ]] && URL="http://127.0.0.1:$PORT/"
# Warm-up: pools, buffers, first-use allocations; with --tls, every pooled
# connection's handshake (seconds each under callgrind), so none is counted.
load "$([[ $TLS == 1 ]] && echo 10 || echo 2)" warm >/dev/null
HANDSHAKE_LOG="$TMP/origin/handshakes.log"
if [[ $ORIGIN_PROFILE == 2 ]]; then
  sleep 2  # the origin's log buffer is flushed (flush=1s)
  LOG_FROM=$(($(wc -l <"$HANDSHAKE_LOG") + 1))
  callgrind_control -z "$VG_ORIGIN" >/dev/null
fi
callgrind_control -z "$VG" >/dev/null
WRK_OUT=$(load "$SECONDS_LOAD")
callgrind_control -d "$VG" >/dev/null
[[ $ORIGIN_PROFILE == 2 ]] && callgrind_control -d "$VG_ORIGIN" >/dev/null
REQS=$(awk '/^requests:/ {print $2}' <<<"$WRK_OUT")
DUMP=$(ls -t "$OUTFILE"* | grep -v "^$OUTFILE\$" | head -n1)
[[ -n $DUMP && -n $REQS && $REQS -gt 0 ]] || { echo "profile.sh: no dump or no requests" >&2; exit 1; }
ORIGIN_DUMP=""
if [[ $ORIGIN_PROFILE == 2 ]]; then
  ORIGIN_DUMP=$(ls -t "$ORIGIN_OUTFILE"* | grep -v "^$ORIGIN_OUTFILE\$" | head -n1)
  [[ -n $ORIGIN_DUMP ]] || { echo "profile.sh: no dump of the origin" >&2; exit 1; }
fi
# awk reads to the end (no early exit): with pipefail, callgrind_annotate
# dying of SIGPIPE would end the script here.
# The program's total of one event (Ir: instructions) in the dump.
event_total() {
  callgrind_annotate --show="$1" "$DUMP" 2>/dev/null | awk '/PROGRAM TOTALS/ && !seen {gsub(",", "", $1); print $1; seen = 1}'
}
TOTAL=$(event_total Ir)
if [[ $ORIGIN_PROFILE == 1 ]]; then
  front=onelayer
  [[ $NGHTTPX == 1 ]] && front=nghttpx
  [[ $HAPROXY == 1 ]] && front=HAProxy
  [[ $NGHTTPX == 0 && $SINGLE_LAYER_HEADERS == off ]] && front="onelayer without single-layer headers"
  echo "profiled: the NGINX $([[ $TLS == 1 ]] && echo "TLS" || echo "h2c") origin, behind $front"
fi
echo "requests: $REQS"
echo "instructions: $TOTAL"
echo "instructions per request: $((TOTAL / REQS))"
if [[ $FLEET == 1 ]]; then
  # The budget must have been fleet-wide (synced) for the count to mean it.
  ADMIN=$(python3 "$HERE/bench_util.py" portsfile "$TMP/ports" admin --timeout 5)
  FLEET_VIEW=$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=30).read().decode(), end="")' \
    "http://127.0.0.1:$ADMIN/fleet")
  echo "fleet (GET /fleet after the load):"
  sed 's/^/  /' <<<"$FLEET_VIEW"
  grep -q '^origin  *synced ' <<<"$FLEET_VIEW" || echo "profile.sh: warning: the fleet budget was not synced with Redis" >&2
fi
echo
# Every function's self cost as "instructions name", thread entry points
# (which hold everything) left out.
self_costs() {  # [EVENT (default Ir)] [ITS PROGRAM TOTAL (default TOTAL)]
  callgrind_annotate --auto=no --threshold=100 --show="${1:-Ir}" --sort="${1:-Ir}" "$DUMP" 2>/dev/null |
    awk -v total="${2:-$TOTAL}" '
      /PROGRAM TOTALS/ { next }
      /^ *[0-9,]+ +\( *[0-9.]+%\) / {
        ir = $1; gsub(",", "", ir); ir += 0
        if (ir >= 0.95 * total) next
        name = $0; sub(/^ *[0-9,]+ +\([^)]*\) +/, "", name)
        print ir, name
      }'
}
# self_costs' lines summed by library, per request.
by_library() {  # [1: the dump is the origin's]
  awk -v reqs="$REQS" -v origin="${1:-$((ORIGIN_PROFILE == 1))}" -v haproxy="$HAPROXY" '
    {
      lib = origin == 1 ? "other" : haproxy == 1 ? "haproxy" : "onelayer"
      if ($0 ~ /libnghttp2/) lib = "nghttp2"
      else if ($0 ~ /mimalloc/) lib = "mimalloc"
      else if ($0 ~ /jemalloc/) lib = "jemalloc"
      else if ($0 ~ /libc\.so/) lib = "libc"
      else if ($0 ~ /libstdc\+\+/) lib = "libstdc++"
      else if ($0 ~ /libuv/) lib = "libuv"
      else if ($0 ~ /libssl|libcrypto/) lib = "openssl"
      else if ($0 ~ /libev\.so/) lib = "libev"
      else if ($0 ~ /nghttpx/) lib = "nghttpx"
      else if ($0 ~ /\/nginx\]|ngx_/) lib = "nginx"
      by[lib] += $1
    }
    END { for (l in by) printf "%8.0f  %s\n", by[l] / reqs, l }' | sort -rn
}
echo "instructions per request by library (self cost):"
# Behind --origin, what is neither NGINX nor a library named is "other"
# (the loader, modules): onelayer is not in that process.
self_costs | by_library
echo
echo "top $TOP functions by self cost (instructions per request, share):"
top_functions() {  # N
  self_costs | awk -v reqs="$REQS" -v total="$TOTAL" '
    { ir = $1; name = $0; sub(/^[0-9]+ /, "", name); printf "%8.0f  %5.1f%%  %s\n", ir / reqs, 100 * ir / total, name }' |
    sort -rn | awk -v n="$1" 'NR <= n'  # reads to the end: head would end sort with SIGPIPE, and pipefail the script
}
top_functions "$TOP"
# With PROFILE_VALGRIND_ARGS=--cache-sim=yes: callgrind's simulated misses
# of this machine's first-level caches, and the instruction cache's by
# library (how much code a request runs through, and how often again).
if grep -q '^events:.* I1mr' "$DUMP"; then
  I1=$(event_total I1mr) D1R=$(event_total D1mr) D1W=$(event_total D1mw)
  echo
  echo "simulated first-level cache misses per request: instructions $((I1 / REQS)), data reads $((D1R / REQS)), data writes $((D1W / REQS))"
  echo "instruction cache misses per request by library (self cost):"
  self_costs I1mr "$I1" | by_library
fi
if [[ ${PROFILE_KEEP:-0} == 1 ]]; then cp "$DUMP" "$TMP/callgrind.last"; echo "dump: $TMP/callgrind.last"; fi
if [[ $ORIGIN_PROFILE == 2 ]]; then
  # The origin's side of the same requests (one handshake each).
  DUMP=$ORIGIN_DUMP
  TOTAL=$(event_total Ir)
  echo
  echo "the origin (NGINX, one worker, under callgrind too): instructions per request: $((TOTAL / REQS))"
  echo "by library (self cost):"
  self_costs | by_library 1
  echo "top 15 functions by self cost:"
  top_functions 15
  sleep 2  # the log buffer is flushed (flush=1s)
  echo
  echo "the origin's handshakes during the load (\$ssl_session_reused, \$ssl_curve):"
  tail -n +"$LOG_FROM" "$HANDSHAKE_LOG" | awk '
    { n++; if ($1 == "r") r++; curve[$2]++ }
    END { printf "  %d, resumed %d (%.1f%%); groups:", n, r, n ? 100 * r / n : 0; for (c in curve) printf " %s %d", c, curve[c]; print "" }'
  echo "the first handshakes, one request at a time (tests/bench/tls_hello.py between the proxy and the origin):"
  sed 's/^/  /' <<<"${HELLOS:-(none seen)}"
  if [[ ${PROFILE_KEEP:-0} == 1 ]]; then cp "$DUMP" "$TMP/origin.callgrind.last"; echo "origin dump: $TMP/origin.callgrind.last"; fi
fi
