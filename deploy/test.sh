#!/usr/bin/env bash
# One command: installs what is missing, builds, and runs every test.
#   1. the whole unit + integration suite under AddressSanitizer and
#      UndefinedBehaviorSanitizer (build-asan/), with a 20-second HTTP/2 soak;
#   2. every libFuzzer target for a bounded time (FUZZ_SECONDS, default 30);
#   3. the whole suite on the release build (build/), plus the benchmark and
#      soak smoke runs and the container image test; its ctest summary
#      closes the output.
# ONELAYER_QUICK=1 skips stages 1 and 2 (for a fast local loop).
# Both builds are configured here with the tests on, whatever configured the
# directory before (deploy/run-demo.sh turns them off in build/), and ctest
# fails when it finds no test. A skipped test shows as skipped in ctest's
# summary; with CI=true it fails the run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# "all": the ctest run includes the benchmark smoke test (wrk, nginx, haproxy, gnuplot).
bash "$root/deploy/install-deps.sh" all
jobs="$(nproc)"

if [ "${ONELAYER_QUICK:-0}" != 1 ]; then
  echo "== stage 1: unit + integration tests under ASan + UBSan"
  BUILD_DIR="$root/build-asan" BUILD_TYPE=Debug bash "$root/deploy/build.sh" -DONELAYER_SANITIZE=ON -DONELAYER_TESTS=ON
  (cd "$root/build-asan" &&
   ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1" \
   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
   ctest --output-on-failure --no-tests=error -j"$jobs" -LE "nosan|bench|soak|container")

  echo "== stage 2: fuzzers (${FUZZ_SECONDS:-30} s each)"
  bash "$root/tests/fuzz/run-fuzzers.sh"
fi

echo "== stage 3: unit + integration + smoke tests on the release build"
export BUILD_DIR="${BUILD_DIR:-$root/build}"
bash "$root/deploy/build.sh" -DONELAYER_TESTS=ON -DONELAYER_SANITIZE=OFF
cd "$BUILD_DIR"
ctest --output-on-failure --no-tests=error -j"$jobs" "$@"
