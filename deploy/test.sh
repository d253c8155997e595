#!/usr/bin/env bash
# One command: installs what is missing, builds, and runs every test (ctest).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/deploy/install-deps.sh" test
export BUILD_DIR="${BUILD_DIR:-$root/build}"
bash "$root/deploy/build.sh"
cd "$BUILD_DIR"
ctest --output-on-failure -j"$(nproc)" "$@"
