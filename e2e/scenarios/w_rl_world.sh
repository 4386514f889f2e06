#!/usr/bin/env bash
# Scenario (w): an RL job whose trainer has two ranks, through the operator
# (examples/jobs/rl-elastic.yaml with allocation sglang:d1+fsdp:d2, one
# rollout server, a checkpoint every 10 steps):
#   - pinned to three one-GPU nodes (nodes-pool-3x1.yaml), the trainer is two
#     pods of one rank each; each takes its rank, the world and the group's
#     rendezvous (AREAL_TRAINER_ADDR:AREAL_TRAINER_PORT, the rank-0 pod) from
#     the environment the operator wrote (areal/podenv.h), and only rank 0
#     hosts the job's store, talks to the rollout server and serves /status;
#   - the rank-1 trainer pod killed (SIGKILL): one gang restart replaces both
#     trainer pods (the rollout pod keeps running), the new rank 0 resumes
#     from the last checkpoint and the job Succeeds with status.progress.step
#     at totalSteps;
#   - on the default 8-GPU nodes a megatron:d1t2 trainer is one pod of two
#     ranks: the pod launcher runs one `train` process per rank (RANK set),
#     and that job Succeeds at its totalSteps too.
. "$(dirname "$0")/lib.sh"
. "$SCEN_DIR/chart_lib.sh"
. "$SCEN_DIR/rl_lib.sh"
NS=e2e-w
OPNS=e2e-w-system
# enough steps after the kill (at step 15 or later) that the checks after the restart run while it
# trains: 40 took 1.7 s past the restart on an idle machine, the job Succeeded and its rollout pod
# was gone before it was read
STEPS=100
CLUSTER=$REPO/e2e/cluster
POOL=$SCEN_DIR/nodes-pool-3x1.yaml
fresh_namespace $NS
k() { kubectl -n $NS "$@"; }
cleanup() {
    if [ "${ok:-0}" != 1 ]; then
        operator_pod_logs
        k get pods,aj -o wide 2>&1 || true
        k get events --field-selector involvedObject.name=$JOB 2>&1 | tail -n 12 || true
        for p in $JOB-trainer-0 $JOB-trainer-1 $JOB-rollout-0; do
            echo "--- $p"
            pod_log $NS $p 2>/dev/null | grep -v '^{' | tail -n 15
        done
        keep_operator_logs
        rl_stop_pods $NS
        helm uninstall "$REL" -n "$OPNS" >/dev/null 2>&1 || true
    fi
    # shellcheck disable=SC2046
    "$CLUSTER" remove-node $(sed -n 's/^  - name: //p' "$POOL") >/dev/null 2>&1 || true
}
trap cleanup EXIT

# apply_world NS STEPS ALLOCATION [POOL]: rl-elastic.yaml with its host paths
# moved, totalSteps, the allocation and (when given) both roles pinned to the
# pool's nodes.
apply_world() {
    kubectl create --dry-run=client -o json -f "$REPO/examples/jobs/rl-elastic.yaml" |
        python3 -c '
import json, sys
job = json.load(sys.stdin)
job["metadata"].pop("namespace", None)
models, jobs, steps, alloc, pool = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
job["spec"]["allocation"] = alloc
job["spec"]["config"]["rl"]["totalSteps"] = steps
job["spec"]["rollout"]["replicas"] = 1
for role in job["spec"]["roles"]:
    if pool:
        role["nodeSelector"] = {"areal.io/e2e-pool": pool}
    for v in role.get("volumes", []):
        p = v["hostPath"]["path"]
        v["hostPath"]["path"] = p.replace("/var/lib/areal/models", models).replace("/var/lib/areal/jobs", jobs)
json.dump(job, sys.stdout)' "$MODELS" "$(dirname "$JOBDIR")" "$2" "$3" "${4:-}" | kubectl -n "$1" apply -f - >/dev/null
}
env_of() { k get pod "$1" -o jsonpath="{.spec.containers[0].env[?(@.name==\"$2\")].value}"; }
step_of() { k get aj $JOB -o jsonpath='{.status.progress.step}'; }
at_total() { [ "$(step_of)" = "$1" ]; }

t0=$SECONDS
# the chart first, so the operator's pod lands on the suite's nodes, not on the pool's, which go
# before the uninstall (a pod of a removed node stays Terminating: "helm uninstall left" once)
rl_setup $NS $OPNS
"$CLUSTER" nodes "$POOL" >/dev/null || fail "could not add the nodes of $POOL"
apply_world $NS $STEPS "sglang:d1+fsdp:d2" w
t1=$SECONDS
wait_until 60 pods_running $NS $JOB 3 || fail "the job's 3 pods did not run: $(k get pods -o wide 2>&1)"
for r in 0 1; do
    got="$(env_of $JOB-trainer-$r AREAL_POD_FIRST_RANK)/$(env_of $JOB-trainer-$r AREAL_POD_RANKS)/$(env_of $JOB-trainer-$r WORLD_SIZE)"
    expect_eq "trainer-$r: its rank/ranks/world" "$r/1/2" "$got"
    expect_eq "trainer-$r: the group's rendezvous" "$JOB-trainer-0.$JOB:29501" \
        "$(env_of $JOB-trainer-$r AREAL_TRAINER_ADDR):$(env_of $JOB-trainer-$r AREAL_TRAINER_PORT)"
done
expect_eq "the master label" "true/" \
    "$(k get pod $JOB-trainer-0 -o jsonpath='{.metadata.labels.areal\.io/master}')/$(k get pod $JOB-trainer-1 -o jsonpath='{.metadata.labels.areal\.io/master}')"
nodes=$(k get pods -o jsonpath='{range .items[*]}{.spec.nodeName} {end}')
case "$nodes" in *gpu-node-3[0-2]*gpu-node-3[0-2]*gpu-node-3[0-2]*) ;; *) fail "the pods are not on the pool's nodes: $nodes" ;; esac
pass "trainer: 2 pods of one rank each on the one-GPU nodes ($nodes), $((SECONDS - t1)) s after apply"

wait_until 120 step_at_least 3 || fail "training did not reach step 3: $(trainer_log $NS | grep -v '^{' | tail -n 5)"
r1_says() { pod_log $NS $JOB-trainer-1 | grep -F -- "$1" >/dev/null; }
trainer_says $NS "rank 0 of 2 (the pod's ranks 0..0), the trainer group meets at $JOB-trainer-0.$JOB:29501" ||
    fail "trainer-0 did not take rank 0 from its pod: $(trainer_log $NS | grep -v '^{' | head -n 8)"
r1_says "rank 1 of 2 (the pod's ranks 1..1)" || fail "trainer-1 did not take rank 1: $(pod_log $NS $JOB-trainer-1 | head -n 8)"
trainer_says $NS "splits the model by fsdp" || fail "trainer-0 does not split the model: $(trainer_log $NS | grep -v '^{' | head -n 8)"
trainer_says $NS "the job's store on" || fail "trainer-0 does not host the job's store"
! r1_says "the job's store on" || fail "trainer-1 hosts a job store too"
server_joined $NS 0 || wait_until 30 server_joined $NS 0 || fail "the rollout server did not register with rank 0"
pass "ranks 0 and 1 formed the group at step $(last_step); rank 0 alone hosts the store and drives the rollout server"

# the rank-1 pod dies after a checkpoint: the gang (both trainer pods) restarts
wait_until 120 step_at_least 15 || fail "training did not reach step 15 (step $(last_step))"
t0_uid=$(pod_uid $NS $JOB-trainer-0)
t1_uid=$(pod_uid $NS $JOB-trainer-1)
r0_uid=$(pod_uid $NS $JOB-rollout-0)
lines_before=$(wc -l <"$JOBDIR/progress.jsonl")
at_kill=$(last_step)
ts=$(date +%s.%N)
"$CLUSTER" kill-pod $NS $JOB-trainer-1 KILL || fail "could not kill trainer-1"
both_new() {
    local a b
    a=$(pod_uid $NS $JOB-trainer-0)
    b=$(pod_uid $NS $JOB-trainer-1)
    [ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$t0_uid" ] && [ "$b" != "$t1_uid" ] &&
        [ "$(k get pod $JOB-trainer-0 -o jsonpath='{.status.phase}')" = Running ] &&
        [ "$(k get pod $JOB-trainer-1 -o jsonpath='{.status.phase}')" = Running ]
}
wait_until 120 both_new || fail "the trainer gang was not replaced whole: $(k get pods -o wide 2>&1)"
pass "trainer-1 killed: both trainer pods replaced (new uids)"
wait_until 90 trainer_says $NS "resumed from" || fail "the new rank 0 did not resume: $(trainer_log $NS | grep -v '^{' | tail -n 8)"
ckpt=$(trainer_log $NS | grep -F "resumed from" | tail -n 1 | sed -n 's/.*: step \([0-9]*\), version.*/\1/p')
[ -n "$ckpt" ] && [ $((ckpt % 10)) = 0 ] && [ "$ckpt" -ge 10 ] || fail "resumed at step '$ckpt', want a checkpoint (every 10) of at least 10"
trained_after() { tail -n +"$((lines_before + 1))" "$JOBDIR/progress.jsonl" | grep "\"step\":$((ckpt + 1))," >/dev/null; }
wait_until 120 trained_after || fail "the new gang did not train step $((ckpt + 1)): $(trainer_log $NS | grep -v '^{' | tail -n 8)"
restart_s=$(python3 -c "import time; print('%.1f' % (time.time() - $ts))")
pass "gang restart: $restart_s s from trainer-1 killed (step $at_kill) to step $((ckpt + 1)) trained by the new gang, resumed from the checkpoint at step $ckpt"
expect_eq "GangRestarting Events" 1 "$(job_events $NS GangRestarting | grep -c . || true)"
expect_eq "status.restarts" 1 "$(k get aj $JOB -o jsonpath='{.status.restarts}')"
expect_eq "the rollout pod kept running through the trainer restart" "$r0_uid" "$(pod_uid $NS $JOB-rollout-0)"

wait_until 300 phase_is $NS $JOB Succeeded || fail "job phase $(job_phase $NS $JOB) at step $(last_step), want Succeeded"
pass "the job Succeeded $((SECONDS - t1)) s after it was applied"
wait_until 30 at_total $STEPS || fail "status.progress.step is $(step_of), want totalSteps $STEPS"
expect_eq "status.progress.totalSteps" $STEPS "$(k get aj $JOB -o jsonpath='{.status.progress.totalSteps}')"
from=$(grep -n -v '"samples"' "$JOBDIR/progress.jsonl" | tail -n 1 | cut -d: -f1)
summary=$(progress_check $((ckpt + 1)) $STEPS "$from") || fail "progress after the restart: $summary"
pass "status.progress.step $STEPS of $STEPS; after the restart: $summary"
k delete aj $JOB --wait=true --timeout=60s >/dev/null || fail "the job was not deleted"
no_pods() { [ -z "$(k get pods -o name 2>/dev/null)" ]; }
wait_until 60 no_pods || fail "the job's pods outlived it: $(k get pods -o wide 2>&1)"
# shellcheck disable=SC2046
"$CLUSTER" remove-node $(sed -n 's/^  - name: //p' "$POOL") >/dev/null || fail "could not remove the pool's nodes"

# two ranks in one pod (8-GPU nodes): the pod launcher runs both
STEPS=20
rm -rf "$JOBDIR"
apply_world $NS $STEPS "sglang:d1+megatron:d1t2"
t1=$SECONDS
wait_until 60 pods_running $NS $JOB 2 || fail "the job's 2 pods did not run: $(k get pods -o wide 2>&1)"
expect_eq "trainer-0: its rank/ranks/world" "0/2/2" \
    "$(env_of $JOB-trainer-0 AREAL_POD_FIRST_RANK)/$(env_of $JOB-trainer-0 AREAL_POD_RANKS)/$(env_of $JOB-trainer-0 WORLD_SIZE)"
wait_until 120 step_at_least 2 || fail "training did not reach step 2: $(trainer_log $NS | grep -v '^{' | tail -n 8)"
trainer_says $NS "rank 1 of 2 (the pod's ranks 0..1)" || fail "no second rank in the pod: $(trainer_log $NS | grep -v '^{' | head -n 10)"
trainer_says $NS "splits the model by megatron:d1t2" || fail "the pod's ranks do not split the model by t2"
pass "one pod, two rank processes (the launcher), the model split by t2"
wait_until 240 phase_is $NS $JOB Succeeded || fail "job phase $(job_phase $NS $JOB) at step $(last_step), want Succeeded"
wait_until 30 at_total $STEPS || fail "status.progress.step is $(step_of), want totalSteps $STEPS"
pass "the one-pod two-rank job Succeeded at step $(step_of) of $STEPS, $((SECONDS - t1)) s after it was applied"

k delete aj $JOB --wait=true --timeout=60s >/dev/null || fail "the job was not deleted"
chart_uninstall
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
pass "scenario time $((SECONDS - t0)) s"
