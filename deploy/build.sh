#!/usr/bin/env bash
# Configures and builds onelayer. BUILD_DIR (default build/) and extra CMake
# arguments can be given: deploy/build.sh -DONELAYER_SANITIZE=ON
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" "$@"
cmake --build "$build" -j"$(nproc)"
