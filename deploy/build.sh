#!/usr/bin/env bash
# Configures and builds onelayer. BUILD_DIR (default build/) and extra CMake
# arguments can be given: deploy/build.sh -DONELAYER_SANITIZE=ON
#
# BUILD_PGO=1 makes a profile-guided build (GCC): the onelayer binary is
# built instrumented, deploy/pgo-train.sh runs it through the HTTP/2 and
# HTTP/1.1 paths against NGINX (it needs nginx, the echo module, h2load and
# wrk: deploy/install-deps.sh test), and everything is built again with
# that profile. About twice the build time; the binary is about 5% fewer
# instructions per proxied request (docs/performance.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
if [[ ${BUILD_PGO:-0} == 1 ]]; then
  profile="$build/pgo-profile"
  rm -rf "$profile"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" "$@" \
    -DONELAYER_PGO=generate -DONELAYER_PGO_DIR="$profile"
  cmake --build "$build" --target onelayer -j"$(nproc)"
  bash "$root/deploy/pgo-train.sh" "$build/onelayer"
  if [[ -z $(find "$profile" -name '*.gcda' -print -quit 2>/dev/null) ]]; then
    echo "build: the training run wrote no profile into $profile" >&2
    exit 1
  fi
  cmake -S "$root" -B "$build" "$@" -DONELAYER_PGO=use -DONELAYER_PGO_DIR="$profile"
else
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" -DONELAYER_PGO=off "$@"
fi
cmake --build "$build" -j"$(nproc)"
