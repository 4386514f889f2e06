#!/usr/bin/env bash
# Scenario (s): spec.suspend mid-training. examples/jobs/rl-tiny.yaml (as in
# r_rl_job: its host paths moved into the suite's state dir, a job directory
# of its own) with a checkpoint every 3 steps, under a local
# operator. Suspended mid-training: the operator deletes both pods with their
# grace period (the trainer saves a checkpoint into the job directory on
# SIGTERM), the job stays with phase Suspended, condition Suspended=True and
# its status.progress. Resumed: the gang is planned again, the trainer (whose
# config.json the operator gives recover.mode auto) resumes from the
# checkpointed step - its log says so and its first progress line is the next
# step, not step 1 - and the job Succeeds at totalSteps.
. "$(dirname "$0")/lib.sh"
BIN=${AREAL_BIN:-$REPO/build/rel}
# progress read every 0.5 s: the job must have status.progress before it is
# suspended (the default 5 s is longer than the steps this job trains first)
scenario_with_operator e2e-s --progress-interval 0.5
t0=$SECONDS
# enough steps that the suspend lands mid-training on an idle machine too
# (the tiny model trains ~10 steps/s there; 24 steps were over before the
# suspend took effect)
STEPS=150
models=$AREAL_E2E_STATE/models
jobs=$AREAL_E2E_STATE/jobs-s
rm -rf "$jobs"
mkdir -p "$models" "$jobs"
if [ ! -f "$models/tiny/config.json" ]; then # r_rl_job may have made it already
    "$BIN/areal-worker" tiny --out "$models/tiny" >"$AREAL_E2E_STATE/tiny-s.log" 2>&1 ||
        fail "areal-worker tiny: $(tail -n 3 "$AREAL_E2E_STATE/tiny-s.log")"
fi
pass "tiny model ready ($((SECONDS - t0)) s)"

kubectl create --dry-run=client -o json -f "$REPO/examples/jobs/rl-tiny.yaml" |
    python3 -c '
import json, sys
job = json.load(sys.stdin)
job["metadata"].pop("namespace", None)
models, jobs, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
for role in job["spec"]["roles"]:
    for v in role.get("volumes", []):
        p = v["hostPath"]["path"]
        v["hostPath"]["path"] = p.replace("/var/lib/areal/models", models).replace("/var/lib/areal/jobs", jobs)
cfg = job["spec"]["config"]
cfg["rl"]["totalSteps"] = steps
cfg["recover"]["freq_steps"] = 3
json.dump(job, sys.stdout)' "$models" "$jobs" "$STEPS" | k apply -f - >/dev/null
wait_until 60 pods_running e2e-s rl-tiny 2 || fail "the job's 2 pods did not run: $(k get pods -o wide 2>&1)"
pass "rollout and trainer pods Running ($((SECONDS - t0)) s)"
expect_eq "config.json asks the trainer to recover (the operator's default)" auto \
    "$(k get cm rl-tiny-config -o jsonpath='{.data.config\.json}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["recover"]["mode"])')"
uid1=$(k get pod rl-tiny-trainer-0 -o jsonpath='{.metadata.uid}')
log1() { cat "$AREAL_E2E_STATE/pods/e2e-s_rl-tiny-trainer-0_$uid1/"*.log 2>/dev/null; }
# the last step in a trainer log's progress lines (JSON with step and reward_mean)
last_step() {
    python3 -c '
import json, sys
s = 0
for line in sys.stdin:
    line = line.strip()
    if line.startswith("{"):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d.get("step"), int) and "reward_mean" in d:
            s = d["step"]
print(s)'
}
trained() {
    [ "$(log1 | last_step)" -ge 6 ] &&
        [ "$(k get aj rl-tiny -o jsonpath='{.status.progress.step}' 2>/dev/null || echo 0)" -ge 1 ] 2>/dev/null
}
wait_until 120 trained || fail "the trainer did not reach step 6 with status.progress written: $(log1 | tail -n 5); progress $(k get aj rl-tiny -o jsonpath='{.status.progress}')"
pass "training: step $(log1 | last_step) of $STEPS ($((SECONDS - t0)) s)"

k patch aj rl-tiny --type=merge -p '{"spec":{"suspend":true}}' >/dev/null
no_pods() { [ "$(k get pods -l areal.io/job=rl-tiny --no-headers 2>/dev/null | wc -l)" = 0 ]; }
wait_until 60 no_pods || fail "pods still there after suspend: $(k get pods -o wide 2>&1)"
wait_until 15 phase_is e2e-s rl-tiny Suspended || fail "phase $(job_phase e2e-s rl-tiny), want Suspended"
pass "suspended: pods gone, job kept, phase Suspended ($((SECONDS - t0)) s)"
expect_eq "condition Suspended" True "$(k get aj rl-tiny -o jsonpath='{.status.conditions[?(@.type=="Suspended")].status}')"
# the newest committed checkpoint in the job directory (recover/step_NNNNNNNN)
newest=$(ls -d "$jobs/rl-tiny/recover/step_"* 2>/dev/null | sed -n 's/.*step_0*\([0-9][0-9]*\)$/\1/p' | sort -n | tail -n 1)
[ -n "$newest" ] || fail "no checkpoint in the job directory $jobs/rl-tiny: $(log1 | tail -n 5)"
stopped=$(log1 | sed -n 's/.*stopped at step \([0-9]*\) with a checkpoint.*/\1/p' | tail -n 1)
if [ -n "$stopped" ]; then
    expect_eq "the trainer's checkpoint on SIGTERM is the newest in the job directory" "$newest" "$stopped"
else
    # a SIGTERM that lands mid weight sync (the server stops too) ends the run
    # with an error: the last periodic checkpoint is the one to resume from
    pass "no checkpoint on SIGTERM (stopped mid-step: $(log1 | tail -n 1)); the newest periodic one is step $newest"
fi
stopped=$newest
pstep=$(k get aj rl-tiny -o jsonpath='{.status.progress.step}')
[ -n "$pstep" ] && [ "$pstep" -gt 0 ] || fail "status.progress lost while suspended: $(k get aj rl-tiny -o jsonpath='{.status}')"
pass "status.progress kept while suspended (step $pstep)"
reasons=$(k get events --field-selector involvedObject.name=rl-tiny -o jsonpath='{range .items[*]}{.reason} {end}')
case "$reasons" in *Suspended*) ;; *) fail "no Suspended Event: $reasons" ;; esac

k patch aj rl-tiny --type=merge -p '{"spec":{"suspend":false}}' >/dev/null
new_trainer() {
    local u
    u=$(k get pod rl-tiny-trainer-0 -o jsonpath='{.metadata.uid}' 2>/dev/null) && [ -n "$u" ] && [ "$u" != "$uid1" ]
}
wait_until 30 new_trainer || fail "no new trainer pod after resume: $(k get pods -o wide 2>&1)"
uid2=$(k get pod rl-tiny-trainer-0 -o jsonpath='{.metadata.uid}')
log2() { cat "$AREAL_E2E_STATE/pods/e2e-s_rl-tiny-trainer-0_$uid2/"*.log 2>/dev/null; }
# (grep without -q and python reading to the end: a reader that stops early
# makes cat die of SIGPIPE, which pipefail turns into a failed pipeline)
resumed() { log2 | grep "resumed from .*: step" >/dev/null; }
wait_until 60 resumed || fail "the new trainer did not resume: $(log2 | tail -n 5)"
rstep=$(log2 | sed -n 's/.*resumed from .*: step \([0-9]*\),.*/\1/p' | head -n 1)
expect_eq "resumed at the checkpointed step" "$stopped" "$rstep"
pass "resumed ($((SECONDS - t0)) s): $(log2 | grep -m1 'resumed from')"
wait_until 240 phase_is e2e-s rl-tiny Succeeded || fail "job phase $(job_phase e2e-s rl-tiny), want Succeeded: $(log2 | tail -n 5)"
first=$(log2 | python3 -c '
import json, sys
first = None
for line in sys.stdin:
    line = line.strip()
    if line.startswith("{"):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d.get("step"), int) and "reward_mean" in d and first is None:
            first = d["step"]
print(first)')
expect_eq "the resumed trainer's first step" "$((rstep + 1))" "$first"
expect_eq "its last step" "$STEPS" "$(log2 | last_step)"
case "$(k get events --field-selector involvedObject.name=rl-tiny -o jsonpath='{range .items[*]}{.reason} {end}')" in
*Resumed*) ;; *) fail "no Resumed Event" ;; esac
pass "Succeeded after resuming ($((SECONDS - t0)) s)"
k delete aj rl-tiny --wait=true --timeout=60s >/dev/null || fail "the job was not deleted"
ok=1
kubectl delete namespace e2e-s --wait=false >/dev/null
pass "scenario time $((SECONDS - t0)) s"
