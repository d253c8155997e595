#!/usr/bin/env bash
# One command: installs what is missing, builds, starts the bundled demo
# upstream on 127.0.0.1:8081 and runs onelayer on config/onelayer.yaml in
# front of it (proxy on 127.0.0.1:15001, admin on 127.0.0.1:9901).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/deploy/install-deps.sh" build
export BUILD_DIR="${BUILD_DIR:-$root/build}"
bash "$root/deploy/build.sh" -DONELAYER_TESTS=OFF
"$BUILD_DIR/onelayer-demo-upstream" --listen 127.0.0.1:8081 &
demo=$!
trap 'kill $demo 2>/dev/null || true' EXIT
cat <<MSG
demo upstream on 127.0.0.1:8081; onelayer on 127.0.0.1:15001 (admin 127.0.0.1:9901). Try:
  curl -i http://127.0.0.1:15001/hello
  curl -i http://127.0.0.1:15001/flaky        # fails 2 of 3 times; onelayer retries
  curl -s http://127.0.0.1:9901/metrics | grep onelayer_
MSG
"$BUILD_DIR/onelayer" --config "$root/config/onelayer.yaml" "$@"
