#!/usr/bin/env bash
# Scenario (c): a job that cannot fit stays Pending with the planner's reason
# (no pod is created, nothing retries in a busy loop) and is placed as one gang
# as soon as a node is added.
. "$(dirname "$0")/lib.sh"
NS=e2e-c
fresh_namespace $NS
k() { kubectl -n $NS "$@"; }
BIN=${AREAL_BIN:-$REPO/build/rel}
[ -x "$BIN/areal-operator" ] || fail "build areal-operator first (make)"
log=$(operator_log c_pending)
"$BIN/areal-operator" --kubeconfig "$KUBECONFIG" --metrics-address 127.0.0.1:0 >"$log" 2>&1 &
op=$!
cleanup() {
    kill "$op" 2>/dev/null || true
    wait "$op" 2>/dev/null || true
    "$REPO/e2e/cluster" remove-node gpu-node-2 >/dev/null 2>&1 || true
    [ "${ok:-0}" = 1 ] || { echo "--- operator log"; tail -n 30 "$log"; }
    drop_operator_log "$log"
}
trap cleanup EXIT

k apply -f - >/dev/null <<'JOB'
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: wide
spec:
  allocation: "megatron:d3t8"
  roles:
  - name: trainer
    args: ["--hold-ms", "60000"]
JOB
for _ in $(seq 1 30); do
    reason=$(k get aj wide -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].reason}')
    [ "$reason" = Unschedulable ] && break
    sleep 1
done
expect_eq "Pending while it cannot fit" "Pending Unschedulable" \
    "$(k get aj wide -o jsonpath='{.status.phase}') $reason"
msg=$(k get aj wide -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].message}')
case "$msg" in *"24 GPUs"*) pass "the planner's reason: $msg" ;; *) fail "reason: $msg" ;; esac
sleep 3
expect_eq "no pod while it cannot fit" 0 "$(k get pods -l areal.io/job=wide --no-headers 2>/dev/null | wc -l)"
events=$(k get events --field-selector involvedObject.name=wide,reason=Unschedulable --no-headers | wc -l)
expect_eq "one Unschedulable event, not a retry loop" 1 "$events"

"$REPO/e2e/cluster" nodes "$SCEN_DIR/nodes-extra-1x8.yaml" >/dev/null || fail "could not add a node"
pass "a node was added"
for _ in $(seq 1 30); do
    bound=$(k get pods -l areal.io/job=wide -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c gpu-node || true)
    [ "$bound" = 3 ] && break
    sleep 1
done
expect_eq "placed as one gang once the node is there" 3 "$bound"
expect_eq "on three distinct nodes" 3 \
    "$(k get pods -l areal.io/job=wide -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u | wc -l)"
# Free the GPUs for the scenarios after this one (force: no need to wait for
# the node simulator's graceful stop).
k delete aj wide --wait=false >/dev/null
k delete pods -l areal.io/job=wide --grace-period=0 --force >/dev/null 2>&1 || true
for _ in $(seq 1 30); do
    [ "$(k get pods -l areal.io/job=wide --no-headers 2>/dev/null | wc -l)" = 0 ] && break
    sleep 1
done
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
