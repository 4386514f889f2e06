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
fresh_namespace() {
    kubectl delete namespace "$1" --ignore-not-found --wait=true >/dev/null
    kubectl create namespace "$1" >/dev/null
}
