#!/usr/bin/env bash
# CI's check of the profile-guided build (deploy/build.sh with BUILD_PGO=1),
# with a short training run: the build succeeds, the training reached the
# HTTP/2 session and the exchange (their profiles exist), the second build
# read the profile, and the binary it made accepts the shipped config.
# Usage: tests/bench/pgo_build_smoke.sh BUILD_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build=${1:?usage: pgo_build_smoke.sh BUILD_DIR}
rm -rf "$build"
BUILD_DIR="$build" BUILD_PGO=1 PGO_TRAIN_REQUESTS=${PGO_TRAIN_REQUESTS:-5000} PGO_TRAIN_SECONDS=${PGO_TRAIN_SECONDS:-1} \
  bash "$root/deploy/build.sh" -DONELAYER_TESTS=OFF
for source in http2/h2_session proxy/exchange; do
  ls "$build/pgo-profile/"*"#proxy#shell#${source/\//#}.cc.gcda" >/dev/null 2>&1 ||
    { echo "pgo smoke: no profile for proxy/shell/$source.cc in $build/pgo-profile" >&2; exit 1; }
done
grep -q -- '-fprofile-use' "$build/compile_commands.json" ||
  { echo "pgo smoke: the second build was not compiled with -fprofile-use" >&2; exit 1; }
grep -q -- '-fprofile-generate' "$build/compile_commands.json" &&
  { echo "pgo smoke: the second build is still instrumented" >&2; exit 1; }
"$build/onelayer" --check --config "$root/config/onelayer.yaml"
echo "pgo smoke: profile-guided build made, trained and checked"
