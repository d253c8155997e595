#!/usr/bin/env bash
# TLS rows of the benchmark: onelayer, HAProxy and NGINX in front of the same
# NGINX TLS origin, with the same certificates (a CA and an origin
# certificate made here with the openssl CLI, verified by every proxy) and
# the same cipher suite (the origin allows only TLS_AES_128_GCM_SHA256 with
# X25519). Clients speak cleartext HTTP to the proxies; each proxy
# originates TLS to the origin and appends the client's address to
# X-Forwarded-For, as onelayer does by default.
#
#   keep-alive: wrk through each proxy, the proxy pooling its TLS
#               connections to the origin (req/s).
#   handshakes: every request on a new TLS connection to the origin (no
#               upstream keep-alive; session resumption allowed, as each
#               proxy does by default), so req/s = handshakes/s.
#
# Usage: tests/bench/tls.sh [--quick] [--out DIR]   (see docs/benchmarks.md)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-python3}
UTIL="$HERE/bench_util.py"
QUICK=0 OUT="$HERE/results"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --out) OUT=$2; shift ;;
    *) echo "tls.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
DURATION=${BENCH_DURATION:-$([[ $QUICK == 1 ]] && echo 2 || echo 10)}
ROUNDS=${BENCH_ROUNDS:-$([[ $QUICK == 1 ]] && echo 1 || echo 3)}
CONNS=${BENCH_CONNS:-64}
ONELAYER_BIN=${ONELAYER_BIN:-${BUILD_DIR:-$REPO/build}/onelayer}
# The script works in $TMP: a path relative to where it was started would not be found there.
[[ $ONELAYER_BIN == /* ]] || ONELAYER_BIN=$PWD/$ONELAYER_BIN
for tool in wrk nginx haproxy openssl curl "$PY"; do
  command -v "$tool" >/dev/null || { echo "tls.sh: $tool not found" >&2; exit 1; }
done
[[ -x $ONELAYER_BIN ]] || { echo "tls.sh: $ONELAYER_BIN is not executable" >&2; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/onelayer-tlsbench.XXXXXX")
# Every process started is listed here, one pid a line: the proxies start
# inside $(...) (their port is the output), a subshell whose variables the
# exit trap would never see.
PID_FILE="$TMP/pids"
cleanup() {
  local p all=()
  [[ -f $PID_FILE ]] && mapfile -t all <"$PID_FILE"
  for p in "${all[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${all[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
log() { printf '[tls-bench %s] %s\n' "$(date +%T)" "$*" >&2; }
free_port() { "$PY" "$UTIL" freeports 1; }
wait_port() {
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "tls.sh: nothing listens on $1" >&2; return 1
}
start_bg() { local name=$1; shift; "$@" >"$TMP/$name.log" 2>&1 & echo $! >>"$PID_FILE"; }

# ---------------------------------------------------------------- certificates
cd "$TMP"
. "$HERE/tls_conf.sh"
tls_certs "$TMP"
head -c 100 /dev/zero | tr '\0' 'x' >small.txt
NGINX_USER=""; [[ $EUID == 0 ]] && NGINX_USER="user root;"

# ---------------------------------------------------------------- the origin
ORIGIN=$(free_port)
mkdir -p origin/tmp
cat >origin/nginx.conf <<EOF
$NGINX_USER
daemon off; master_process on; worker_processes 1; pid $TMP/origin/nginx.pid;
error_log $TMP/origin/error.log warn;
events { worker_connections 4096; }
http {
  client_body_temp_path $TMP/origin/tmp; proxy_temp_path $TMP/origin/tmp;
  fastcgi_temp_path $TMP/origin/tmp; uwsgi_temp_path $TMP/origin/tmp; scgi_temp_path $TMP/origin/tmp;
  access_log off;
  keepalive_requests 1000000; keepalive_timeout 75s;
  server {
    listen 127.0.0.1:$ORIGIN ssl backlog=4096;
    ssl_certificate $TMP/origin.pem; ssl_certificate_key $TMP/origin.key;
    ssl_protocols TLSv1.3;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
    ssl_ecdh_curve X25519;
    ssl_session_cache shared:s:10m;
    root $TMP;
  }
}
EOF
start_bg origin nginx -p "$TMP/origin/" -c "$TMP/origin/nginx.conf" -e "$TMP/origin/error.log"
wait_port "$ORIGIN"

# ---------------------------------------------------------------- the proxies
# start_* MODE PORT: MODE keepalive (pooled TLS to the origin) or handshake
# (a new TLS connection per request).
start_onelayer() {
  local mode=$1 dir="$TMP/onelayer-$1" idle=64
  [[ $mode == handshake ]] && idle=0
  mkdir -p "$dir"
  tls_onelayer_config "$ORIGIN" "$TMP/ca.pem" "$idle" >"$dir/onelayer.yaml"
  "$ONELAYER_BIN" --config "$dir/onelayer.yaml" --ports-file "$dir/ports" --log-level warn >/dev/null 2>"$dir/log" &
  echo $! >>"$PID_FILE"
  "$PY" "$UTIL" portsfile "$dir/ports" bench --timeout 10
}

start_haproxy() {
  local mode=$1 port dir="$TMP/haproxy-$1"
  port=$(free_port)
  mkdir -p "$dir"
  tls_haproxy_config "$port" "$ORIGIN" "$TMP/ca.pem" "$mode" >"$dir/haproxy.cfg"
  start_bg "haproxy-$mode" haproxy -f "$dir/haproxy.cfg" -db
  wait_port "$port"
  echo "$port"
}

start_nginx() {
  local mode=$1 port dir="$TMP/nginx-$1" keep="keepalive 64;"
  port=$(free_port)
  mkdir -p "$dir/tmp"
  [[ $mode == handshake ]] && keep=""
  cat >"$dir/nginx.conf" <<EOF
$NGINX_USER
daemon off; master_process on; worker_processes 1; pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
  client_body_temp_path $dir/tmp; proxy_temp_path $dir/tmp;
  fastcgi_temp_path $dir/tmp; uwsgi_temp_path $dir/tmp; scgi_temp_path $dir/tmp;
  access_log off;
  keepalive_requests 1000000; keepalive_timeout 75s;
  upstream origin { server 127.0.0.1:$ORIGIN; $keep keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:$port backlog=4096;
    location / {
      proxy_pass https://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_ssl_server_name on; proxy_ssl_name origin.test;
      proxy_ssl_verify on; proxy_ssl_trusted_certificate $TMP/ca.pem;
      proxy_ssl_session_reuse on; proxy_ssl_protocols TLSv1.3;
    }
  }
}
EOF
  start_bg "nginx-$mode" nginx -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log"
  wait_port "$port"
  echo "$port"
}

declare -A PORT
for mode in keepalive handshake; do
  PORT[onelayer-$mode]=$(start_onelayer "$mode")
  PORT[haproxy-$mode]=$(start_haproxy "$mode")
  PORT[nginx-$mode]=$(start_nginx "$mode")
done
for k in "${!PORT[@]}"; do
  code=$(curl -s -o /dev/null -m 5 -w '%{http_code}' "http://127.0.0.1:${PORT[$k]}/small.txt" || true)
  [[ $code == 200 ]] || { echo "tls.sh: $k answered '$code'" >&2; cat "$TMP"/*/log 2>/dev/null | tail -5 >&2; exit 1; }
done

# ---------------------------------------------------------------- runs
RESULTS="$TMP/results.tsv"
: >"$RESULTS"
for r in $(seq "$ROUNDS"); do
  for mode in keepalive handshake; do
    for p in onelayer haproxy nginx; do  # interleaved: drift hits all alike
      log "round $r/$ROUNDS: $mode through $p"
      rps=$(wrk -t2 -c"$CONNS" -d"${DURATION}s" "http://127.0.0.1:${PORT[$p-$mode]}/small.txt" \
            | sed -n 's/^Requests\/sec:[[:space:]]*//p')
      printf '%s\t%s\t%s\n' "$mode" "$p" "${rps:-0}" >>"$RESULTS"
    done
  done
done

mkdir -p "$OUT"
"$PY" - "$RESULTS" "$OUT/tls.md" "$DURATION" "$ROUNDS" "$CONNS" <<'EOF'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines() if l]
out, duration, rounds, conns = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
med = {}
for mode, proxy, rps in rows:
    med.setdefault((mode, proxy), []).append(float(rps))
med = {k: statistics.median(v) for k, v in med.items()}
names = {"keepalive": "keep-alive over TLS to the origin (req/s)",
         "handshake": "a new TLS connection per request (handshakes/s)"}
lines = ["# TLS to the origin: onelayer, HAProxy, NGINX", "",
         "wrk -t2 -c%s, %s s x %s rounds (median); origin NGINX with TLS 1.3, "
         "TLS_AES_128_GCM_SHA256, X25519, P-256 certificate; every proxy verifies it." % (conns, duration, rounds), "",
         "| row | onelayer | HAProxy | NGINX | onelayer / HAProxy | onelayer / NGINX |", "|---|---|---|---|---|---|"]
for mode in ("keepalive", "handshake"):
    o, h, n = (med.get((mode, p), 0.0) for p in ("onelayer", "haproxy", "nginx"))
    ratio = lambda a, b: "%.2fx" % (a / b) if b else "-"
    lines.append("| %s | %.0f | %.0f | %.0f | %s | %s |" % (names[mode], o, h, n, ratio(o, h), ratio(o, n)))
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
