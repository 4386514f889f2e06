#!/usr/bin/env bash
# Scenario (b): the operator against the real API server - a job is planned,
# its pods are created and bound as one gang exactly where `arealctl plan`
# puts them for the same inventory, status, printer columns and Events are
# written, and deleting the job removes every child. (The simulated nodes run
# no containers yet, so the pods stay Pending after binding.)
. "$(dirname "$0")/lib.sh"
NS=e2e-b
fresh_namespace $NS
k() { kubectl -n $NS "$@"; }
BIN=${AREAL_BIN:-$REPO/build/rel}
[ -x "$BIN/areal-operator" ] && [ -x "$BIN/arealctl" ] || fail "build areal-operator and arealctl first (make)"

log=$(mktemp)
"$BIN/areal-operator" --kubeconfig "$KUBECONFIG" --metrics-address 127.0.0.1:0 \
    --leader-elect --lease-namespace $NS --id e2e-operator >"$log" 2>&1 &
op=$!
cleanup() {
    kill "$op" 2>/dev/null || true
    wait "$op" 2>/dev/null || true
    if [ "${ok:-0}" != 1 ]; then
        echo "--- operator log (tail)"
        tail -n 40 "$log"
    fi
    rm -f "$log"
}
trap cleanup EXIT

k apply -f - >/dev/null <<'JOB'
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: gang
spec:
  allocation: "sglang:d2t2+megatron:d2p2t2"
  image: areal/worker:latest
JOB
pass "job applied"

# Wait for every planned pod to be bound.
want=$("$BIN/arealctl" plan --alloc 'sglang:d2t2+megatron:d2p2t2' --job gang \
    --cluster "$SCEN_DIR/nodes-2x8.yaml" --json |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print("\n".join(sorted(p["name"]+" "+p["node"] for r in d["roles"] for p in r["pods"])))')
for _ in $(seq 1 60); do
    got=$(k get pods -l areal.io/job=gang -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}' | sort)
    [ "$(echo "$got" | grep -c ' gpu-node')" = "$(echo "$want" | wc -l)" ] && break
    sleep 1
done
expect_eq "pods bound exactly where arealctl plan puts them" "$want" "$got"
expect_eq "pods name the operator as their scheduler" areal-operator \
    "$(k get pod gang-trainer-0 -o jsonpath='{.spec.schedulerName}')"
env_of() { k get pod "$1" -o jsonpath="{.spec.containers[0].env[?(@.name==\"$2\")].value}"; }
expect_eq "trainer pod holds ranks 0..7" "0 8" \
    "$(env_of gang-trainer-0 AREAL_POD_FIRST_RANK) $(env_of gang-trainer-0 AREAL_POD_RANKS)"
expect_eq "second rollout server starts at rank 2" 2 "$(env_of gang-rollout-1 AREAL_POD_FIRST_RANK)"
expect_eq "MASTER_ADDR names the trainer rank-0 pod" gang-trainer-0.gang \
    "$(env_of gang-rollout-1 MASTER_ADDR)"
expect_eq "headless service" None "$(k get svc gang -o jsonpath='{.spec.clusterIP}')"
expect_eq "config map" "sglang:d2t2+megatron:d2p2t2" "$(k get cm gang-config -o jsonpath='{.data.allocation}')"

for _ in $(seq 1 30); do
    [ "$(k get aj gang -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].reason}')" = GangBound ] && break
    sleep 1
done
expect_eq "condition Scheduled=GangBound" GangBound \
    "$(k get aj gang -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].reason}')"
expect_eq "status gpus" 12 "$(k get aj gang -o jsonpath='{.status.gpus}')"
row=$(k get aj gang --no-headers | tr -s ' ' | cut -d' ' -f1-4)
expect_eq "kubectl get aj" "gang Pending sglang:d2t2+megatron:d2p2t2 12" "$row"
k describe aj gang | grep -q GangBound || fail "kubectl describe aj shows no GangBound event"
pass "kubectl describe aj shows the GangBound event"
curl -sf "http://127.0.0.1:$(sed -n 's/.*"metrics":"[^"]*:\([0-9]*\)".*/\1/p' "$log")/metrics" |
    grep -q '^areal_reconciles_total' || fail "/metrics has no areal_reconciles_total"
pass "/metrics serves the controller's counters"

# A job that cannot fit stays Pending with the planner's reason.
k apply -f - >/dev/null <<'JOB'
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: huge
spec:
  allocation: "megatron:d8t8"
JOB
for _ in $(seq 1 30); do
    reason=$(k get aj huge -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].reason}')
    [ "$reason" = Unschedulable ] && break
    sleep 1
done
expect_eq "unplaceable job is Unschedulable" Unschedulable "$reason"
msg=$(k get aj huge -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].message}')
case "$msg" in *"needs 64 GPUs"*) pass "reason from the planner: $msg" ;; *) fail "reason: $msg" ;; esac
expect_eq "no pods for it" 0 "$(k get pods -l areal.io/job=huge --no-headers 2>/dev/null | wc -l)"

# Deletion removes every child. The simulated nodes run no kubelet yet, so a
# deleted pod stays Terminating: the scenario checks that every pod was asked
# to go, then confirms the termination as a kubelet would (grace period 0).
k delete aj gang huge --wait=true --timeout=60s >/dev/null || fail "kubectl delete aj did not finish"
pass "kubectl delete aj finished (the operator removed its finalizer)"
for _ in $(seq 1 30); do
    live=$(k get pods -l areal.io/job=gang -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.deletionTimestamp} {end}' |
        tr ' ' '\n' | sed -n 's/=$//p' | tr '\n' ' ')
    [ -z "$live" ] && break
    sleep 1
done
expect_eq "every pod of the job is being deleted" "" "$live"
k delete pods -l areal.io/job=gang --grace-period=0 --force >/dev/null 2>&1 || true
for _ in $(seq 1 60); do
    n=$(k get pods,svc,cm -l areal.io/job=gang --no-headers 2>/dev/null | wc -l)
    [ "$n" = 0 ] && break
    sleep 1
done
expect_eq "children removed after kubectl delete" 0 "$n"
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
