#!/usr/bin/env bash
# Scenario (m): issue 11, item 5 - `kubectl scale aj --replicas` 2 -> 0 -> 2
# through the scale subresource. The job is never Failed: at zero the rollout
# servers go and the trainer keeps (or gets) its pod; back at two, two rollout
# servers run again and status.rolloutReplicas says what exists. Bounded: 180 s.
. "$(dirname "$0")/lib.sh"
scenario_with_operator e2e-m

k apply -f - >/dev/null <<'JOB'
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: elastic
spec:
  allocation: "sglang:d2+megatron:d1t2"
  rollout:
    replicas: 2
  roles:
  - name: trainer
    args: ["--hold-ms", "300000"]
  - name: rollout
    args: ["--hold-ms", "300000"]
JOB
t0=$SECONDS
rollouts() { k get pods -l areal.io/job=elastic,areal.io/role-kind=rollout --no-headers 2>/dev/null | grep -c ' Running ' || true; }
trainers() { k get pods -l areal.io/job=elastic,areal.io/role-kind=trainer --no-headers 2>/dev/null | grep -c ' Running ' || true; }
# settled N: N rollout servers and one trainer running, the job Running, status.rolloutReplicas N
settled() {
    local ph
    ph=$(job_phase $NS elastic)
    [ "$ph" != Failed ] || fail "the job Failed: $(k get aj elastic -o jsonpath='{.status.conditions}')"
    [ "$ph" = Running ] && [ "$(rollouts)" = "$1" ] && [ "$(trainers)" = 1 ] &&
        [ "$(k get aj elastic -o jsonpath='{.status.rolloutReplicas}')" = "$1" ] &&
        [ "$(k get pods -l areal.io/job=elastic --no-headers 2>/dev/null | wc -l)" = $(($1 + 1)) ]
}
wait_settled() { # N SECONDS
    local end=$((SECONDS + $2))
    until settled "$1"; do
        [ "$SECONDS" -ge "$end" ] && return 1
        sleep 0.5
    done
}
wait_settled 2 60 || fail "2 rollout servers did not run: $(k get pods -o wide; k get aj elastic -o jsonpath='{.status}')"
pass "2 rollout servers and the trainer run ($((SECONDS - t0))s)"
t1=$SECONDS
k scale aj elastic --replicas=0 >/dev/null || fail "kubectl scale --replicas=0 failed"
wait_settled 0 60 || fail "at 0: $(k get pods -o wide; k get aj elastic -o jsonpath='{.status}')"
pass "scaled to 0: no rollout server, the trainer runs, the job Running ($((SECONDS - t1))s)"
t2=$SECONDS
k scale aj elastic --replicas=2 >/dev/null || fail "kubectl scale --replicas=2 failed"
wait_settled 2 60 || fail "back at 2: $(k get pods -o wide; k get aj elastic -o jsonpath='{.status}')"
pass "scaled back to 2: two rollout servers run again ($((SECONDS - t2))s)"
expect_eq "kubectl get --subresource=scale reports 2" 2 \
    "$(k get aj elastic --subresource=scale -o jsonpath='{.status.replicas}')"
k delete aj --all --wait=false >/dev/null
k delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
