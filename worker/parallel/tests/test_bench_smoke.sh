#!/usr/bin/env bash
# test_bench_smoke.sh - bench_parallel --smoke (worker/parallel/bench: the 1-
# and 2-rank layouts of a tiny model, one step, about a second), part of
# `make test`: the bench runs and prints its three tables, every dense layout
# ends at the one-process loss and the MoE layout at the MoE process's (they
# take the same optimizer steps), the bytes its comm counters measured are
# within 5% of the analytic volume (EP, whose volume depends on the routing,
# within 50%), and every bubble is a share in [0, 1). Prints cmocka's lines so
# scripts/run-tests.sh counts it like a test binary.
set -uo pipefail
bin=${AREAL_BIN:-build/rel}/bench/bench_parallel
passed=0
failed=0
ok() { echo "[       OK ] $1"; passed=$((passed + 1)); }
bad() { echo "[  FAILED  ] $1"; failed=$((failed + 1)); }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if timeout 60 "$bin" --smoke >"$out" 2>&1; then
    ok "bench_parallel --smoke runs"
else
    bad "bench_parallel --smoke runs"
    cat "$out"
fi
# table 1: "layout ranks step [worst] tok/s cpu x x loss"
if awk '/^1\. /{t=1; next} /^2\. /{t=0} t && $1 ~ /^(1proc|dp|dp-zero1|tp|pp-1f1b|pp-vpp2|cp)$/ {
        l=$NF; if (ref == "") ref=l; if (l - ref > 1e-4 || ref - l > 1e-4) bad=1; n++ }
     END { exit (bad || n < 7) }' "$out"; then
    ok "every dense layout ends at the one-process loss"
else
    bad "every dense layout ends at the one-process loss"
fi
if awk '/^1\. /{t=1; next} /^2\. /{t=0} t && $1 ~ /^(1proc-moe|ep)$/ {
        l=$NF; if (ref == "") ref=l; if (l - ref > 1e-4 || ref - l > 1e-4) bad=1; n++ }
     END { exit (bad || n < 2) }' "$out"; then
    ok "the ep layout ends at the MoE process's loss"
else
    bad "the ep layout ends at the MoE process's loss"
fi
# table 2: "layout ranks group measured analytic ratio"
if awk '/^2\. /{t=1; next} /^3\. /{t=0} t && $NF ~ /^[0-9.]+$/ {
        lo = $1 == "ep" ? 0.5 : 1.0; hi = $1 == "ep" ? 1.5 : 1.05
        if ($NF < lo || $NF > hi) { print "off: " $0; bad=1 } n++ }
     END { exit (bad || n < 7) }' "$out"; then
    ok "measured bytes match the analytic volume"
else
    bad "measured bytes match the analytic volume"
fi
# table 3: "schedule p m virtual wall analytic balance at-balance"
if awk '/^3\. /{t=1; next} t && /^(1f1b|vpp2) / {
        for (i = 4; i <= 8; i++) if ($i < 0 || $i > 1 || (i != 7 && $i == 1)) bad=1; n++ }
     END { exit (bad || n < 2) }' "$out"; then
    ok "bubbles are shares"
else
    bad "bubbles are shares"
fi
[ "$failed" -eq 0 ] || cat "$out"
echo "[  PASSED  ] $passed test(s)."
[ "$failed" -eq 0 ] || echo "[  FAILED  ] $failed test(s)."
[ "$failed" -eq 0 ]
