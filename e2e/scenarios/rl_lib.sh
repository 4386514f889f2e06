# e2e/scenarios/rl_lib.sh - helpers of the scenarios that train
# examples/jobs/rl-elastic.yaml through the in-cluster operator while they
# scale or kill its pods (u_rl_scale, v_rl_kill; sourced after lib.sh and
# chart_lib.sh).
# shellcheck shell=bash
#
# The job's two hostPaths move into the suite's state dir: the tiny model
# (made once per suite by `areal-worker tiny --warmup-steps 100`, shared by
# these scenarios; r_rl_job makes its own, warmer one, since it checks that
# the reward rises) and a job directory of the scenario's own ($JOBDIR:
# progress.jsonl, weight updates, recover/).
BIN=${AREAL_BIN:-$REPO/build/rel}
JOB=rl-elastic

# rl_setup NS OPNS: the tiny model, the chart (one operator pod), the job dir.
rl_setup() {
    local t0=$SECONDS
    MODELS=$AREAL_E2E_STATE/models-elastic
    JOBDIR=$AREAL_E2E_STATE/jobs-$1/$JOB
    mkdir -p "$MODELS" "$AREAL_E2E_STATE/jobs-$1"
    rm -rf "$JOBDIR"
    if [ ! -f "$MODELS/tiny/model.safetensors" ]; then
        "$BIN/areal-worker" tiny --out "$MODELS/tiny" --warmup-steps 100 >"$MODELS/tiny.log" 2>&1 ||
            fail "areal-worker tiny: $(tail -n 3 "$MODELS/tiny.log")"
        pass "tiny model made in $((SECONDS - t0)) s"
    fi
    chart_install "$2" --set replicaCount=1 --set leaderElection.enabled=false ||
        fail "helm install did not become ready: $(kubectl -n "$2" get pods -o wide 2>&1)"
    pass "helm install: the operator runs as pod $(operator_pods)"
}

# rl_apply NS TOTAL_STEPS REPLICAS: examples/jobs/rl-elastic.yaml with its host
# paths moved, totalSteps and spec.rollout.replicas set.
rl_apply() {
    kubectl create --dry-run=client -o json -f "$REPO/examples/jobs/rl-elastic.yaml" |
        python3 -c '
import json, sys
job = json.load(sys.stdin)
job["metadata"].pop("namespace", None)
models, jobs, steps, replicas = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
job["spec"]["config"]["rl"]["totalSteps"] = steps
job["spec"]["rollout"]["replicas"] = replicas
for role in job["spec"]["roles"]:
    for v in role.get("volumes", []):
        p = v["hostPath"]["path"]
        v["hostPath"]["path"] = p.replace("/var/lib/areal/models", models).replace("/var/lib/areal/jobs", jobs)
json.dump(job, sys.stdout)' "$MODELS" "$(dirname "$JOBDIR")" "$2" "$3" | kubectl -n "$1" apply -f - >/dev/null
}

# last_step: the newest step of progress.jsonl (0 before the first).
last_step() {
    local s
    s=$(grep -o '"step":[0-9]*' "$JOBDIR/progress.jsonl" 2>/dev/null | tail -n 1 | cut -d: -f2)
    echo "${s:-0}"
}
step_at_least() { [ "$(last_step)" -ge "$1" ]; }

# trainer_log NS: the newest trainer incarnation's container log.
trainer_log() { pod_log "$1" $JOB-trainer-0; }
trainer_says() { trainer_log "$1" | grep -F -- "$2" >/dev/null; }

# pod_uid NS POD
pod_uid() { kubectl -n "$1" get pod "$2" -o jsonpath='{.metadata.uid}' 2>/dev/null; }
pod_gone() { ! kubectl -n "$1" get pod "$2" >/dev/null 2>&1; }

# server_joined NS INDEX: the trainer logged rollout server INDEX registering
# and, when it came behind the policy, getting the current weights.
server_joined() {
    local log line addr
    log=$(trainer_log "$1")
    line=$(grep -F "rollout server $JOB-rollout-$2 registered" <<<"$log" | tail -n 1)
    [ -n "$line" ] || return 1
    case "$line" in *"it takes requests"*) return 0 ;; esac
    addr=$(sed -n 's/.* at \([0-9.:]*\) with weight version.*/\1/p' <<<"$line")
    grep -qF "rollout server $addr has the current weights" <<<"$log"
}

# rl_stop_pods NS: the failure branch of an RL scenario's EXIT trap deletes
# its jobs and force-deletes their pods, so a trainer left running cannot hold
# its port (the node simulator's pods share one network namespace) or a core
# for the scenarios after it.
rl_stop_pods() {
    kubectl -n "$1" delete aj --all --wait=false >/dev/null 2>&1 || true
    kubectl -n "$1" delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
}

# server_metric NS POD NAME: a sample of the rollout server's /metrics.
server_metric() {
    local ip
    ip=$(kubectl -n "$1" get pod "$2" -o jsonpath='{.status.podIP}')
    curl -sf "http://$ip:30000/metrics" | awk -v m="$3" '$1 == m {print $2; exit}'
}

# job_events NS REASON: the messages of the job's Events of REASON.
job_events() {
    kubectl -n "$1" get events --field-selector "involvedObject.name=$JOB,reason=$2" \
        -o jsonpath='{range .items[*]}{.message}{"\n"}{end}'
}

# progress_check FIRST LAST [FROM_LINE]: progress.jsonl (from line FROM_LINE)
# holds every step FIRST..LAST exactly once, each with B x G = 128 samples,
# no dropped group and no answer from a server behind the policy; prints a
# summary (resubmitted requests, most servers in use).
progress_check() {
    python3 - "$JOBDIR/progress.jsonl" "$1" "$2" "${3:-1}" <<'PY'
import json, sys
path, first, last, skip = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
steps, resub, servers = [], 0, 0
for i, line in enumerate(open(path), 1):
    if i < skip:
        continue
    d = json.loads(line)
    if d.get("step", 0) == 0 or "samples" not in d:
        continue
    steps.append(d["step"])
    if d["samples"] != 128:
        sys.exit("step %d trained %d samples, not 128" % (d["step"], d["samples"]))
    if d["groups_rejected"] != 0:
        sys.exit("step %d: %d groups were dropped" % (d["step"], d["groups_rejected"]))
    if d["stale_answers"] != 0:
        sys.exit("step %d: %d answers came from a server behind the policy" % (d["step"], d["stale_answers"]))
    resub += d["resubmits"]
    servers = max(servers, d["servers"])
want = list(range(first, last + 1))
if steps != want:
    dup = sorted({s for s in steps if steps.count(s) > 1})
    missing = sorted(set(want) - set(steps))
    sys.exit("steps %s..%s: %d lines, duplicated %s, missing %s" % (first, last, len(steps), dup[:10], missing[:10]))
print("steps %d..%d once each, 128 samples each, no group dropped, no stale answer; %d requests resubmitted; up to %d servers" % (first, last, resub, servers))
PY
}
