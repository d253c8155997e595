# Sourced by tests/bench/tls.sh and tests/bench/profile.sh (--tls): the TLS
# rows' certificates and proxy configs, so that the profile measures the
# very path the benchmark runs.

# tls_certs DIR: a P-256 CA (ca.pem, ca.key) and an origin certificate for
# origin.test it signed (origin.pem, origin.key), made with the openssl CLI.
tls_certs() {
  local dir=$1
  ossl() { openssl "$@" >/dev/null 2>&1; }
  ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$dir/ca.key" -out "$dir/ca.pem" -days 2 -subj "/CN=bench CA"
  ossl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$dir/origin.key" -out "$dir/origin.csr" -subj "/CN=origin.test"
  printf 'subjectAltName=DNS:origin.test\nextendedKeyUsage=serverAuth\n' >"$dir/origin.ext"
  ossl x509 -req -in "$dir/origin.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -out "$dir/origin.pem" -days 2 -extfile "$dir/origin.ext"
}

# tls_onelayer_config ORIGIN_PORT CA_FILE MAX_IDLE [CONNECT_TIMEOUT]: onelayer
# verifying the origin, no access log (as the peers run), reuse: always (as
# HAProxy's http-reuse always and NGINX's keepalive pool).
tls_onelayer_config() {
  cat <<EOF
layer_id: bench
admin: { listen: 127.0.0.1:0 }
listeners:
  - name: bench
    listen: 127.0.0.1:0
    access_log: false
    routes: [{ name: all, upstream: origin }]
upstreams:
  - name: origin
    endpoints: ["127.0.0.1:$1"]
    connect_timeout: ${4:-1s}
    reuse: always
    pool: { max_idle: $3 }
    tls: { sni: origin.test, ca_file: $2 }
EOF
}

# tls_haproxy_config PORT ORIGIN_PORT CA_FILE MODE [CONNECT_TIMEOUT]: HAProxy
# with one thread verifying the origin; MODE keepalive (http-reuse always)
# or handshake (http-reuse never, a new connection per request).
tls_haproxy_config() {
  local reuse=always close=""
  [[ $4 == handshake ]] && { reuse=never; close="option http-server-close"; }
  cat <<EOF
global
  nbthread 1
  maxconn 4096
defaults
  mode http
  timeout connect ${5:-1s}
  timeout client 60s
  timeout server 15s
  timeout http-keep-alive 60s
  http-reuse $reuse
  option forwardfor
frontend fe
  bind 127.0.0.1:$1
  default_backend be
backend be
  $close
  server origin 127.0.0.1:$2 ssl verify required ca-file $3 sni str(origin.test) verifyhost origin.test
EOF
}
