#!/usr/bin/env bash
# Replay test: changes another branch might make on the old layout.
set -euo pipefail
mkdir -p proxy/core/fleet proxy/shell/fleet tests/unit/core/fleet
cat > proxy/core/fleet/fleet_share.h <<'H'
// Replay-test dummy: a core/fleet file that includes an old core path.
#pragma once
#include "core/retry_budget.h"
namespace onelayer {
double fleet_share(const RetryBudget& b);
}
H
cat > proxy/core/fleet/fleet_share.cc <<'H'
#include "core/fleet/fleet_share.h"
namespace onelayer {
double fleet_share(const RetryBudget&) { return 0.5; }
}
H
cat > proxy/shell/fleet/fleet_sync.cc <<'H'
// Replay-test dummy: a shell/fleet file naming old shell paths and classes.
#include "shell/h2_upstream.h"
#include "shell/upstream.h"
#include "core/fleet/fleet_share.h"
namespace onelayer {
int fleet_sync_touch(H2UpConn* a, UpConn* b) { return (a != nullptr) + (b != nullptr); }
}
H
cat > tests/unit/core/fleet/fleet_share_test.cc <<'H'
#include <doctest/doctest.h>
#include "core/fleet/fleet_share.h"
#include "core/clock.h"
#include "scripted_random.h"
TEST_CASE("replay dummy: core/fleet builds against the moved retry budget") {
  CHECK(sizeof(onelayer::RetryBudget) > 0);
}
H
# an edit to an old file
sed -i '1i // replay-test edit on the old layout' proxy/shell/exchange.cc
sed -i 's/class RetryBudget {/class RetryBudget {  \/\/ replay edit/' proxy/core/retry_budget.h
