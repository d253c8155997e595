#!/usr/bin/env bash
# Builds onelayer's libFuzzer targets with clang (ASan + UBSan) in a build
# directory of their own and runs each one for a bounded time. Exits non-zero
# when the build fails or any target finds a crash, a sanitizer report, a
# leak, a timeout (an input that runs longer than FUZZ_UNIT_TIMEOUT) or an
# out-of-memory; the reproducer is printed (base64) and kept in the
# artifacts directory.
#
# Usage: tests/fuzz/run-fuzzers.sh [target...]      (default: every target)
# Environment:
#   FUZZ_SECONDS       seconds per target (default 30)
#   FUZZ_BUILD_DIR     build directory (default <repo>/build-fuzz)
#   FUZZ_JOBS          parallel build jobs (default 2)
#   FUZZ_UNIT_TIMEOUT  seconds one input may take (default 20)
#   FUZZ_RSS_MB        memory limit per target (default 2048)
#
# fuzz_request also takes every request of tests/corpora/http1-requests as a
# seed; a missing corpus directory is an error.
#
# Reproduce a failure: <build>/tests/fuzz/<target> <artifact file>
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
seconds="${FUZZ_SECONDS:-30}"
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${FUZZ_JOBS:-2}"
unit_timeout="${FUZZ_UNIT_TIMEOUT:-20}"
rss_mb="${FUZZ_RSS_MB:-2048}"
corpus_http1="$root/tests/corpora/http1-requests"
all_targets=(fuzz_request fuzz_response fuzz_config fuzz_retry_after fuzz_baggage fuzz_h2 fuzz_h2_client fuzz_hpack_decoder)

if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  targets=("${all_targets[@]}")
fi
for t in "${targets[@]}"; do
  case " ${all_targets[*]} " in
    *" $t "*) ;;
    *) echo "run-fuzzers: unknown target '$t' (known: ${all_targets[*]})" >&2; exit 2 ;;
  esac
done
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
  echo "run-fuzzers: FUZZ_SECONDS must be a positive integer, got '$seconds'" >&2
  exit 2
fi
for tool in clang clang++ cmake timeout; do
  if ! command -v "$tool" >/dev/null; then
    echo "run-fuzzers: '$tool' not found (the fuzzers need clang with libFuzzer)" >&2
    exit 1
  fi
done

echo "run-fuzzers: building in $build"
mkdir -p "$build"
cmake -S "$root" -B "$build" -DONELAYER_FUZZ=ON -DONELAYER_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >"$build/run-fuzzers.cmake.log" 2>&1 ||
  { cat "$build/run-fuzzers.cmake.log" >&2; echo "run-fuzzers: cmake configure failed" >&2; exit 1; }
cmake --build "$build" --target "${targets[@]}" -j "$jobs" >"$build/run-fuzzers.build.log" 2>&1 ||
  { tail -n 60 "$build/run-fuzzers.build.log" >&2; echo "run-fuzzers: build failed" >&2; exit 1; }

artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"

# Per target: dictionary, input size limit, extra seed directories.
dict_for() {
  case "$1" in
    fuzz_request | fuzz_response) echo "$here/http.dict" ;;
    fuzz_config) echo "$here/config.dict" ;;
    fuzz_retry_after) echo "$here/retry_after.dict" ;;
    fuzz_h2 | fuzz_h2_client) echo "$here/h2.dict" ;;
    *) echo "" ;;
  esac
}
max_len_for() {
  case "$1" in
    fuzz_request | fuzz_response) echo 16384 ;;
    fuzz_config) echo 8192 ;;
    fuzz_retry_after) echo 256 ;;
    fuzz_h2 | fuzz_h2_client) echo 70000 ;;
    *) echo 12288 ;;
  esac
}
extra_seeds_for() {
  case "$1" in
    fuzz_request) echo "$corpus_http1" ;;
    fuzz_config) echo "$root/config/examples" ;;
  esac
  return 0
}

failed=()
for t in "${targets[@]}"; do
  bin="$build/tests/fuzz/$t"
  work="$build/fuzz-corpus/$t"  # new inputs land here, never in the source tree
  mkdir -p "$work"
  rm -f "$artifacts/$t"-*
  args=(-max_total_time="$seconds" -timeout="$unit_timeout" -rss_limit_mb="$rss_mb"
        -max_len="$(max_len_for "$t")" -artifact_prefix="$artifacts/$t-" -print_final_stats=1)
  dict="$(dict_for "$t")"
  [[ -n "$dict" ]] && args+=(-dict="$dict")
  seeds=("$here/corpus/$t")
  while read -r extra; do
    [[ -n "$extra" ]] || continue
    if [[ ! -d "$extra" ]] || [[ -z "$(ls -A "$extra")" ]]; then
      echo "run-fuzzers: seed directory $extra for $t is missing or empty" >&2
      exit 1
    fi
    seeds+=("$extra")
  done < <(extra_seeds_for "$t")
  log="$build/$t.log"
  echo "run-fuzzers: $t for ${seconds}s (seeds: ${seeds[*]})"
  rc=0
  # The outer limit covers the seed pass and a stuck sanitizer report.
  ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}" \
  UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
    timeout -k 10 $((seconds + unit_timeout + 180)) "$bin" "${args[@]}" "$work" "${seeds[@]}" >"$log" 2>&1 || rc=$?
  found=$(find "$artifacts" -maxdepth 1 -name "$t-*" -type f | sort)
  if [[ $rc -ne 0 || -n "$found" ]]; then
    failed+=("$t")
    echo "run-fuzzers: $t FAILED (exit $rc$([[ $rc -eq 124 || $rc -eq 137 ]] && echo ', killed by the time limit'))" >&2
    grep -E "invariant failed|ERROR: |SUMMARY: |runtime error|fed |^--- |^H:|^=" "$log" | head -n 40 >&2 || true
    tail -n 15 "$log" >&2
    for f in $found; do
      echo "run-fuzzers: reproducer $f (base64): $(base64 -w0 "$f" | head -c 4000)" >&2
      echo "run-fuzzers: rerun with: $bin $f" >&2
    done
  else
    stats=$(grep -E "stat::number_of_executed_units" "$log" | awk '{print $2}' || true)
    echo "run-fuzzers: $t ok (${stats:-?} inputs)"
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "run-fuzzers: FAILED: ${failed[*]} (logs in $build/<target>.log, artifacts in $artifacts)" >&2
  exit 1
fi
echo "run-fuzzers: all ${#targets[@]} targets ran ${seconds}s each without a finding"
