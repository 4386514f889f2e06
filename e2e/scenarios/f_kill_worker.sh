#!/usr/bin/env bash
# Scenario (f): a worker process dies (SIGKILL to a pod's container, as if it
# crashed). The node simulator reports the pod Failed with exit code 137; with
# failurePolicy.restartScope Gang the operator restarts every pod of the job
# (same names and ranks, new pods, after the backoff), and the new gang
# completes. (The default scope, Role, would replace only the killed rollout
# server and keep the trainer running.)
. "$(dirname "$0")/lib.sh"
scenario_with_operator e2e-f

k apply -f - >/dev/null <<'JOB'
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: crash
spec:
  allocation: "sglang:d2t2+megatron:d2t2"
  failurePolicy:
    maxRestarts: 2
    restartScope: Gang
    backoff: {initialSeconds: 1, maxSeconds: 2}
  roles:
  - name: trainer
    args: ["--selftest", "--hold-ms", "6000"]
  - name: rollout
    args: ["--selftest", "--hold-ms", "6000"]
JOB
wait_until 60 pods_running $NS crash 3 || fail "the job's pods did not all run: $(k get pods -o wide 2>&1)"
before=$(pod_uids $NS crash)
pass "gang running: $(echo "$before" | tr '\n' ' ')"

"$REPO/e2e/cluster" kill-pod $NS crash-rollout-1 KILL || fail "could not kill the worker of crash-rollout-1"
pass "killed the worker process of crash-rollout-1"
restarted() { [ "$(k get aj crash -o jsonpath='{.status.restarts}')" = 1 ]; }
wait_until 30 restarted || fail "no gang restart: $(k get aj crash -o jsonpath='{.status}')"
ev=$(k get events --field-selector involvedObject.name=crash,reason=GangRestarting -o jsonpath='{.items[*].message}')
case "$ev" in *"crash-rollout-1 failed (exit code 137)"*) pass "GangRestarting: $ev" ;; *) fail "GangRestarting event: '$ev'" ;; esac

newgang() {
    local now
    now=$(pod_uids $NS crash)
    [ "$(echo "$now" | grep -c .)" = 3 ] && [ -z "$(comm -12 <(echo "$before") <(echo "$now"))" ] &&
        pods_running $NS crash 3
}
wait_until 60 newgang || fail "no new gang: $(pod_uids $NS crash)"
expect_eq "the same pod names (hence ranks) again" "$(echo "$before" | cut -d' ' -f1)" \
    "$(pod_uids $NS crash | cut -d' ' -f1)"
pass "a new gang runs (new pod uids)"
wait_until 90 phase_is $NS crash Succeeded || fail "job phase $(job_phase $NS crash), want Succeeded"
pass "the job Succeeded after the restart"
expect_eq "restarts counted once" 1 "$(k get aj crash -o jsonpath='{.status.restarts}')"
verdict=$(pod_log $NS crash-trainer-0 | grep '^selftest: ' | tail -n 1)
case "$verdict" in *"all ok") pass "the new trainer's self-test: $verdict" ;; *) fail "self-test: '$verdict'" ;; esac
k delete aj crash --wait=true --timeout=60s >/dev/null || fail "kubectl delete aj did not finish"
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
