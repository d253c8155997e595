# Sourced by the benchmark tools (profile.sh, wakeups.sh): a temporary
# directory ($TMP) and the background processes started for the run
# ($PIDS: add each one's pid), both cleaned up when the script exits,
# unless the environment variable named by the second argument is 1,
# which keeps the directory.
scratch_start() {  # NAME KEEP_VARIABLE
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/onelayer-$1.XXXXXX")
  chmod 755 "$TMP"
  PIDS=()
  SCRATCH_KEEP_VARIABLE=$2
  trap scratch_cleanup EXIT
}

scratch_cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ ${!SCRATCH_KEEP_VARIABLE:-0} == 1 ]]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
}
