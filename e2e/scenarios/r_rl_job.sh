#!/usr/bin/env bash
# Scenario (r): an RL job through the operator, end to end. The chart is
# installed (the operator as a pod); examples/jobs/rl-tiny.yaml is applied with
# its two hostPaths moved into the suite's state dir: the tiny model (made here
# by `areal-worker tiny`) and the job directory the trainer and the rollout
# server share. The rollout pod runs `areal-worker serve`, the trainer pod
# `areal-worker train` with spec.config from the job's ConfigMap (mounted at
# /etc/areal by the node simulator, AREAL_CONFIG); the operator reads the
# trainer's /status into status.progress (printer columns, TrainerPhase
# Events, areal_job_* metrics); the job Succeeds after totalSteps with the
# reward rising, and status.progress ends at step totalSteps with trainerPhase
# done (the trainer's final status, through its termination message, even
# when its last steps ran within one poll period); helm uninstall leaves
# nothing.
. "$(dirname "$0")/lib.sh"
. "$SCEN_DIR/chart_lib.sh"
NS=e2e-r
# totalSteps: the example's 60 steps take ~2 s on an idle machine, less than one 5 s progress
# poll, so the Running row and the training TrainerPhase would go unseen; 300 take 10-60 s
STEPS=300
BIN=${AREAL_BIN:-$REPO/build/rel}
fresh_namespace $NS
k() { kubectl -n $NS "$@"; }
cleanup() {
    if [ "${ok:-0}" != 1 ]; then
        operator_pod_logs
        k get pods,aj -o wide 2>&1 || true
        for p in rl-tiny-trainer-0 rl-tiny-rollout-0; do echo "--- $p"; pod_log $NS $p 2>/dev/null | tail -n 15; done
        keep_operator_logs
        # its pods must not outlive a failure (a trainer holds its port in the simulator's shared netns)
        kubectl -n $NS delete aj --all --wait=false >/dev/null 2>&1 || true
        kubectl -n $NS delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
        helm uninstall "$REL" -n "$OPNS" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT

t0=$SECONDS
models=$AREAL_E2E_STATE/models
OPNS=e2e-r-system
mkdir -p "$models" "$AREAL_E2E_STATE/jobs"
"$BIN/areal-worker" tiny --out "$models/tiny" >"$AREAL_E2E_STATE/tiny.log" 2>&1 ||
    fail "areal-worker tiny: $(tail -n 3 "$AREAL_E2E_STATE/tiny.log")"
pass "tiny model made in $((SECONDS - t0)) s: $(tail -n 1 "$AREAL_E2E_STATE/tiny.log")"
chart_install e2e-r-system --set replicaCount=1 --set leaderElection.enabled=false ||
    fail "helm install did not become ready: $(kubectl -n e2e-r-system get pods -o wide 2>&1)"
pass "helm install: the operator runs as pod $(operator_pods)"

# The example as it is, but for the two host paths of its volumes and totalSteps.
kubectl create --dry-run=client -o json -f "$REPO/examples/jobs/rl-tiny.yaml" |
    python3 -c '
import json, sys
job = json.load(sys.stdin)
job["metadata"].pop("namespace", None)
models, jobs = sys.argv[1], sys.argv[2]
job["spec"]["config"]["rl"]["totalSteps"] = int(sys.argv[3])
for role in job["spec"]["roles"]:
    for v in role.get("volumes", []):
        p = v["hostPath"]["path"]
        v["hostPath"]["path"] = p.replace("/var/lib/areal/models", models).replace("/var/lib/areal/jobs", jobs)
json.dump(job, sys.stdout)' "$models" "$AREAL_E2E_STATE/jobs" $STEPS | k apply -f - >/dev/null
t1=$SECONDS
wait_until 60 pods_running $NS rl-tiny 2 || fail "the job's 2 pods did not run: $(k get pods -o wide 2>&1)"
pass "rollout and trainer pods Running in $((SECONDS - t1)) s"
expect_eq "the trainer reads spec.config where AREAL_CONFIG says" "/etc/areal/config.json" \
    "$(k get pod rl-tiny-trainer-0 -o jsonpath='{.spec.containers[0].env[?(@.name=="AREAL_CONFIG")].value}')"

step_of() { k get aj rl-tiny -o jsonpath='{.status.progress.step}'; }
stepping() { [ "$(step_of)" -ge 2 ] 2>/dev/null; }
wait_until 150 stepping || fail "status.progress.step did not reach 2: $(k get aj rl-tiny -o jsonpath='{.status.progress}')"
pass "status.progress from the trainer's /status: $(k get aj rl-tiny -o jsonpath='{.status.progress}')"
row=$(k get aj rl-tiny --no-headers | tr -s ' ')
case "$row" in "rl-tiny Running sglang:d1+fsdp:d1 "*) pass "kubectl get aj: $row" ;; *) fail "kubectl get aj row: $row" ;; esac
metrics=$(operator_metrics "$(operator_pods)") || fail "no /metrics over https (a reader's token) from $(operator_pods)"
grep -q "^areal_job_step{namespace=\"$NS\",job=\"rl-tiny\"}" <<<"$metrics" ||
    fail "the operator's /metrics has no areal_job_step for the job"
pass "the operator's /metrics: $(grep "^areal_job_reward_mean{namespace=\"$NS\"" <<<"$metrics")"

wait_until 240 phase_is $NS rl-tiny Succeeded || fail "job phase $(job_phase $NS rl-tiny) after $((SECONDS - t1)) s, want Succeeded"
pass "the job Succeeded $((SECONDS - t1)) s after it was applied"
# (into a variable first: grep -q ending a pipe early would fail it under pipefail)
phases=$(k get events --field-selector involvedObject.name=rl-tiny,reason=TrainerPhase -o jsonpath='{range .items[*]}{.message}; {end}')
case "$phases" in *"trainer phase training"*) ;; *) fail "no TrainerPhase event for training; the job's events: $(k get events --field-selector involvedObject.name=rl-tiny 2>&1)" ;; esac
pass "TrainerPhase Events: $phases"
# The trainer's progress lines: the reward of the first and the last steps.
pod_log $NS rl-tiny-trainer-0 | python3 -c '
import json, sys
r = []
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"):
        continue
    try:
        d = json.loads(line)
    except ValueError:
        continue
    if isinstance(d.get("reward_mean"), (int, float)) and isinstance(d.get("step"), int) and d["step"] > 0:
        r.append((d["step"], d["reward_mean"]))
if len(r) < 20:
    sys.exit("only %d progress lines with a reward" % len(r))
k = len(r) // 4
first = sum(x for _, x in r[:k]) / k
last = sum(x for _, x in r[-k:]) / k
print("steps %d..%d: reward %.3f (first %d steps) -> %.3f (last %d)" % (r[0][0], r[-1][0], first, k, last, k))
if r[-1][0] != int(sys.argv[1]):
    sys.exit("the last step is %d, not totalSteps %s" % (r[-1][0], sys.argv[1]))
sys.exit(0 if last > first + 0.03 else "the reward did not rise")' $STEPS >"$AREAL_E2E_STATE/reward.txt" 2>&1 ||
    fail "reward: $(cat "$AREAL_E2E_STATE/reward.txt")"
pass "trainer log: $(cat "$AREAL_E2E_STATE/reward.txt")"
# The trainer exits at once after its last step, often within one poll period
# (5 s): its final /status comes back as the trainer container's termination
# message (terminationMessagePath, File), which the operator writes into
# status.progress once the pod has terminated. A poll round after Succeeded.
expect_eq "the trainer container's terminationMessagePath" "/var/run/areal/termination-log" \
    "$(k get pod rl-tiny-trainer-0 -o jsonpath='{.spec.containers[0].terminationMessagePath}')"
words=$(k get pod rl-tiny-trainer-0 -o jsonpath='{.status.containerStatuses[0].state.terminated.message}')
python3 -c 'import json, sys; d = json.loads(sys.argv[1]); sys.exit(0 if d["phase"] == "done" and d["step"] == int(sys.argv[2]) else 1)' "$words" $STEPS 2>/dev/null ||
    fail "the trainer's termination message is not its final status (done at $STEPS): '$words'"
pass "the trainer's termination message: ${words:0:80}..."
final_progress() { [ "$(step_of)" = $STEPS ] && [ "$(k get aj rl-tiny -o jsonpath='{.status.progress.trainerPhase}')" = done ]; }
wait_until 30 final_progress ||
    fail "status.progress after Succeeded: $(k get aj rl-tiny -o jsonpath='{.status.progress}'), want step $STEPS (totalSteps) and trainerPhase done"
expect_eq "status.progress.totalSteps" $STEPS "$(k get aj rl-tiny -o jsonpath='{.status.progress.totalSteps}')"
pass "status.progress ended at step $(step_of) of $STEPS, trainerPhase done (the final status)"
phases=$(k get events --field-selector involvedObject.name=rl-tiny,reason=TrainerPhase -o jsonpath='{range .items[*]}{.message}; {end}')
case "$phases" in *"trainer phase done"*) pass "TrainerPhase Events: $phases" ;;
    *) fail "no TrainerPhase event for done: $phases" ;; esac

k delete aj rl-tiny --wait=true --timeout=60s >/dev/null || fail "the job was not deleted"
chart_uninstall
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
pass "scenario time $((SECONDS - t0)) s"
