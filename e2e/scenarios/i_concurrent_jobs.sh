#!/usr/bin/env bash
# Scenario (i): issue 11, item 1 - concurrent jobs against too few GPUs. Six
# jobs of 4 GPUs are applied at once on 16 GPUs (two 8-GPU nodes) to an
# operator with 8 reconcile workers: no node ever carries more GPUs than it
# has (polled from the API while the operator works), four gangs are bound
# whole, and the other two wait Pending with the planner's reason and no pod.
# Bounded: 90 s for the whole decision.
. "$(dirname "$0")/lib.sh"
scenario_with_operator e2e-i --workers 8

JOBS=6
for j in $(seq 0 $((JOBS - 1))); do
    cat <<JOB
---
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: cj$j
spec:
  allocation: "sglang:d2+megatron:d1t2"
  roles:
  - name: trainer
    args: ["--hold-ms", "120000"]
  - name: rollout
    args: ["--hold-ms", "120000"]
JOB
done | k apply -f - >/dev/null
t0=$SECONDS
pass "$JOBS jobs of 4 GPUs applied at once on 16 GPUs"

# worst_node: "NODE GPUS" of the node with the most GPUs of bound, unfinished pods (every namespace).
worst_node() {
    kubectl get pods -A -o json | jq -r '
        [.items[] | select(.spec.nodeName != null)
         | select(.status.phase != "Succeeded" and .status.phase != "Failed")
         | {n: .spec.nodeName, g: ([.spec.containers[].resources.requests["nvidia.com/gpu"] // "0" | tonumber] | add)}]
        | group_by(.n) | map({n: .[0].n, g: (map(.g) | add)}) | max_by(.g) // {n: "-", g: 0}
        | "\(.n) \(.g)"'
}
bound_jobs() {
    k get aj -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Scheduled")].reason}{"\n"}{end}' | grep -c '^GangBound$' || true
}
waiting_jobs() {
    k get aj -o jsonpath='{range .items[*]}{.status.phase}/{.status.conditions[?(@.type=="Scheduled")].reason}{"\n"}{end}' |
        grep -c '^Pending/Unschedulable$' || true
}
worst=0
while [ $((SECONDS - t0)) -lt 90 ]; do
    read -r node gpus <<<"$(worst_node)"
    [ "$gpus" -gt "$worst" ] && worst=$gpus worst_at=$node
    [ "$gpus" -le 8 ] || fail "node $node carries $gpus GPUs of 8: $(kubectl get pods -A -o wide)"
    [ "$(bound_jobs)" = 4 ] && [ "$(waiting_jobs)" = 2 ] && break
    sleep 0.5
done
decided=$((SECONDS - t0))
expect_eq "four gangs bound" 4 "$(bound_jobs)"
expect_eq "two jobs wait Pending/Unschedulable" 2 "$(waiting_jobs)"
pass "decided in ${decided}s; the fullest node never carried more than $worst GPUs (${worst_at:-})"
for j in $(seq 0 $((JOBS - 1))); do
    r=$(k get aj cj$j -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].reason}')
    n=$(k get pods -l areal.io/job=cj$j --no-headers 2>/dev/null | wc -l)
    case "$r" in
    GangBound) expect_eq "cj$j: a whole gang" 3 "$n" ;;
    Unschedulable)
        expect_eq "cj$j: no pod while it waits" 0 "$n"
        msg=$(k get aj cj$j -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].message}')
        [ -n "$msg" ] || fail "cj$j waits without a message"
        pass "cj$j waits: $msg"
        ;;
    *) fail "cj$j: Scheduled reason '$r'" ;;
    esac
done
sleep 3 # late binds would show now
read -r node gpus <<<"$(worst_node)"
[ "$gpus" -le 8 ] || fail "after settling, node $node carries $gpus GPUs of 8"
pass "after settling the fullest node carries $gpus GPUs of 8"

k delete aj --all --wait=false >/dev/null
k delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
wait_until 60 sh -c "[ -z \"\$(kubectl -n $NS get aj -o name)\" ]" || fail "the jobs were not removed"
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
