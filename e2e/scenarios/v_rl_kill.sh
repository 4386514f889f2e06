#!/usr/bin/env bash
# Scenario (v): issue 16 - failure semantics per role on an RL job that
# trains (examples/jobs/rl-elastic.yaml with two rollout servers, a
# checkpoint every 10 steps, recover.mode auto):
#   - a rollout pod killed (SIGKILL): the operator replaces that server only
#     (one RolloutServerFailed Event, status.rolloutReplacements 1); the
#     trainer keeps training on the other server (same pod, no restart), and
#     the replacement registers again and gets the current weights;
#   - the trainer pod killed: one gang restart (GangRestarting, status.restarts
#     1) while the servers keep running (same pods); the new trainer resumes
#     from the last checkpoint, the servers register in its new store at
#     their newer weight version and are re-synced to the restored one
#     before any request; training continues from the checkpointed step,
#     every step after it once, and the job Succeeds.
# Prints the trainer restart time (pod killed -> training resumed at the
# checkpointed step).
. "$(dirname "$0")/lib.sh"
. "$SCEN_DIR/chart_lib.sh"
. "$SCEN_DIR/rl_lib.sh"
NS=e2e-v
STEPS=100
fresh_namespace $NS
k() { kubectl -n $NS "$@"; }
cleanup() {
    if [ "${ok:-0}" != 1 ]; then
        operator_pod_logs
        k get pods,aj -o wide 2>&1 || true
        k get events --field-selector involvedObject.name=$JOB 2>&1 | tail -n 12 || true
        for p in $JOB-trainer-0 $JOB-rollout-0 $JOB-rollout-1; do
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
rl_setup $NS e2e-v-system
rl_apply $NS $STEPS 2
t1=$SECONDS
wait_until 60 pods_running $NS $JOB 3 || fail "the job's 3 pods did not run: $(k get pods -o wide 2>&1)"
wait_until 90 step_at_least 3 || fail "training did not reach step 3: $(trainer_log $NS | grep -v '^{' | tail -n 5)"
both() { server_joined $NS 0 && server_joined $NS 1; }
wait_until 20 both || fail "the trainer did not discover both servers: $(trainer_log $NS | grep -F 'rollout server' | tail -n 5)"
pass "training at step $(last_step) with 2 servers, $((SECONDS - t1)) s after apply"
trainer_uid=$(pod_uid $NS $JOB-trainer-0)
r0_uid=$(pod_uid $NS $JOB-rollout-0)

# a rollout pod dies
r1_uid=$(pod_uid $NS $JOB-rollout-1)
at_kill=$(last_step)
"$REPO/e2e/cluster" kill-pod $NS $JOB-rollout-1 KILL || fail "could not kill rollout-1"
replaced() {
    local u
    u=$(pod_uid $NS $JOB-rollout-1)
    [ -n "$u" ] && [ "$u" != "$r1_uid" ] && [ "$(k get pod $JOB-rollout-1 -o jsonpath='{.status.phase}')" = Running ]
}
wait_until 60 replaced || fail "rollout-1 was not replaced: $(k get pods -o wide 2>&1)"
rejoined() { trainer_log $NS | grep -F "rollout server $JOB-rollout-1 registered again" >/dev/null && server_joined $NS 1; }
wait_until 30 rejoined || fail "the replacement did not register with the trainer: $(trainer_log $NS | grep -F 'rollout server' | tail -n 5)"
wait_until 60 step_at_least $((at_kill + 10)) || fail "training stopped after the rollout pod was killed (step $(last_step))"
pass "rollout-1 killed at step $at_kill: replaced by a new pod, registered again and synced; training continued to step $(last_step)"
expect_eq "status.rolloutReplacements" 1 "$(k get aj $JOB -o jsonpath='{.status.rolloutReplacements}')"
expect_eq "RolloutServerFailed Events" 1 "$(job_events $NS RolloutServerFailed | grep -c . || true)"
expect_eq "the trainer pod is the one it started with" "$trainer_uid" "$(pod_uid $NS $JOB-trainer-0)"
expect_eq "rollout-0 is the pod it started with" "$r0_uid" "$(pod_uid $NS $JOB-rollout-0)"
r1_uid=$(pod_uid $NS $JOB-rollout-1)

# the trainer dies, after a checkpoint
wait_until 60 step_at_least 25 || fail "training did not reach step 25 (step $(last_step))"
lines_before=$(wc -l <"$JOBDIR/progress.jsonl")
ts=$(date +%s.%N)
at_kill=$(last_step)
"$REPO/e2e/cluster" kill-pod $NS $JOB-trainer-0 KILL || fail "could not kill the trainer"
new_trainer() {
    local u
    u=$(pod_uid $NS $JOB-trainer-0)
    [ -n "$u" ] && [ "$u" != "$trainer_uid" ]
}
wait_until 60 new_trainer || fail "no new trainer pod: $(k get pods -o wide 2>&1)"
# the step it died at, read once it is dead: on an idle machine it trains ~10
# steps/s, so the step read before the kill can be one behind the checkpoint
# it wrote before the SIGKILL landed (killed "at 29", resumed from 30); a
# checkpoint may also be on disk just before its step's progress line (+1)
at_kill=$(last_step)
resumed_line() { trainer_log $NS | grep -F "resumed from" | tail -n 1; }
wait_until 60 trainer_says $NS "resumed from" || fail "the new trainer did not resume: $(trainer_log $NS | grep -v '^{' | tail -n 8)"
ckpt=$(resumed_line | sed -n 's/.*: step \([0-9]*\), version.*/\1/p')
[ -n "$ckpt" ] && [ "$ckpt" -le $((at_kill + 1)) ] && [ $((ckpt % 10)) = 0 ] && [ "$ckpt" -ge 20 ] ||
    fail "resumed at step '$ckpt' (killed at $at_kill, checkpoints every 10): $(resumed_line)"
trained_after() { tail -n +"$((lines_before + 1))" "$JOBDIR/progress.jsonl" | grep "\"step\":$((ckpt + 1))," >/dev/null; }
wait_until 90 trained_after || fail "the new trainer did not train step $((ckpt + 1)): $(trainer_log $NS | grep -v '^{' | tail -n 8)"
restart_s=$(python3 -c "import time; print('%.1f' % (time.time() - $ts))")
pass "trainer restart: $restart_s s from the trainer pod killed (step $at_kill) to step $((ckpt + 1)) trained after resuming at the checkpointed step $ckpt"
expect_eq "GangRestarting Events" 1 "$(job_events $NS GangRestarting | grep -c . || true)"
expect_eq "status.restarts" 1 "$(k get aj $JOB -o jsonpath='{.status.restarts}')"
expect_eq "rollout-0 kept running through the trainer restart" "$r0_uid" "$(pod_uid $NS $JOB-rollout-0)"
expect_eq "rollout-1 kept running through the trainer restart" "$r1_uid" "$(pod_uid $NS $JOB-rollout-1)"
# The new trainer may train its first step with one server while the other is
# still in its registration retry (0.5 s after the old store closed): wait for
# both, bounded, instead of reading the log once (and no grep at a pipeline's
# end whose empty result would end the scenario under pipefail without a word).
for i in 0 1; do
    wait_until 60 server_joined $NS $i ||
        fail "rollout-$i did not register with the new trainer and get its weights: $(trainer_log $NS | grep -F "rollout-$i" | tail -n 2 || true)"
    line=$(trainer_log $NS | grep -F "rollout server $JOB-rollout-$i registered" | tail -n 1 || true)
    pass "new trainer: $line"
done

wait_until 240 phase_is $NS $JOB Succeeded || fail "job phase $(job_phase $NS $JOB) at step $(last_step), want Succeeded"
pass "the job Succeeded $((SECONDS - t1)) s after it was applied"
expect_eq "status.restarts at the end" 1 "$(k get aj $JOB -o jsonpath='{.status.restarts}')"
from=$(grep -n -v '"samples"' "$JOBDIR/progress.jsonl" | tail -n 1 | cut -d: -f1)
summary=$(progress_check $((ckpt + 1)) $STEPS "$from") || fail "progress after the restart: $summary"
pass "progress after the restart: $summary"

k delete aj $JOB --wait=true --timeout=60s >/dev/null || fail "the job was not deleted"
chart_uninstall
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
pass "scenario time $((SECONDS - t0)) s"
