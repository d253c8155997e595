#!/usr/bin/env bash
# The training run of a profile-guided build (deploy/build.sh with
# BUILD_PGO=1): drives an instrumented onelayer through the paths requests
# take, so that the second build lays out and inlines the code for them.
#
#   1. HTTP/2: an NGINX h2c origin answering "ok", onelayer with an h2c
#      listener and an h2c upstream (the HTTP/2 benchmark's config), and
#      h2load sending 64-byte POSTs, 16 connections x 32 streams;
#   2. HTTP/1.1: an NGINX origin serving a 100-byte file, onelayer with the
#      HTTP/1.1 benchmark's config and its access log on, and wrk.
#
# Each onelayer is stopped with SIGTERM and waited for: the instrumented
# binary writes its profile when it exits, and the profiles of the two runs
# add up. Everything is on 127.0.0.1 (ports chosen free, read back) and
# stops by itself.
#
# Usage: deploy/pgo-train.sh INSTRUMENTED_ONELAYER
# Environment: PGO_TRAIN_REQUESTS (HTTP/2 requests, default 100000),
#              PGO_TRAIN_SECONDS (HTTP/1.1 load, default 3).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
util="$root/tests/bench/bench_util.py"
bin=${1:?usage: deploy/pgo-train.sh INSTRUMENTED_ONELAYER}
[[ $bin == /* ]] || bin=$PWD/$bin
requests=${PGO_TRAIN_REQUESTS:-100000}
seconds=${PGO_TRAIN_SECONDS:-3}
echo_module=/usr/lib/nginx/modules/ngx_http_echo_module.so
for tool in nginx h2load wrk python3; do
  command -v "$tool" >/dev/null ||
    { echo "pgo-train: $tool not found (deploy/install-deps.sh test installs what a profile-guided build needs)" >&2; exit 1; }
done
[[ -f $echo_module ]] || { echo "pgo-train: $echo_module not found (Debian libnginx-mod-http-echo)" >&2; exit 1; }
[[ -x $bin ]] || { echo "pgo-train: $bin is not executable" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/onelayer-pgo.XXXXXX")
chmod 755 "$tmp"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

. "$root/tests/bench/origin_conf.sh"
start_origin() {  # NAME PORT MODULE SERVER
  local dir="$tmp/$1"
  write_origin_conf "$dir" "$3" "$4"
  nginx -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" &
  pids+=($!)
  python3 "$util" waitport "$2" --timeout 10
}

# Runs the instrumented onelayer on a config, lets `load` drive it, then
# stops it and waits until it has exited (and so written its profile).
train() {  # NAME LOAD_FUNCTION
  local name=$1 load=$2 pid port
  "$bin" --config "$tmp/$name.yaml" --ports-file "$tmp/$name.ports" --log-level warn \
    >"$tmp/$name.access.log" 2>"$tmp/$name.log" &
  pid=$!
  pids+=($pid)
  port=$(python3 "$util" portsfile "$tmp/$name.ports" bench --timeout 30)
  "$load" "$port"
  kill -TERM "$pid"
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    ((waited++ < 300)) || { echo "pgo-train: onelayer ($name) did not exit within 30 s of SIGTERM" >&2; exit 1; }
    sleep 0.1
  done
  wait "$pid" || { echo "pgo-train: onelayer ($name) exited with an error:" >&2; tail -n 5 "$tmp/$name.log" >&2; exit 1; }
}

h2_load() {  # PORT
  local out
  out=$(timeout 300 h2load -c16 -m32 -n "$requests" -d "$tmp/body.bin" "http://127.0.0.1:$1/")
  grep -q " $requests succeeded" <<<"$out" ||
    { echo "pgo-train: not every HTTP/2 request succeeded:" >&2; grep requests: <<<"$out" >&2; exit 1; }
  echo "pgo-train: HTTP/2, $requests requests"
}

h1_load() {  # PORT
  local out
  out=$(timeout $((seconds + 30)) wrk -t1 -c64 -d"${seconds}s" "http://127.0.0.1:$1/small.txt")
  ! grep -q "Non-2xx" <<<"$out" || { echo "pgo-train: non-2xx HTTP/1.1 answers:" >&2; echo "$out" >&2; exit 1; }
  echo "pgo-train: HTTP/1.1, $(awk '/requests in/ {print $1}' <<<"$out") requests"
}

read -r h2_port h1_port < <(python3 "$util" freeports 2 | xargs)
mkdir -p "$tmp/www"
head -c 100 /dev/zero | tr '\0' 'x' >"$tmp/www/small.txt"
head -c 64 /dev/zero | tr '\0' 'p' >"$tmp/body.bin"
start_origin h2-origin "$h2_port" "load_module $echo_module;" \
  "server { listen 127.0.0.1:$h2_port http2 backlog=4096; location / { echo_read_request_body; echo -n \"ok\"; } }"
start_origin h1-origin "$h1_port" "" "server { listen 127.0.0.1:$h1_port; root $tmp/www; }"

python3 "$util" onelayer-config --upstream-port "$h2_port" --layer pgo --listener-protocols http1,h2c \
  --upstream-protocol h2c --access-log off >"$tmp/h2.yaml"
python3 "$util" onelayer-config --upstream-port "$h1_port" --layer pgo --access-log on >"$tmp/h1.yaml"
train h2 h2_load
train h1 h1_load
