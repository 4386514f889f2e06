#!/usr/bin/env bash
# e2e/bench/bench_rl_elastic.sh - issue 16's benches on the e2e cluster (make bench):
#   - scale-up latency: `kubectl scale aj --replicas=3` -> both new rollout servers
#     registered with the trainer and serving the current policy version (seconds);
#   - scale-down drain time: `kubectl scale aj --replicas=1` -> both servers drained,
#     deregistered and their pods deleted (seconds);
#   - trainer restart: the trainer pod SIGKILLed -> the new trainer resumed at the
#     checkpointed step and trained the step after it (seconds).
# How: it runs the scenarios that measure them (e2e/scenarios/u_rl_scale.sh,
# v_rl_kill.sh) on a cluster of its own, under the suite's lock (one e2e cluster
# per machine), and prints their measurement lines. The numbers include the
# machine's load: each line says the load average when it ran.
# AREAL_BENCH_NO_E2E=1 skips it (the first e2e run builds the control plane from
# Go modules: e2e/README.md).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
if [ -n "${AREAL_BENCH_NO_E2E:-}" ]; then
    echo "bench_rl_elastic: skipped (AREAL_BENCH_NO_E2E)"
    exit 0
fi
BIN=${BUILD:-$REPO/build/rel}
case "$BIN" in /*) ;; *) BIN=$REPO/$BIN ;; esac
out=$(mktemp)
trap 'rm -f "$out"' EXIT
load=$(cut -d' ' -f1 /proc/loadavg)
if ! AREAL_E2E_VERBOSE=1 AREAL_BIN=$BIN flock /tmp/areal-e2e.lock "$REPO/e2e/run" u_rl_scale v_rl_kill >"$out" 2>&1; then
    tail -n 60 "$out"
    echo "bench_rl_elastic: a scenario failed" >&2
    exit 1
fi
echo "bench_rl_elastic (load average $load at the start, $(cut -d' ' -f1 /proc/loadavg) at the end):"
grep -E "scale-up latency|scale-down drain time|trainer restart:" "$out" | sed 's/^ *ok - /  /'
