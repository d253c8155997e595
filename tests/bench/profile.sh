#!/usr/bin/env bash
# Instructions per proxied request, by function, under callgrind (issue 7).
#
# Starts an NGINX origin serving the benchmark's 100-byte file and onelayer
# (the benchmark's config: 1 worker, retries on, access log to /dev/null)
# under `valgrind --tool=callgrind`, warms it up, zeroes the counters, drives
# PROFILE_SECONDS of keep-alive load with wrk (64 connections) and prints
# user-space instructions per request and the top functions. Instruction
# counts do not depend on what else the machine runs, so two builds can be
# compared on a busy machine. Everything is on 127.0.0.1 and stops by itself.
#
# Usage: tests/bench/profile.sh [ONELAYER_BIN]   (default build-rel/onelayer)
# Environment: PROFILE_SECONDS (default 5), PROFILE_TOP (default 30),
#              PROFILE_KEEP=1 keeps the temporary directory.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN=${1:-$REPO/build-rel/onelayer}
SECONDS_LOAD=${PROFILE_SECONDS:-5}
TOP=${PROFILE_TOP:-30}
for tool in valgrind callgrind_control callgrind_annotate wrk nginx python3; do
  command -v "$tool" >/dev/null || { echo "profile.sh: $tool not found" >&2; exit 1; }
done
[[ -x $BIN ]] || { echo "profile.sh: $BIN is not executable" >&2; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/onelayer-profile.XXXXXX")
chmod 755 "$TMP"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ ${PROFILE_KEEP:-0} == 1 ]] && echo "kept $TMP" >&2 || rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 "$HERE/bench_util.py" freeports 1; }
ORIGIN_PORT=$(free_port)
mkdir -p "$TMP/www" "$TMP/origin/tmp"
head -c 100 /dev/zero | tr '\0' 'x' >"$TMP/www/small.txt"
NGINX_USER=""
[[ $(id -u) == 0 ]] && NGINX_USER="user root;"
cat >"$TMP/origin/nginx.conf" <<EOF
$NGINX_USER
daemon off;
worker_processes 1;
pid $TMP/origin/nginx.pid;
error_log $TMP/origin/error.log warn;
events { worker_connections 1024; }
http {
  client_body_temp_path $TMP/origin/tmp/body;
  proxy_temp_path $TMP/origin/tmp/proxy;
  fastcgi_temp_path $TMP/origin/tmp/fastcgi;
  uwsgi_temp_path $TMP/origin/tmp/uwsgi;
  scgi_temp_path $TMP/origin/tmp/scgi;
  access_log off;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$ORIGIN_PORT; root $TMP/www; }
}
EOF
nginx -p "$TMP/origin/" -c "$TMP/origin/nginx.conf" -e "$TMP/origin/error.log" &
PIDS+=($!)
python3 "$HERE/bench_util.py" waitport "$ORIGIN_PORT" --timeout 10

python3 "$HERE/bench_util.py" onelayer-config --upstream-port "$ORIGIN_PORT" --layer profile >"$TMP/onelayer.yaml"
OUTFILE="$TMP/callgrind.out"
valgrind --tool=callgrind --callgrind-out-file="$OUTFILE" \
  "$BIN" --config "$TMP/onelayer.yaml" --ports-file "$TMP/ports" --log-level warn \
  >/dev/null 2>"$TMP/onelayer.log" &
VG=$!
PIDS+=($VG)
PORT=$(python3 "$HERE/bench_util.py" portsfile "$TMP/ports" bench --timeout 60)
URL="http://127.0.0.1:$PORT/small.txt"
timeout 60 wrk -t1 -c64 -d2s "$URL" >/dev/null   # warm-up: pools, buffers, first-use allocations
callgrind_control -z "$VG" >/dev/null
WRK_OUT=$(timeout $((SECONDS_LOAD + 30)) wrk -t1 -c64 -d"${SECONDS_LOAD}s" "$URL")
callgrind_control -d "$VG" >/dev/null
REQS=$(awk '/requests in/ {print $1}' <<<"$WRK_OUT")
NON2XX=$(awk '/Non-2xx/ {print $NF}' <<<"$WRK_OUT")
DUMP=$(ls -t "$OUTFILE"* | grep -v "^$OUTFILE\$" | head -n1)
[[ -n $DUMP && -n $REQS && $REQS -gt 0 ]] || { echo "profile.sh: no dump or no requests" >&2; exit 1; }
[[ -z $NON2XX ]] || { echo "profile.sh: $NON2XX non-2xx answers" >&2; exit 1; }
TOTAL=$(callgrind_annotate "$DUMP" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
echo "requests: $REQS"
echo "instructions: $TOTAL"
echo "instructions per request: $((TOTAL / REQS))"
echo
echo "top $TOP functions by self cost (instructions per request, share):"
callgrind_annotate --auto=no --threshold=100 "$DUMP" 2>/dev/null |
  awk -v reqs="$REQS" -v total="$TOTAL" '
    /PROGRAM TOTALS/ { next }
    /^ *[0-9,]+ +\( *[0-9.]+%\) / {
      ir = $1; gsub(",", "", ir); ir += 0
      if (ir >= 0.95 * total) next  # thread entry points
      name = $0; sub(/^ *[0-9,]+ +\([^)]*\) +/, "", name)
      printf "%8.0f  %5.1f%%  %s\n", ir / reqs, 100 * ir / total, name
    }' | sort -rn | head -n "$TOP"
if [[ ${PROFILE_KEEP:-0} == 1 ]]; then cp "$DUMP" "$TMP/callgrind.last"; echo "dump: $TMP/callgrind.last"; fi
