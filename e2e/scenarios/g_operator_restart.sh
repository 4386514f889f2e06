#!/usr/bin/env bash
# Scenario (g): the operator is killed (SIGKILL, no clean-up) while a job
# runs, and started again. The new process rebuilds its view from the API
# server: it creates no duplicate pod, keeps the job's status (start time,
# placement, restarts) and finishes the job when the trainer succeeds.
. "$(dirname "$0")/lib.sh"
scenario_with_operator e2e-g

k apply -f - >/dev/null <<'JOB'
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: survivor
spec:
  allocation: "sglang:d2t2+megatron:d2t2"
  roles:
  - name: trainer
    args: ["--selftest", "--hold-ms", "10000"]
  - name: rollout
    args: ["--selftest", "--hold-ms", "10000"]
JOB
wait_until 60 pods_running $NS survivor 3 || fail "the job's pods did not all run: $(k get pods -o wide 2>&1)"
wait_until 20 phase_is $NS survivor Running || fail "job phase $(job_phase $NS survivor), want Running"
before=$(pod_uids $NS survivor)
st() { k get aj survivor -o jsonpath='{.status.startTime} {.status.restarts} {.status.gpus} {.status.placement.pods[*].node}'; }
status_before=$(st)
pass "gang running; status: $status_before"

kill -KILL "$OP_PID"
wait "$OP_PID" 2>/dev/null || true
pass "operator killed (SIGKILL)"
sleep 2
# a marker in the log, itself a record (e2e/run checks every line is one)
echo '{"level":"info","component":"e2e","msg":"--- the operator is restarted here"}' >>"$log"
start_operator "$log"
pass "operator started again"
sleep 3
expect_eq "the same pods after the restart (no duplicate, none recreated)" "$before" "$(pod_uids $NS survivor)"
expect_eq "status kept (startTime restarts gpus placement)" "$status_before" "$(st)"

wait_until 90 phase_is $NS survivor Succeeded || fail "job phase $(job_phase $NS survivor), want Succeeded"
pass "the job Succeeded under the new operator"
# (on success the operator removes the pods that still run, so fewer may be left)
for u in $(k get pods -l areal.io/job=survivor -o jsonpath='{.items[*].metadata.uid}'); do
    echo "$before" | grep -q " $u$" || fail "pod uid $u is new: a pod was replaced or duplicated"
done
expect_eq "the trainer rank-0 pod is the original one" \
    "$(echo "$before" | grep '^survivor-trainer-0 ')" "$(pod_uids $NS survivor | grep '^survivor-trainer-0 ')"
pass "no pod was replaced or duplicated"
expect_eq "no gang restart" 0 "$(k get aj survivor -o jsonpath='{.status.restarts}')"
k delete aj survivor --wait=true --timeout=60s >/dev/null || fail "kubectl delete aj did not finish"
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
