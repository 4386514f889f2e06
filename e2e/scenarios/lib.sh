# e2e/scenarios/lib.sh - helpers of the scenario scripts (sourced).
# shellcheck shell=bash disable=SC2034
#
# A scenario is an executable e2e/scenarios/<letter>_<name>.sh that runs
# against a cluster made by `e2e/cluster up` (KUBECONFIG and PATH from
# `e2e/cluster env`), prints "ok - ..." per check and exits non-zero at the
# first failed check with a line naming what was expected and what came.
# Each scenario works in its own namespace and deletes it at the end.
set -euo pipefail
SCEN_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCEN_DIR/../.." && pwd)

pass() { echo "ok - $*"; }
fail() {
    echo "FAIL - $*" >&2
    exit 1
}

# expect_fail DESC SUBSTRING CMD...: CMD must fail and print SUBSTRING.
expect_fail() {
    local desc=$1 want=$2 out
    shift 2
    if out=$("$@" 2>&1); then
        fail "$desc: expected a rejection, but it was accepted: $out"
    fi
    case "$out" in
    *"$want"*) pass "$desc (${out//$'\n'/ })" ;;
    *) fail "$desc: rejected, but the message does not contain '$want': $out" ;;
    esac
}

# expect_eq DESC WANT GOT
expect_eq() {
    [ "$2" = "$3" ] || fail "$1: want '$2', got '$3'"
    pass "$1 ($3)"
}

# fresh_namespace NAME: (re)create a namespace for the scenario.
# Jobs left in it by an earlier, failed run lose their finalizer first: no
# operator runs between scenarios to remove it.
fresh_namespace() {
    local j
    for j in $(kubectl -n "$1" get arealjobs -o name 2>/dev/null); do
        kubectl -n "$1" patch "$j" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
    done
    kubectl delete namespace "$1" --ignore-not-found --wait=true >/dev/null
    kubectl create namespace "$1" >/dev/null
}

# wait_until SECONDS CMD...: poll CMD every 0.5 s until it succeeds; false on timeout.
wait_until() {
    local end=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -ge "$end" ] && return 1
        sleep 0.5
    done
}

# operator_log NAME: a new file for an operator's output. Under e2e/run it lies
# in $AREAL_E2E_OPERATOR_LOGS, whose every line e2e/run checks to be a JSON log
# record (areal-e2e-logcheck) after the scenario, and then removes; a scenario
# run alone gets a temporary file. drop_operator_log FILE removes it unless
# e2e/run has yet to check it.
operator_log() {
    if [ -n "${AREAL_E2E_OPERATOR_LOGS:-}" ]; then
        mktemp --suffix=.log "$AREAL_E2E_OPERATOR_LOGS/$1-XXXXXX"
    else
        mktemp
    fi
}
drop_operator_log() { [ -n "${AREAL_E2E_OPERATOR_LOGS:-}" ] || rm -f "$1"; }

# start_operator LOG [ARGS...]: runs areal-operator in the background, its
# output in LOG; OP_PID is its pid.
start_operator() {
    local log=$1
    shift
    "${AREAL_BIN:-$REPO/build/rel}/areal-operator" --kubeconfig "$KUBECONFIG" \
        --metrics-address 127.0.0.1:0 "$@" >>"$log" 2>&1 &
    OP_PID=$!
}

# scenario_with_operator NS [ARGS...]: a fresh namespace NS, k() as kubectl
# in it, areal-operator started (ARGS passed on) with its output in $log, and
# an EXIT trap that stops it and, unless the scenario set ok=1, prints the
# tail of its log.
scenario_with_operator() {
    NS=$1
    shift
    fresh_namespace "$NS"
    k() { kubectl -n "$NS" "$@"; }
    log=$(operator_log "$NS")
    start_operator "$log" "$@"
    trap stop_scenario_operator EXIT
}
stop_scenario_operator() {
    kill "$OP_PID" 2>/dev/null || true
    wait "$OP_PID" 2>/dev/null || true
    [ "${ok:-0}" = 1 ] || { echo "--- operator log (tail)"; tail -n 30 "$log"; }
    drop_operator_log "$log"
}

# job_phase NS NAME
job_phase() { kubectl -n "$1" get aj "$2" -o jsonpath='{.status.phase}'; }
phase_is() { [ "$(job_phase "$1" "$2")" = "$3" ]; }

# pods_running NS JOB N: exactly N pods of JOB, every one Running.
pods_running() {
    local got
    got=$(kubectl -n "$1" get pods -l "areal.io/job=$2" -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}')
    [ "$(echo "$got" | grep -c '^Running$')" = "$3" ] && [ "$(echo "$got" | grep -c .)" = "$3" ]
}

# pod_uids NS JOB: "name uid" of the job's pods, sorted.
pod_uids() {
    kubectl -n "$1" get pods -l "areal.io/job=$2" \
        -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid}{"\n"}{end}' | sort
}

# pod_log NS POD: the container log the node simulator keeps for the newest
# incarnation of POD (it stays after the pod is deleted, until cluster down).
pod_log() {
    local d
    d=$(ls -dt "$AREAL_E2E_STATE/pods/$1_$2_"*/ 2>/dev/null | head -n 1)
    [ -n "$d" ] && cat "$d"*.log
}

# pod_pids NS JOB: pids of every container the node simulator started for
# JOB's pods (any incarnation).
pod_pids() {
    cat "$AREAL_E2E_STATE/pods/$1_$2-"*/pid 2>/dev/null || true
}

# none_alive PID...: no process of these pids exists.
none_alive() {
    local p
    for p in "$@"; do kill -0 "$p" 2>/dev/null && return 1; done
    return 0
}
