#!/usr/bin/env bash
# onelayer benchmark suite: onelayer side by side with HAProxy and
# NGINX (and nghttpx for HTTP/2), on 127.0.0.1 only, in one command. See usage() and docs/benchmarks.md.
#
# Every process it starts is recorded and killed on exit; all files live in
# one mktemp directory; a watchdog bounds the whole run.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-python3}
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree
UTIL="$HERE/bench_util.py"
CLIENTS="$HERE/load_clients.py"

usage() {
  cat <<EOF
Usage: tests/bench/run.sh [--quick] [--out DIR] [--phases LIST] [--proxies LIST] [--keep]

  --quick          CI smoke: 2 s wrk, 1 round (both worker counts too), 500 idle
                   connections, 1 MiB body,
                   3 s storm outage at depth 3 only, h2 with 30k requests a run
                   and 200 idle h2c connections; finishes in about a minute
  --out DIR        where latest.md, latest.json and the SVG plots go
                   (default: tests/bench/results; with --quick: a temporary
                   directory whose latest.md is printed, unless --out is given)
  --phases LIST    comma list of memory,throughput,workers,large,storm,h2 (default: all)
  --proxies LIST   comma list of direct,onelayer,haproxy,nginx,nghttpx (default: all;
                   nghttpx takes part in the h2 phase only)
  --keep           keep the temporary directory (configs, logs, raw output)

Environment:
  BUILD_DIR            where to find onelayer (default: $REPO/build)
  ONELAYER_BIN         the onelayer binary (default: \$BUILD_DIR/onelayer)
  BENCH_DURATION       seconds per wrk run (default 10; quick 2)
  BENCH_ROUNDS         interleaved rounds (default 5; quick 1)
  BENCH_IDLE_CONNS     idle keep-alive connections (default 10000; quick 500)
  BENCH_STORM_OUTAGE   seconds of 503s in the retry storm (default 10; quick 3)
  BENCH_STORM_CLIENTS  concurrent storm clients (default 200)
  BENCH_STORM_DEPTHS   proxy stack depths for the storm (default "1 3"; quick "3")
  BENCH_ONELAYER_WORKERS  onelayer's workers (default 1; see docs/benchmarks.md on measuring 2)
  BENCH_H2_REQUESTS    requests per h2load run (default 300000; quick 30000)
  BENCH_H2_ROUNDS      interleaved h2 rounds (default 3; quick 1)
  BENCH_H2_IDLE_CONNS  idle h2c connections per proxy (default 500; quick 200)
  BENCH_H2_ONELAYER    optional (default): a onelayer that refuses the h2c config is
                       reported as not available; required: that fails the run
  BENCH_ACCESS_LOG     off (default, as the other proxies run) or on: onelayer's
                       access log, formatted into /dev/null
  BENCH_ONELAYER_REUSE safe or always: the upstream's reuse (default: not written,
                       so onelayer's default)
  BENCH_H2_OTHER_BIN   a second onelayer binary (another build of the same or
                       other code, e.g. a profile-guided one): the h2 phase runs
                       it as a row of its own right after onelayer, on the same
                       config, interleaved with the others (not a target)
  BENCH_H2_OTHER_LABEL what that row is called (default: other build)
  BENCH_H2_PLACEMENT   pin the h2 load's three busy processes to two CPUs (default:
                       nothing pinned): proxy+origin (the proxy and the origin
                       share one CPU, h2load has the other), proxy+client, or
                       proxy-alone (the proxy has a CPU to itself)
EOF
}

QUICK=0 KEEP=0 OUT="" PHASES="memory,throughput,workers,large,storm,h2" TARGETS="direct,onelayer,haproxy,nginx,nghttpx"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --keep) KEEP=1 ;;
    --out) OUT=$2; shift ;;
    --phases) PHASES=$2; shift ;;
    --proxies) TARGETS=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

if [[ $QUICK == 1 ]]; then
  DURATION=${BENCH_DURATION:-2} ROUNDS=${BENCH_ROUNDS:-1} IDLE_N=${BENCH_IDLE_CONNS:-500}
  OUTAGE=${BENCH_STORM_OUTAGE:-3} STORM_LEAD=0.3 STORM_TAIL=1 WARMUP=0
  STORM_DEPTHS=${BENCH_STORM_DEPTHS:-3}
  SIZES="1m" WATCHDOG=150 MODE=quick
  H2_REQUESTS=${BENCH_H2_REQUESTS:-30000} H2_ROUNDS=${BENCH_H2_ROUNDS:-1} H2_IDLE_N=${BENCH_H2_IDLE_CONNS:-200}
  H2_WARMUP_REQUESTS=5000
else
  DURATION=${BENCH_DURATION:-10} ROUNDS=${BENCH_ROUNDS:-5} IDLE_N=${BENCH_IDLE_CONNS:-10000}
  OUTAGE=${BENCH_STORM_OUTAGE:-10} STORM_LEAD=1 STORM_TAIL=5 WARMUP=2
  STORM_DEPTHS=${BENCH_STORM_DEPTHS:-1 3}
  SIZES="1m 100m" WATCHDOG=1800 MODE=full
  H2_REQUESTS=${BENCH_H2_REQUESTS:-300000} H2_ROUNDS=${BENCH_H2_ROUNDS:-3} H2_IDLE_N=${BENCH_H2_IDLE_CONNS:-500}
  H2_WARMUP_REQUESTS=50000
fi
WATCHDOG=${BENCH_WATCHDOG:-$WATCHDOG}
H2_CONNS=16 H2_STREAMS=32 H2_MAX_SECONDS=120
STORM_CLIENTS=${BENCH_STORM_CLIENTS:-200}
ONELAYER_WORKERS=${BENCH_ONELAYER_WORKERS:-1}
BUILD_DIR=${BUILD_DIR:-$REPO/build}
ONELAYER_EXPLICIT=${ONELAYER_BIN:+1}
ONELAYER_BIN=${ONELAYER_BIN:-$BUILD_DIR/onelayer}

has() { [[ ",$1," == *",$2,"* ]]; }
log() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
NOTES=()
FAILED=0
note() { NOTES+=("$*"); log "note: $*"; }
fail() { FAILED=1; note "FAILED: $*"; }

for tool in wrk nginx haproxy curl "$PY"; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool not found" >&2; exit 1; }
done
if has "$PHASES" h2; then
  command -v h2load >/dev/null || { echo "run.sh: h2load not found (Debian nghttp2-client)" >&2; exit 1; }
  if has "$TARGETS" nghttpx && ! command -v nghttpx >/dev/null; then
    echo "run.sh: nghttpx not found (Debian nghttp2-proxy)" >&2; exit 1
  fi
fi
if has "$TARGETS" onelayer && [[ ! -x $ONELAYER_BIN ]]; then
  # An explicit ONELAYER_BIN (ctest sets it) must exist; the default may not be built yet.
  [[ -n $ONELAYER_EXPLICIT ]] && { echo "run.sh: ONELAYER_BIN=$ONELAYER_BIN is not executable" >&2; exit 1; }
  note "onelayer binary not found at $ONELAYER_BIN: onelayer skipped"
  TARGETS=$(tr ',' '\n' <<<"$TARGETS" | grep -vx onelayer | paste -sd,)
fi
# nghttpx is an HTTP/2 peer only: the h2 phase takes it, the others do not.
# So is onelayer-plain (onelayer without the single-layer headers), in full
# mode, right after onelayer.
H2_TARGETS=$TARGETS
if [[ $QUICK == 0 ]] && has "$H2_TARGETS" onelayer && ! has "$H2_TARGETS" onelayer-plain; then
  H2_TARGETS=$(tr ',' '\n' <<<"$H2_TARGETS" | sed 's/^onelayer$/onelayer\nonelayer-plain/' | paste -sd,)
fi
# A second onelayer build (BENCH_H2_OTHER_BIN) right after onelayer.
if [[ -n ${BENCH_H2_OTHER_BIN:-} ]] && has "$H2_TARGETS" onelayer && ! has "$H2_TARGETS" onelayer-other; then
  [[ -x $BENCH_H2_OTHER_BIN ]] || { echo "run.sh: BENCH_H2_OTHER_BIN=$BENCH_H2_OTHER_BIN is not executable" >&2; exit 1; }
  H2_TARGETS=$(tr ',' '\n' <<<"$H2_TARGETS" | sed 's/^onelayer$/onelayer\nonelayer-other/' | paste -sd,)
fi
H2_PROXIES=$(tr ',' '\n' <<<"$H2_TARGETS" | grep -vx direct | paste -sd, || true)
# BENCH_H2_PLACEMENT: the CPUs of the proxy, the origin and h2load in the h2 load.
H2_PLACEMENT=${BENCH_H2_PLACEMENT:-}
if [[ -n $H2_PLACEMENT ]]; then
  command -v taskset >/dev/null || { echo "run.sh: BENCH_H2_PLACEMENT needs taskset (util-linux)" >&2; exit 1; }
  read -r H2_PROXY_CPU H2_ORIGIN_CPU H2_CLIENT_CPU < <("$PY" "$HERE/bench_util.py" placement "$H2_PLACEMENT") \
    || { echo "run.sh: BENCH_H2_PLACEMENT=$H2_PLACEMENT cannot be used here" >&2; exit 1; }
fi
TARGETS=$(tr ',' '\n' <<<"$TARGETS" | grep -vx nghttpx | paste -sd, || true)
PROXIES=$(tr ',' '\n' <<<"$TARGETS" | grep -vx direct | paste -sd, || true)

# 10,000 idle connections need as many descriptors in the client and in the proxy.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
if (( NOFILE < IDLE_N + 500 )); then
  note "file descriptor limit $NOFILE: idle connections lowered from $IDLE_N to $((NOFILE - 500))"
  IDLE_N=$((NOFILE - 500))
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/onelayer-bench.XXXXXX")
chmod 755 "$TMP"
mkdir -p "$TMP/logs" "$TMP/raw" "$TMP/www"
RESULTS="$TMP/results.jsonl"
: >"$RESULTS"
if [[ -z $OUT ]]; then
  if [[ $QUICK == 1 ]]; then OUT="$TMP/out"; PRINT_MD=1; else OUT="$HERE/results"; fi
fi
PRINT_MD=${PRINT_MD:-0}
mkdir -p "$OUT"

# ------------------------------------------------------------------ processes
PIDS=()
declare -A PID_OF PORT_OF
WATCHDOG_PID=""

descendants() {  # every descendant pid of $1, children first
  local c
  for c in $(pgrep -P "$1" 2>/dev/null); do
    echo "$c"
    descendants "$c"
  done
}

alive() {  # alive PID...: true while one of them runs (a zombie counts as gone)
  local p
  for p in "$@"; do
    [[ -e /proc/$p/status ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$p/status" 2>/dev/null && return 0
  done
  return 1
}

kill_tree() {  # TERM a process and its descendants, then KILL what is left after 3 s
  local pids
  if alive "$1"; then
    pids="$1 $(descendants "$1")"
    kill -TERM $pids 2>/dev/null || true
    for _ in $(seq 30); do
      alive $pids || break
      sleep 0.1
    done
    kill -KILL $pids 2>/dev/null || true
  fi
  wait "$1" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  [[ -n $WATCHDOG_PID ]] && kill_tree "$WATCHDOG_PID"
  for pid in "${PIDS[@]}"; do kill_tree "$pid"; done
  if [[ $KEEP == 1 ]]; then log "kept $TMP"; else rm -rf "$TMP"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The watchdog ends the run if anything hangs: it kills the script's other
# descendants (so a foreground client cannot delay the trap) and then the script.
(
  me=$BASHPID  # read here: inside $(...) BASHPID is that subshell's
  sleep "$WATCHDOG"
  echo "run.sh: watchdog: over ${WATCHDOG}s, stopping" >&2
  kill -TERM $(descendants $$ | grep -vx "$me") 2>/dev/null || true
  kill -TERM $$ 2>/dev/null || true
) &
WATCHDOG_PID=$!

start_bg() {  # start_bg NAME CMD...: background, logged, killed on exit
  local name=$1; shift
  "$@" >"$TMP/logs/$name.log" 2>&1 &
  PIDS+=($!)
  PID_OF[$name]=$!
}

stop_bg() {
  local name=$1 pid p keep=()
  pid=${PID_OF[$name]:-}
  [[ -n $pid ]] || return 0
  kill_tree "$pid"
  unset "PID_OF[$name]"
  # Reaped now, so the pid may be reused by an unrelated process: forget it.
  for p in "${PIDS[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}

free_port() { "$PY" "$UTIL" freeports 1; }

wait_port() {  # wait_port PORT: up to 10 s for a listener (bash's /dev/tcp: no process to start)
  local i
  for i in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

wait_ready() {  # wait_ready NAME PORT
  if ! wait_port "$2"; then
    log "$1 did not listen on port $2; its log:"
    tail -n 20 "$TMP/logs/$1.log" >&2 || true
    return 1
  fi
}

# ------------------------------------------------------------------ configs
NGINX_USER=""
[[ $EUID == 0 ]] && NGINX_USER="user root;"

write_nginx_common() {  # write_nginx_common DIR
  mkdir -p "$1/tmp"
  cat <<EOF
$NGINX_USER
daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile $NOFILE;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections $((NOFILE - 100)); }
EOF
}

write_nginx_temp_paths() {
  cat <<EOF
  client_body_temp_path $1/tmp/body;
  proxy_temp_path $1/tmp/proxy;
  fastcgi_temp_path $1/tmp/fastcgi;
  uwsgi_temp_path $1/tmp/uwsgi;
  scgi_temp_path $1/tmp/scgi;
EOF
}

# start_nginx NAME PORT [MAIN_LINE]: NGINX with 1 worker, no access log and
# keep-alive without a request cap (so no path is measured reconnecting);
# the rest of its http block comes on stdin, MAIN_LINE goes first in the file.
start_nginx() {
  local name=$1 port=$2 dir="$TMP/$1"
  mkdir -p "$dir"
  {
    [[ -z ${3:-} ]] || echo "$3"
    write_nginx_common "$dir"
    echo "http {"
    write_nginx_temp_paths "$dir"
    printf '  access_log off;\n  keepalive_requests 1000000;\n  keepalive_timeout 75s;\n'
    cat
    echo "}"
  } >"$dir/nginx.conf"
  start_bg "$name" nginx -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log"
  PORT_OF[$name]=$port
  wait_ready "$name" "$port"
}

# The origin: static files.
start_nginx_origin() {  # NAME PORT
  start_nginx "$1" "$2" <<EOF
  default_type application/octet-stream;
  sendfile on;
  tcp_nopush on;
  server {
    listen 127.0.0.1:$2 backlog=4096;
    root $TMP/www;
  }
EOF
}

# NGINX as a reverse proxy. The origin is listed three times so that
# proxy_next_upstream has peers to try (tries = min(peers, next_upstream_tries));
# max_fails=0 keeps passive health checks off, as HAProxy and onelayer have none
# configured here: the same "3 attempts, no breaker" setting for all three.
start_nginx_proxy() {  # NAME PORT UPSTREAM_PORT
  local port=$2 up=$3
  start_nginx "$1" "$2" <<EOF
  upstream origin {
    server 127.0.0.1:$up max_fails=0;
    server 127.0.0.1:$up max_fails=0;
    server 127.0.0.1:$up max_fails=0;
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:$port backlog=4096;
    location / {
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_connect_timeout 1s;
      proxy_read_timeout 15s;
      proxy_next_upstream error timeout http_503;
      proxy_next_upstream_tries 3;
    }
  }
EOF
}

# HAProxy 2.6: 1 thread, keep-alive to the origin, 2 retries on 503 or
# connection failure. maxconn is what the descriptor limit allows. PROTO
# (h2 for the h2 phase) goes on both the bind and the server line.
start_haproxy() {  # NAME PORT UPSTREAM_PORT [PROTO]
  local name=$1 port=$2 up=$3 dir="$TMP/$1"
  mkdir -p "$dir"
  "$PY" "$UTIL" haproxy-config --port "$port" --upstream-port "$up" ${4:+--proto "$4"} --nofile "$NOFILE" \
    --maxconn $(( (NOFILE - 200) / 2 > IDLE_N + 200 ? (NOFILE - 200) / 2 : IDLE_N + 200 )) >"$dir/haproxy.cfg"
  start_bg "$name" haproxy -f "$dir/haproxy.cfg" -db
  PORT_OF[$name]=$port
  wait_ready "$name" "$port"
}

# onelayer: 1 worker, retries configured (not triggered by the healthy origin),
# budget on. Binds port 0 and reports ports in --ports-file.
start_onelayer() {  # NAME UPSTREAM_PORT LAYER_ID
  local name=$1 up=$2 layer=$3 dir="$TMP/$1"
  mkdir -p "$dir"
  "$PY" "$UTIL" onelayer-config --upstream-port "$up" --layer "$layer" --workers "$ONELAYER_WORKERS" \
    --max-connections $((NOFILE - 200)) --budget-mode "${ONELAYER_BUDGET_MODE:-requests}" \
    --access-log "${BENCH_ACCESS_LOG:-off}" ${BENCH_ONELAYER_REUSE:+--reuse "$BENCH_ONELAYER_REUSE"} >"$dir/onelayer.yaml"
  launch_onelayer "$name"
}

# launch_onelayer NAME: onelayer with $TMP/NAME/onelayer.yaml, its port read
# from its ports file.
launch_onelayer() {  # NAME [BINARY (default ONELAYER_BIN)]
  local name=$1 bin=${2:-$ONELAYER_BIN} dir="$TMP/$1" port
  rm -f "$dir/ports"
  # The access log is off (--access-log off, as HAProxy's, NGINX's and
  # nghttpx's); with BENCH_ACCESS_LOG=on it goes to /dev/null: formatted, not stored.
  "$bin" --config "$dir/onelayer.yaml" --ports-file "$dir/ports" --log-level warn \
    >/dev/null 2>"$TMP/logs/$name.log" &
  PIDS+=($!)
  PID_OF[$name]=$!
  if ! port=$("$PY" "$UTIL" portsfile "$dir/ports" bench --timeout 10); then
    log "$name wrote no ports file; its log:"
    tail -n 20 "$TMP/logs/$name.log" >&2 || true
    return 1
  fi
  PORT_OF[$name]=$port
  wait_ready "$name" "$port"
}

start_proxy() {  # start_proxy KIND NAME UPSTREAM_PORT LAYER_ID
  case "$1" in
    onelayer) start_onelayer "$2" "$3" "$4" ;;
    onelayer-successes) ONELAYER_BUDGET_MODE=successes start_onelayer "$2" "$3" "$4" ;;
    haproxy) start_haproxy "$2" "$(free_port)" "$3" ;;
    nginx) start_nginx_proxy "$2" "$(free_port)" "$3" ;;
  esac
}

check_get() {  # check_get NAME URL: one GET must answer 200
  local code
  code=$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$2" || true)
  if [[ $code != 200 ]]; then
    log "$1: GET $2 answered '$code'"
    return 1
  fi
}

# ------------------------------------------------------------------ setup
LOADAVG_START=$(cut -d' ' -f1-3 /proc/loadavg)
log "mode $MODE: wrk ${DURATION}s x $ROUNDS rounds, $IDLE_N idle conns, storm ${OUTAGE}s; targets $TARGETS; tmp $TMP"
head -c 100 /dev/zero | tr '\0' 'x' >"$TMP/www/small.txt"
head -c $((1 << 20)) /dev/urandom >"$TMP/www/1m.bin"
if [[ $SIZES == *100m* ]]; then
  head -c $((100 << 20)) /dev/urandom >"$TMP/www/100m.bin"
fi

start_nginx_origin origin "$(free_port)"
ORIGIN=${PORT_OF[origin]}
PORT_OF[direct]=$ORIGIN
PID_OF[direct]=""

start_front_proxies() {
  local kind t
  for kind in ${PROXIES//,/ }; do
    start_proxy "$kind" "$kind" "$ORIGIN" bench
  done
  for t in ${TARGETS//,/ }; do
    check_get "$t" "http://127.0.0.1:${PORT_OF[$t]}/small.txt" \
      || { echo "run.sh: $t does not serve; stopping" >&2; exit 1; }
  done
}
HTTP1_PHASES=0
for p in memory throughput workers large storm; do has "$PHASES" "$p" && HTTP1_PHASES=1; done
if [[ $HTTP1_PHASES == 1 ]]; then start_front_proxies; fi

# ------------------------------------------------------------------ memory
# First, so that "RSS at start" is the RSS of a proxy that has served nothing.
if has "$PHASES" memory; then
  for kind in ${PROXIES//,/ }; do
    log "memory: $kind, $IDLE_N idle keep-alive connections"
    timeout 300 "$PY" "$CLIENTS" idle --port "${PORT_OF[$kind]}" --pid "${PID_OF[$kind]}" \
      --target "$kind" --n "$IDLE_N" >>"$RESULTS" || fail "memory test for $kind"
  done
  # Fresh processes for what follows: the idle test leaves its heap behind.
  for kind in ${PROXIES//,/ }; do stop_bg "$kind"; done
  start_front_proxies
fi

# ------------------------------------------------------------------ throughput
if has "$PHASES" throughput; then
  if (( WARMUP > 0 )); then
    for t in ${TARGETS//,/ }; do
      wrk -t2 -c64 -d"${WARMUP}s" "http://127.0.0.1:${PORT_OF[$t]}/small.txt" >/dev/null 2>&1 || true
    done
  fi
  for r in $(seq "$ROUNDS"); do
    for t in ${TARGETS//,/ }; do  # interleaved A B C D A B C D: drift hits all alike
      log "throughput: round $r/$ROUNDS $t"
      "$PY" "$UTIL" wrk --url "http://127.0.0.1:${PORT_OF[$t]}/small.txt" --target "$t" \
        --round "$r" --pid "${PID_OF[$t]:-0}" --origin-pid "${PID_OF[origin]}" \
        --duration "$DURATION" --raw "$TMP/raw/wrk-$t-$r.txt" >>"$RESULTS" \
        || fail "wrk for $t round $r"
    done
  done
fi

# ------------------------------------------------------------------ workers
# onelayer with workers: 1 and workers: 2 on the same cores, rounds
# interleaved (docs/benchmarks.md "Measuring workers: 2"): req/s, CPU per request and
# how the CPU split between the threads.
if has "$PHASES" workers && has "$TARGETS" onelayer; then
  for w in 1 2; do
    ONELAYER_WORKERS=$w start_onelayer "onelayer-w$w" "${PORT_OF[origin]}" bench || fail "onelayer with $w workers"
    if (( WARMUP > 0 )); then
      wrk -t2 -c64 -d"${WARMUP}s" "http://127.0.0.1:${PORT_OF[onelayer-w$w]}/small.txt" >/dev/null 2>&1 || true
    fi
  done
  for r in $(seq "$ROUNDS"); do
    for w in 1 2; do
      log "workers: round $r/$ROUNDS, workers: $w"
      "$PY" "$UTIL" wrk --phase workers --workers "$w" --url "http://127.0.0.1:${PORT_OF[onelayer-w$w]}/small.txt" \
        --target onelayer --round "$r" --pid "${PID_OF[onelayer-w$w]}" --origin-pid "${PID_OF[origin]}" \
        --duration "$DURATION" --raw "$TMP/raw/wrk-workers$w-$r.txt" >>"$RESULTS" \
        || fail "wrk for workers: $w round $r"
    done
  done
  for w in 1 2; do stop_bg "onelayer-w$w"; done
fi

# ------------------------------------------------------------------ large bodies
if has "$PHASES" large; then
  for size in $SIZES; do
    if [[ $size == 1m ]]; then reqs=$([[ $QUICK == 1 ]] && echo 20 || echo 200); else reqs=5; fi
    for t in ${TARGETS//,/ }; do
      log "large: $size through $t"
      timeout 120 "$PY" "$CLIENTS" body --port "${PORT_OF[$t]}" --pid "${PID_OF[$t]:-0}" \
        --target "$t" --path "/$size.bin" --size-label "$size" --requests "$reqs" \
        --max-seconds 60 >>"$RESULTS" || fail "large body $size through $t"
    done
  done
fi

# ------------------------------------------------------------------ retry storm
run_storm() {  # run_storm KIND DEPTH
  local kind=$1 depth=$2 sname="storm-$1-$2" up names=()
  mkdir -p "$TMP/$sname"
  start_bg "$sname-origin" "$PY" "$HERE/storm_origin.py" --port-file "$TMP/$sname/port" \
    --log "$TMP/$sname/arrivals.txt" --lifetime 300
  names+=("$sname-origin")
  for _ in $(seq 100); do [[ -s $TMP/$sname/port ]] && break; sleep 0.1; done
  [[ -s $TMP/$sname/port ]] || { log "storm origin did not start"; stop_bg "$sname-origin"; return 1; }
  local origin_port
  origin_port=$(cat "$TMP/$sname/port")
  up=$origin_port
  # Innermost hop first: hop N talks to the origin, hop 1 faces the clients.
  local ok=1
  for hop in $(seq "$depth" -1 1); do
    names+=("$sname-hop$hop")
    start_proxy "$kind" "$sname-hop$hop" "$up" "hop$hop" || { ok=0; break; }
    up=${PORT_OF[$sname-hop$hop]}
  done
  [[ $ok == 1 ]] && { check_get "$sname" "http://127.0.0.1:$up/storm" || ok=0; }
  if [[ $ok == 1 ]]; then
    log "storm: $kind depth $depth ($STORM_CLIENTS clients, ${OUTAGE}s of 503)"
    timeout $((OUTAGE + 60)) "$PY" "$CLIENTS" storm --port "$up" --origin-port "$origin_port" \
      --origin-log "$TMP/$sname/arrivals.txt" --target "$kind" --depth "$depth" \
      --clients "$STORM_CLIENTS" --lead "$STORM_LEAD" --outage "$OUTAGE" --tail "$STORM_TAIL" \
      --timeline "$OUT/storm-$kind-d$depth.tsv" >>"$RESULTS" || ok=0
  fi
  for n in "${names[@]}"; do stop_bg "$n"; done
  [[ $ok == 1 ]]
}

if has "$PHASES" storm; then
  # onelayer twice: the default budget (mode: requests) and mode: successes.
  storm_kinds=${PROXIES//,/ }
  [[ " $storm_kinds " == *" onelayer "* ]] && storm_kinds=${storm_kinds/onelayer/onelayer onelayer-successes}
  for kind in $storm_kinds; do
    for depth in $STORM_DEPTHS; do
      run_storm "$kind" "$depth" || fail "retry storm for $kind depth $depth"
    done
  done
fi

# ------------------------------------------------------------------ HTTP/2
if has "$PHASES" h2; then
  # shellcheck source=h2_phase.sh
  source "$HERE/h2_phase.sh"
  run_h2_phase
fi

# ------------------------------------------------------------------ report
ONELAYER_VERSION="" ONELAYER_BUILD=""
if has "$TARGETS" onelayer; then
  ONELAYER_VERSION=$("$ONELAYER_BIN" --version 2>&1 | head -n 1 || true)
  cache="$(dirname "$ONELAYER_BIN")/CMakeCache.txt"
  [[ -f $cache ]] && ONELAYER_BUILD=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$cache")
  [[ $ONELAYER_BUILD == Debug ]] && note "onelayer is a Debug build: its figures are not representative"
fi
notes_json=$(printf '%s\n' "${NOTES[@]+"${NOTES[@]}"}" | "$PY" -c 'import json,sys; print(json.dumps([l for l in sys.stdin.read().splitlines() if l]))')
report_rc=0
"$PY" "$HERE/report.py" --results "$RESULTS" --out "$OUT" \
  --set mode="$MODE" duration_s="$DURATION" rounds="$ROUNDS" idle_conns="$IDLE_N" \
        outage_s="$OUTAGE" storm_clients="$STORM_CLIENTS" nofile="$NOFILE" onelayer_workers="$ONELAYER_WORKERS" \
        onelayer_bin="$ONELAYER_BIN" onelayer_version="$ONELAYER_VERSION" onelayer_build="$ONELAYER_BUILD" \
        loadavg_start="$LOADAVG_START" h2_requests="$H2_REQUESTS" h2_rounds="$H2_ROUNDS" \
        h2_idle_conns="$H2_IDLE_N" h2_connections="$H2_CONNS" h2_streams="$H2_STREAMS" \
        h2_other_bin="${BENCH_H2_OTHER_BIN:-}" h2_other_label="${BENCH_H2_OTHER_LABEL:-other build}" \
        h2_placement="$H2_PLACEMENT" h2_placement_cpus="${H2_PROXY_CPU:-} ${H2_ORIGIN_CPU:-} ${H2_CLIENT_CPU:-}" \
  --notes "$notes_json" || report_rc=$?
log "wrote $OUT/latest.md"
[[ $PRINT_MD == 1 ]] && cat "$OUT/latest.md"
# Non-zero when a step failed or a sanity check in report.py did not hold (CI smoke).
[[ $FAILED == 0 && $report_rc == 0 ]]
