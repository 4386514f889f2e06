#!/usr/bin/env bash
# Scenario (u): issue 16 - an RL job's rollout servers scaled 1 -> 3 -> 1
# mid-training through the scale subresource (examples/jobs/rl-elastic.yaml,
# the operator in-cluster). The trainer, hosting the job's store, discovers
# the two new servers as they register; each serves the policy's current
# version before its first request (it registered at another version and the
# trainer sent it the latest weights, or it came at the current one); both
# take requests (their /metrics). Scaled back to 1, each drains (stops
# admitting, finishes or aborts what runs, deregisters: the trainer logs it)
# and its pod goes. Through it all the trainer is never restarted (same pod,
# status.restarts 0) and its progress holds every step once with 128 samples,
# no group dropped, no answer from a server behind the policy; the job
# Succeeds. Prints the scale-up latency (kubectl scale -> both new servers
# registered and serving the current version) and the drain time.
. "$(dirname "$0")/lib.sh"
. "$SCEN_DIR/chart_lib.sh"
. "$SCEN_DIR/rl_lib.sh"
NS=e2e-u
STEPS=120
fresh_namespace $NS
k() { kubectl -n $NS "$@"; }
cleanup() {
    if [ "${ok:-0}" != 1 ]; then
        operator_pod_logs
        k get pods,aj -o wide 2>&1 || true
        for p in $JOB-trainer-0 $JOB-rollout-0 $JOB-rollout-1 $JOB-rollout-2; do
            echo "--- $p"
            pod_log $NS $p 2>/dev/null | grep -v '^{' | tail -n 15
        done
        keep_operator_logs
        rl_stop_pods $NS
        helm uninstall "$REL" -n "$OPNS" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT
t0=$SECONDS
rl_setup $NS e2e-u-system
rl_apply $NS $STEPS 1
t1=$SECONDS
wait_until 60 pods_running $NS $JOB 2 || fail "the job's 2 pods did not run: $(k get pods -o wide 2>&1)"
wait_until 90 step_at_least 3 || fail "training did not reach step 3: $(trainer_log $NS | grep -v '^{' | tail -n 5)"
wait_until 10 server_joined $NS 0 || fail "the trainer did not discover rollout-0: $(trainer_log $NS | grep -v '^{' | tail -n 5)"
pass "training at step $(last_step) $((SECONDS - t1)) s after apply; the trainer discovered rollout-0 through the job's store"
trainer_uid=$(pod_uid $NS $JOB-trainer-0)

# 1 -> 3
ts=$(date +%s.%N)
k scale aj $JOB --replicas=3 >/dev/null || fail "kubectl scale --replicas=3"
at_scale=$(last_step)
both_joined() { server_joined $NS 1 && server_joined $NS 2; }
wait_until 60 both_joined || fail "rollout-1 and rollout-2 did not join: $(trainer_log $NS | grep -F 'rollout server' | tail -n 8)"
up_s=$(python3 -c "import time; print('%.1f' % (time.time() - $ts))")
pass "scale-up latency: $up_s s from kubectl scale --replicas=3 to both new servers registered and serving the current version (step $at_scale -> $(last_step))"
trainer_log $NS | grep -F "rollout server $JOB-rollout-" | grep -F "registered" | while read -r l; do pass "trainer: $l"; done
three() { grep -q '"servers":3' "$JOBDIR/progress.jsonl"; }
wait_until 30 three || fail "no step trained with 3 servers up: $(tail -n 1 "$JOBDIR/progress.jsonl")"
served() { [ "$(server_metric $NS $JOB-rollout-$1 sglang:num_requests_total)" -gt 0 ] 2>/dev/null; }
wait_until 20 served 1 && wait_until 20 served 2 ||
    fail "a new server took no request: rollout-1 $(server_metric $NS $JOB-rollout-1 sglang:num_requests_total), rollout-2 $(server_metric $NS $JOB-rollout-2 sglang:num_requests_total)"
for i in 1 2; do
    pass "rollout-$i served $(server_metric $NS $JOB-rollout-$i sglang:num_requests_total) requests, at weight version $(server_metric $NS $JOB-rollout-$i areal_rollout_weight_version) (trainer at step $(last_step))"
done
expect_eq "status.rolloutReplicas" 3 "$(k get aj $JOB -o jsonpath='{.status.rolloutReplicas}')"

# 3 -> 1
ts=$(date +%s.%N)
k scale aj $JOB --replicas=1 >/dev/null || fail "kubectl scale --replicas=1"
both_gone() { pod_gone $NS $JOB-rollout-1 && pod_gone $NS $JOB-rollout-2; }
wait_until 90 both_gone || fail "the servers did not go: $(k get pods -o wide 2>&1)"
down_s=$(python3 -c "import time; print('%.1f' % (time.time() - $ts))")
at_down=$(last_step)
[ "$at_down" -lt $STEPS ] || fail "training ended (step $at_down) before the scale-down finished: raise STEPS"
pass "scale-down drain time: $down_s s from kubectl scale --replicas=1 to both pods deleted (at step $at_down of $STEPS)"
for i in 1 2; do
    log=$(pod_log $NS $JOB-rollout-$i)
    grep -q "draining" <<<"$log" && grep -q "drained, exiting" <<<"$log" ||
        fail "rollout-$i did not drain: $(tail -n 5 <<<"$log")"
    trainer_says $NS "rollout server $JOB-rollout-$i at " ||
        fail "the trainer did not log rollout-$i leaving"
    trainer_log $NS | grep -F "rollout server $JOB-rollout-$i at " | grep deregistered >/dev/null ||
        fail "the trainer did not see rollout-$i deregister"
done
pass "rollout-1 and rollout-2 drained (SIGTERM: stop admitting, finish, deregister), the trainer saw both deregister"

wait_until 240 phase_is $NS $JOB Succeeded || fail "job phase $(job_phase $NS $JOB) at step $(last_step), want Succeeded"
pass "the job Succeeded $((SECONDS - t1)) s after it was applied"
expect_eq "the trainer pod is the one it started with" "$trainer_uid" "$(pod_uid $NS $JOB-trainer-0)"
expect_eq "status.restarts" "" "$(k get aj $JOB -o jsonpath='{.status.restarts}' | sed 's/^0$//')"
trainer_says $NS "resumed from" && fail "the trainer resumed from a checkpoint: it was restarted"
summary=$(progress_check 1 $STEPS) || fail "progress: $summary"
pass "progress: $summary"

k delete aj $JOB --wait=true --timeout=60s >/dev/null || fail "the job was not deleted"
chart_uninstall
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
pass "scenario time $((SECONDS - t0)) s"
