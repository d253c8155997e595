#!/usr/bin/env bash
# Installs every Debian 12 package onelayer needs to build, run, test and
# benchmark. Idempotent: does nothing when everything is already present.
# Used by the README commands, .ci/run and the Dockerfile's build stage.
set -euo pipefail

# libhiredis-dev: the fleet-wide retry budgets' Redis client (hiredis async on libuv).
# libmimalloc-dev: for builds with -DONELAYER_MIMALLOC=ON (the default build does not link it).
# python3: the build checks every include against proxy/packages.txt (cmake/check_layering.py).
BUILD_PKGS="build-essential cmake pkg-config python3 libuv1-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libnghttp2-dev doctest-dev node-llhttp libssl-dev libmimalloc-dev libhiredis-dev"
# podman, buildah, debootstrap: the container test builds the Dockerfile.
# haproxy, nginx-light: the inner-peer chain tests (test_inner_peers) run real ones.
# openssl, nginx-light, python3-websockets: the TLS and tunnel tests (certificates
# made at test time, NGINX as the TLS origin, a WebSocket client and origin).
# nghttp2-client, python3-h2: the HTTP/2 tests (nghttp, h2load, scripted clients and origins).
# python3-grpcio: the gRPC tests (a real gRPC server and client).
# iptables, iproute2, util-linux (setpriv): the transparent-mode tests (network
# namespaces, deploy/iptables.sh's redirect, onelayer run as another user).
# redis-server, redis-sentinel: the fleet budget tests (a real Redis and Sentinel).
TEST_PKGS="python3 curl openssl nginx-light python3-websockets nghttp2-client python3-h2 python3-grpcio clang libclang-rt-14-dev prometheus podman buildah debootstrap haproxy iptables iproute2 util-linux redis-server redis-sentinel"
# kubectl (test_deploy's kustomize cross-check): Debian's kubernetes-client,
# unless a kubectl from elsewhere is installed already (the two conflict).
command -v kubectl >/dev/null || TEST_PKGS="$TEST_PKGS kubernetes-client"
# nghttp2-proxy (nghttpx), python3-grpcio: the HTTP/2 and gRPC benchmarks (h2load, from
# nghttp2-client, is a test package already). linux-perf: tests/bench/wakeups.sh
# (a scheduler trace of the HTTP/2 load).
BENCH_PKGS="wrk libnginx-mod-http-echo gnuplot-nox valgrind strace nghttp2-proxy python3-grpcio linux-perf"

case "${1:-all}" in
  build) want="$BUILD_PKGS" ;;
  test)  want="$BUILD_PKGS $TEST_PKGS" ;;
  all)   want="$BUILD_PKGS $TEST_PKGS $BENCH_PKGS" ;;
  *) echo "usage: $0 [build|test|all]" >&2; exit 2 ;;
esac

missing=()
for p in $want; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
