# The h2 phase of tests/bench/run.sh (sourced by it: it uses run.sh's
# start_bg, stop_bg, wait_ready, free_port, note, fail, log, has, start_nginx,
# start_haproxy, launch_onelayer, PORT_OF, PID_OF, TMP, RESULTS, PY, UTIL, ONELAYER_BIN).
#
# h2load, 16 connections x 32 streams of 64-byte POSTs, through onelayer,
# HAProxy, NGINX and nghttpx (each 1 worker/thread, HTTP/2 cleartext on both
# sides) to one NGINX h2c origin that answers "ok", plus h2load straight to
# the origin; then the memory each proxy spends per idle h2c connection.
# A proxy that cannot be set up gets a row saying why, never a figure.

H2_TOOLS="$HERE/h2_tools.py"

# The origin: NGINX, h2c with prior knowledge only, "ok" to every request
# once its body is read. The echo module reads it: `return 200` answers at
# once and then resets the stream (RST_STREAM NO_ERROR) to refuse the unread
# body, and NGINX's grpc_pass, reusing the connection, takes that reset for a
# frame on an unknown stream and answers 502.
H2_ECHO_MODULE=/usr/lib/nginx/modules/ngx_http_echo_module.so
start_h2_origin() {  # NAME PORT
  start_nginx "$1" "$2" "load_module $H2_ECHO_MODULE;" <<EOF
  server {
    listen 127.0.0.1:$2 http2 backlog=4096;
    location / { echo_read_request_body; echo -n "ok"; }
  }
EOF
}

# HAProxy is run.sh's start_haproxy (the settings of the HTTP/1 rows, retries
# included) with proto h2 on the bind and on the server line.

# NGINX: an http2 listener and grpc_pass, its only module that speaks
# HTTP/2 to an upstream (it forwards plain HTTP/2 requests as well). It
# sends one request at a time on each upstream connection; keepalive 64
# keeps them open.
start_h2_nginx() {  # NAME PORT UPSTREAM_PORT
  start_nginx "$1" "$2" <<EOF
  upstream origin {
    server 127.0.0.1:$3;
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:$2 http2 backlog=4096;
    location / {
      grpc_pass grpc://origin;
      grpc_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    }
  }
EOF
}

# nghttpx (nghttp2's proxy): cleartext frontend, h2 backend, 1 worker, no
# access log, no config file; it appends to X-Forwarded-For, as onelayer
# and the other proxies here do.
start_h2_nghttpx() {  # NAME PORT UPSTREAM_PORT
  local name=$1 port=$2 up=$3 dir="$TMP/$1"
  mkdir -p "$dir"
  start_bg "$name" nghttpx --conf=/dev/null "--frontend=127.0.0.1,$port;no-tls" \
    "--backend=127.0.0.1,$up;;proto=h2" -n1 --add-x-forwarded-for --pid-file="$dir/nghttpx.pid" \
    --errorlog-file="$TMP/logs/$name.err"
  PORT_OF[$name]=$port
  wait_ready "$name" "$port"
}

# onelayer: the benchmark's config with an h2c listener and an h2c upstream.
# Returns 2 when onelayer refuses that config (a build without HTTP/2): the
# reason is in $TMP/NAME/unavailable.
start_h2_onelayer() {  # NAME UPSTREAM_PORT [SINGLE_LAYER_HEADERS: on (default) | off] [BINARY]
  local name=$1 up=$2 headers=${3:-on} bin=${4:-$ONELAYER_BIN} dir="$TMP/$1"
  mkdir -p "$dir"
  "$PY" "$UTIL" onelayer-config --upstream-port "$up" --layer bench --workers "$ONELAYER_WORKERS" \
    --max-connections $((NOFILE - 200)) --listener-protocols http1,h2c --upstream-protocol h2c \
    --access-log "${BENCH_ACCESS_LOG:-off}" --single-layer-headers "$headers" \
    >"$dir/onelayer.yaml"
  if ! "$bin" --check --config "$dir/onelayer.yaml" >"$dir/check.log" 2>&1; then
    grep -v '^$' "$dir/check.log" | head -n 3 | sed 's/^[^ ]*yaml:[0-9:]* //' | awk 'NR > 1 { printf "; " } { printf "%s", $0 }' >"$dir/unavailable"
    return 2
  fi
  launch_onelayer "$name" "$bin"
}

h2_unavailable() {  # PHASE TARGET REASON
  "$PY" "$H2_TOOLS" unavailable --phase "$1" --target "$2" --reason "$3" >>"$RESULTS"
}

# Starts every proxy in H2_PROXIES in front of the h2 origin, checks each
# with one POST, and lists the ones that serve in H2_UP. A proxy that does
# not start or answer is a failure of the run; onelayer refusing the h2c
# config is not (it is reported as not available).
start_h2_proxies() {
  local kind rc reason
  H2_UP=""
  for kind in ${H2_PROXIES//,/ }; do
    rc=0
    case "$kind" in
      onelayer) start_h2_onelayer h2-onelayer "${PORT_OF[h2-origin]}" || rc=$? ;;
      # The same route without the headers that tell inner hops about its
      # retries: what they cost (a row of its own, not in the targets).
      onelayer-plain) start_h2_onelayer h2-onelayer-plain "${PORT_OF[h2-origin]}" off || rc=$? ;;
      # Another build (BENCH_H2_OTHER_BIN) on onelayer's config: a row of its own.
      onelayer-other) start_h2_onelayer h2-onelayer-other "${PORT_OF[h2-origin]}" on "$BENCH_H2_OTHER_BIN" || rc=$? ;;
      haproxy) start_haproxy h2-haproxy "$(free_port)" "${PORT_OF[h2-origin]}" h2 || rc=$? ;;
      nginx) start_h2_nginx h2-nginx "$(free_port)" "${PORT_OF[h2-origin]}" || rc=$? ;;
      nghttpx) start_h2_nghttpx h2-nghttpx "$(free_port)" "${PORT_OF[h2-origin]}" || rc=$? ;;
    esac
    if [[ $rc == 2 ]]; then
      reason="onelayer refused the h2c config: $(cat "$TMP/h2-$kind/unavailable")"
      if [[ ${H2_UNAVAILABLE_NOTED:-0} != 1 ]]; then
        # BENCH_H2_ONELAYER=required (the CI smoke run): a build that must speak HTTP/2.
        if [[ ${BENCH_H2_ONELAYER:-optional} == required ]]; then fail "h2: $reason"; else note "h2: $reason"; fi
      fi
      H2_UNAVAILABLE_NOTED=1
      H2_ONELAYER_REASON=$reason
      continue
    fi
    if [[ $rc != 0 ]] || ! "$PY" "$H2_TOOLS" probe --url "http://127.0.0.1:${PORT_OF[h2-$kind]}/" --body "$TMP/h2-body.bin"; then
      fail "h2: $kind does not serve HTTP/2"
      H2_BROKEN+=("$kind")
      stop_bg "h2-$kind"
      continue
    fi
    H2_UP+="${H2_UP:+,}$kind"
  done
}

# BENCH_H2_PLACEMENT: every thread of a process tree onto one CPU, checked.
pin_tree() {  # NAME ROOT_PID CPU
  local pid t
  for pid in $("$PY" "$UTIL" tree "$2"); do
    taskset -a -p -c "$3" "$pid" >/dev/null 2>&1 || { fail "h2: could not pin $1 ($pid) to CPU $3"; return; }
    for t in /proc/"$pid"/task/*; do
      [[ $(awk '/^Cpus_allowed_list/ {print $2}' "$t/status" 2>/dev/null) == "$3" ]] \
        || { fail "h2: $1 thread ${t##*/} is not on CPU $3 after pinning"; return; }
    done
  done
}

# The placement's pins: the origin, then every proxy that serves (h2load is
# started on its CPU by run_h2_phase).
pin_h2_placement() {
  local kind
  [[ -n ${H2_PLACEMENT:-} ]] || return 0
  log "h2: placement $H2_PLACEMENT: proxy on CPU $H2_PROXY_CPU, origin on CPU $H2_ORIGIN_CPU, h2load on CPU $H2_CLIENT_CPU"
  pin_tree h2-origin "${PID_OF[h2-origin]}" "$H2_ORIGIN_CPU"
  for kind in ${H2_UP//,/ }; do pin_tree "h2-$kind" "${PID_OF[h2-$kind]}" "$H2_PROXY_CPU"; done
}

stop_h2_proxies() {
  local kind
  for kind in ${H2_UP//,/ }; do stop_bg "h2-$kind"; done
}

run_h2_phase() {
  local kind t r
  H2_BROKEN=()
  [[ -f $H2_ECHO_MODULE ]] || { fail "h2: $H2_ECHO_MODULE not found (Debian libnginx-mod-http-echo)"; return; }
  head -c 64 /dev/zero | tr '\0' 'p' >"$TMP/h2-body.bin"
  start_h2_origin h2-origin "$(free_port)"
  PORT_OF[h2-direct]=${PORT_OF[h2-origin]}
  "$PY" "$H2_TOOLS" probe --url "http://127.0.0.1:${PORT_OF[h2-origin]}/" --body "$TMP/h2-body.bin" \
    || { fail "h2: the NGINX h2c origin does not answer"; return; }

  # Memory first, on processes that have served nothing but one probe.
  start_h2_proxies
  for kind in ${H2_UP//,/ }; do
    log "h2 memory: $kind, $H2_IDLE_N idle h2c connections"
    timeout 120 "$PY" "$H2_TOOLS" idle --port "${PORT_OF[h2-$kind]}" --pid "${PID_OF[h2-$kind]}" \
      --target "$kind" --n "$H2_IDLE_N" >>"$RESULTS" || fail "h2 memory test for $kind"
  done
  stop_h2_proxies

  # Fresh processes for the load: the idle test leaves its heap behind.
  start_h2_proxies
  pin_h2_placement
  local client_pin=()
  [[ -n ${H2_PLACEMENT:-} ]] && client_pin=(taskset -c "$H2_CLIENT_CPU")
  local targets=""
  has "$H2_TARGETS" direct && targets=direct
  for kind in ${H2_UP//,/ }; do targets+="${targets:+,}$kind"; done
  for t in ${H2_PROXIES//,/ }; do
    if [[ $t == onelayer* && -n ${H2_ONELAYER_REASON:-} ]]; then
      h2_unavailable h2 "$t" "$H2_ONELAYER_REASON"
      h2_unavailable h2mem "$t" "$H2_ONELAYER_REASON"
    elif [[ " ${H2_BROKEN[*]} " == *" $t "* ]]; then
      h2_unavailable h2 "$t" "did not serve HTTP/2 (see the run's log)"
    fi
  done
  for t in ${targets//,/ }; do  # warm-up, not recorded
    "${client_pin[@]}" h2load -c"$H2_CONNS" -m"$H2_STREAMS" -n "$H2_WARMUP_REQUESTS" -d "$TMP/h2-body.bin" \
      "http://127.0.0.1:${PORT_OF[h2-$t]}/" >/dev/null 2>&1 || true
  done
  for r in $(seq "$H2_ROUNDS"); do
    for t in ${targets//,/ }; do  # interleaved: drift hits every target alike
      log "h2: round $r/$H2_ROUNDS $t ($H2_REQUESTS requests)"
      "${client_pin[@]}" "$PY" "$H2_TOOLS" h2load --url "http://127.0.0.1:${PORT_OF[h2-$t]}/" --target "$t" --round "$r" \
        --body "$TMP/h2-body.bin" --connections "$H2_CONNS" --streams "$H2_STREAMS" \
        --requests "$H2_REQUESTS" --max-seconds "$H2_MAX_SECONDS" \
        --pid "${PID_OF[h2-$t]:-0}" --origin-pid "${PID_OF[h2-origin]}" \
        --raw "$TMP/raw/h2load-$t-$r.txt" >>"$RESULTS" || fail "h2load for $t round $r"
    done
  done
  stop_h2_proxies
  stop_bg h2-origin
}
