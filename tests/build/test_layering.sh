#!/usr/bin/env bash
# test_layering.sh - proves that the build states the layering (run by `make test`
# and `make test-rel` from the repository root; prints cmocka's closing lines so
# scripts/run-tests.sh counts it like a test binary).
#
# Each case compiles a one-line probe exactly as a source of component(s) C is
# compiled (`make probe C=... PROBE=FILE`, the same flags function as the real
# rule) and expects it to compile, or to fail because the header is not found:
# an include of a component that C does not depend on must not build. A second
# group checks the link closure that `make print-closure` reports, which is what
# programs and tests link.
set -u
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
n=0

probe() { # probe EXPECT(ok|missing) COMPONENTS HEADER
    local want=$1 comps=$2 hdr=$3 f out
    n=$((n + 1))
    f=$tmp/probe$n.c
    printf '#include "%s"\nint probe_%d(void);\nint probe_%d(void) { return 0; }\n' "$hdr" "$n" "$n" >"$f"
    out=$(make -s --no-print-directory probe C="$comps" PROBE="$f" 2>&1)
    local rc=$?
    if [ "$want" = ok ] && [ $rc -eq 0 ]; then
        passed=$((passed + 1))
        echo "[       OK ] $comps may include $hdr"
    elif [ "$want" = missing ] && [ $rc -ne 0 ] && grep -q "$hdr: No such file" <<<"$out"; then
        passed=$((passed + 1))
        echo "[       OK ] $comps may not include $hdr (not found)"
    else
        failed=$((failed + 1))
        echo "[  FAILED  ] $comps including $hdr: expected $want, make said (exit $rc):"
        tail -n 5 <<<"$out"
    fi
}

closure() { # closure COMPONENTS EXPECTED-CLOSURE
    local got
    got=$(make -s --no-print-directory print-closure C="$1" | sed -n 's/^closure: *//p' | xargs)
    if [ "$got" = "$2" ]; then
        passed=$((passed + 1))
        echo "[       OK ] closure of $1: $got"
    else
        failed=$((failed + 1))
        echo "[  FAILED  ] closure of $1: expected '$2', got '$got'"
    fi
}

# allowed: a component and what it declares
probe ok base areal/error.h
probe ok layout areal/error.h
probe ok layout areal/yaml_json.h
probe ok kube areal/yaml_json.h
probe ok operator areal/kube/client.h
probe ok operator areal/alloc.h
probe ok "layout comm model" areal/model/model.h
probe ok http areal/error.h
probe ok operator areal/http/server.h
probe ok rl areal/yaml_json.h
probe ok rollout areal/http/server.h
probe ok rollout areal/model/model.h
probe ok rollout areal/comm/comm.h
# refused: every include that goes up or sideways
probe missing base areal/yaml_json.h
probe missing base areal/alloc.h
probe missing yaml areal/alloc.h
probe missing layout areal/kube/client.h
probe missing layout areal/simpod.h
probe missing kube areal/alloc.h
probe missing kube areal/operator/cache.h
probe missing comm areal/model/model.h
probe missing model areal/comm/comm.h
probe missing operator areal/comm/comm.h
probe missing operator areal/simpod.h
probe missing base areal/http/server.h
probe missing http areal/operator/cache.h
probe missing http areal/kube/client.h
probe missing http areal/rollout/server.h
probe missing rl areal/rollout/engine.h
probe missing rl areal/model/model.h
probe missing rl areal/comm/comm.h
probe missing rollout areal/rl/loss.h
probe missing rollout areal/operator/cache.h
probe missing model areal/rollout/engine.h
probe missing comm areal/http/server.h

# what binaries link: only the closure, each archive before the ones it uses
closure base "base"
closure layout "layout yaml base"
closure kube "kube yaml base"
closure operator "operator kube layout yaml http base"
closure http "http base"
closure rl "rl yaml base"
# where the GPU model is built (nvcc + cuBLASLt), the engine's GPU step puts it in rollout's
# closure (worker/rollout/module.mk); elsewhere the closure is the CPU one
if make -s --no-print-directory print-closure C=gpumodel >/dev/null 2>&1; then
    closure rollout "rollout comm layout yaml http gpumodel model kernels base"
else
    closure rollout "rollout model comm layout yaml http base"
fi
closure "layout comm model" "comm layout yaml model base"
closure e2e "e2e kube layout yaml base"

echo "[==========] $((passed + failed)) test(s) run."
echo "[  PASSED  ] $passed test(s)."
if [ $failed -ne 0 ]; then
    echo "[  FAILED  ] $failed test(s), listed above."
    exit 1
fi
