#!/usr/bin/env bash
# Scenario (h): two operator replicas with Lease leader election - only the
# leader acts (the other is not ready and creates nothing); when the leader is
# killed without a chance to give the Lease up, the other takes over once the
# Lease expires and reconciles; a replica stopped with SIGTERM releases it.
. "$(dirname "$0")/lib.sh"
NS=e2e-h
fresh_namespace $NS
k() { kubectl -n $NS "$@"; }
BIN=${AREAL_BIN:-$REPO/build/rel}
[ -x "$BIN/areal-operator" ] || fail "build areal-operator first (make)"

logs=${AREAL_E2E_OPERATOR_LOGS:-$(mktemp -d)}
start_op() { # start_op ID: runs a replica, prints its pid
    "$BIN/areal-operator" --kubeconfig "$KUBECONFIG" --metrics-address 127.0.0.1:0 \
        --leader-elect --lease-namespace $NS --id "$1" >"$logs/$1.log" 2>&1 &
    echo $!
}
port_of() { sed -n 's/.*"metrics":"[^"]*:\([0-9]*\)".*/\1/p' "$logs/$1.log"; }
ready_code() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$(port_of "$1")/readyz"; }
holder() { k get lease areal-operator -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
cleanup() {
    kill -9 "${a:-}" "${b:-}" 2>/dev/null || true
    wait 2>/dev/null || true
    if [ "${ok:-0}" != 1 ]; then
        for f in "$logs"/*.log; do echo "--- $f"; tail -n 20 "$f"; done
    fi
    [ -n "${AREAL_E2E_OPERATOR_LOGS:-}" ] || rm -rf "$logs"
}
trap cleanup EXIT

a=$(start_op replica-a)
for _ in $(seq 1 30); do [ "$(holder)" = replica-a ] && break; sleep 1; done
expect_eq "the first replica holds the Lease" replica-a "$(holder)"
b=$(start_op replica-b)
for _ in $(seq 1 20); do [ -n "$(port_of replica-b)" ] && [ "$(ready_code replica-a)" = 200 ] && break; sleep 1; done
expect_eq "the leader is ready" 200 "$(ready_code replica-a)"
expect_eq "the other replica is not ready" 503 "$(ready_code replica-b)"
sleep 4
expect_eq "the Lease stays with the leader" replica-a "$(holder)"

job() { # job NAME: a small job
    k apply -f - >/dev/null <<JOB
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: $1
spec:
  allocation: "sglang:d2t2"
  roles:
  - name: rollout
    args: ["--hold-ms", "120000"]
JOB
}
job first
for _ in $(seq 1 30); do [ "$(k get pods -l areal.io/job=first --no-headers 2>/dev/null | wc -l)" = 2 ] && break; sleep 1; done
expect_eq "the leader created the pods, once" 2 "$(k get pods -l areal.io/job=first --no-headers | wc -l)"
grep -q "starting the controller" "$logs/replica-b.log" && fail "the standby replica started its controller"
pass "the standby replica did not act"

# The leader dies without releasing: the standby waits out the Lease, then leads.
kill -9 "$a"
t0=$(date +%s)
for _ in $(seq 1 40); do [ "$(holder)" = replica-b ] && break; sleep 1; done
expect_eq "the standby took the Lease over" replica-b "$(holder)"
pass "takeover after $(($(date +%s) - t0)) s (lease 15 s)"
job second
for _ in $(seq 1 30); do [ "$(k get pods -l areal.io/job=second --no-headers 2>/dev/null | wc -l)" = 2 ] && break; sleep 1; done
expect_eq "the new leader reconciles" 2 "$(k get pods -l areal.io/job=second --no-headers | wc -l)"
expect_eq "no duplicate pods for the first job" 2 "$(k get pods -l areal.io/job=first --no-headers | wc -l)"

# SIGTERM: the leader gives the Lease up on the way out.
kill -TERM "$b"
wait "$b" 2>/dev/null || true
expect_eq "a stopped leader releases the Lease" "" "$(holder)"
k delete aj first second --wait=false >/dev/null
k delete pods -l areal.io/job --grace-period=0 --force >/dev/null 2>&1 || true
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
