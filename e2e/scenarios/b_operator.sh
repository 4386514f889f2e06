#!/usr/bin/env bash
# Scenario (b): a job runs end to end. The operator plans it, creates its
# children and binds the pods as one gang exactly where `arealctl plan` puts
# them for the same inventory; the node simulator runs each pod's areal-worker
# (pod IP, hosts file, downward-API env); the workers find the store through
# MASTER_ADDR (the trainer rank-0 pod's name under the headless Service), join
# their groups and pass the collective self-test; the trainer's rank-0 pod
# exits 0 and the job Succeeds.
. "$(dirname "$0")/lib.sh"
NS=e2e-b
fresh_namespace $NS
k() { kubectl -n $NS "$@"; }
BIN=${AREAL_BIN:-$REPO/build/rel}
[ -x "$BIN/areal-operator" ] && [ -x "$BIN/arealctl" ] || fail "build areal-operator and arealctl first (make)"

log=$(operator_log b_operator)
start_operator "$log" --leader-elect --lease-namespace $NS --id e2e-operator
cleanup() {
    kill "$OP_PID" 2>/dev/null || true
    wait "$OP_PID" 2>/dev/null || true
    if [ "${ok:-0}" != 1 ]; then
        echo "--- operator log (tail)"
        tail -n 40 "$log"
        k get pods -o wide 2>&1 || true
    fi
    drop_operator_log "$log"
}
trap cleanup EXIT

# --hold-ms keeps the ranks up after the self-test, so the running gang can be
# inspected before it finishes.
k apply -f - >/dev/null <<'JOB'
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: gang
spec:
  allocation: "sglang:d2t2+megatron:d2p2t2"
  image: areal/worker:latest
  roles:
  - name: trainer
    args: ["--selftest", "--hold-ms", "15000"]
  - name: rollout
    args: ["--selftest", "--hold-ms", "15000"]
JOB
pass "job applied"

want=$("$BIN/arealctl" plan --alloc 'sglang:d2t2+megatron:d2p2t2' --job gang \
    --cluster "$SCEN_DIR/nodes-2x8.yaml" --json |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print("\n".join(sorted(p["name"]+" "+p["node"] for r in d["roles"] for p in r["pods"])))')
npods=$(echo "$want" | wc -l)
wait_until 60 pods_running $NS gang "$npods" || fail "the gang's $npods pods did not all run: $(k get pods -o wide 2>&1)"
pass "all $npods pods Running (the node simulator started them)"
got=$(k get pods -l areal.io/job=gang -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}' | sort)
expect_eq "pods bound exactly where arealctl plan puts them" "$want" "$got"
expect_eq "pods name the operator as their scheduler" areal-operator \
    "$(k get pod gang-trainer-0 -o jsonpath='{.spec.schedulerName}')"
env_of() { k get pod "$1" -o jsonpath="{.spec.containers[0].env[?(@.name==\"$2\")].value}"; }
expect_eq "trainer pod holds ranks 0..7" "0 8" \
    "$(env_of gang-trainer-0 AREAL_POD_FIRST_RANK) $(env_of gang-trainer-0 AREAL_POD_RANKS)"
expect_eq "MASTER_ADDR names the trainer rank-0 pod" gang-trainer-0.gang \
    "$(env_of gang-rollout-1 MASTER_ADDR)"
expect_eq "headless service" None "$(k get svc gang -o jsonpath='{.spec.clusterIP}')"
expect_eq "config map" "sglang:d2t2+megatron:d2p2t2" "$(k get cm gang-config -o jsonpath='{.data.allocation}')"
ips=$(k get pods -l areal.io/job=gang -o jsonpath='{range .items[*]}{.status.podIP}{"\n"}{end}' | sort -u | grep -c '^127\.')
expect_eq "every pod has its own pod IP" "$npods" "$ips"
ready=$(k get pod gang-trainer-0 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.containerStatuses[0].state.running.startedAt}')
case "$ready" in "True "?*) pass "trainer-0 Ready, container running since ${ready#True }" ;; *) fail "trainer-0 status: $ready" ;; esac
expect_eq "condition Scheduled=GangBound" GangBound \
    "$(k get aj gang -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].reason}')"
wait_until 20 phase_is $NS gang Running || fail "job phase $(job_phase $NS gang), want Running"
row=$(k get aj gang --no-headers | tr -s ' ' | cut -d' ' -f1-4)
expect_eq "kubectl get aj" "gang Running sglang:d2t2+megatron:d2p2t2 12" "$row"
k describe aj gang | grep -q GangBound || fail "kubectl describe aj shows no GangBound event"
pass "kubectl describe aj shows the GangBound event"
curl -sf "http://127.0.0.1:$(sed -n 's/.*"metrics":"[^"]*:\([0-9]*\)".*/\1/p' "$log")/metrics" |
    grep -q '^areal_reconciles_total' || fail "/metrics has no areal_reconciles_total"
pass "/metrics serves the controller's counters"

# The workers' own account: the pod's IP from the downward API, names from the
# hosts file, and the self-test of every group.
wait_until 90 phase_is $NS gang Succeeded || fail "job phase $(job_phase $NS gang), want Succeeded"
pass "the job Succeeded"
expect_eq "trainer rank-0 container exited 0" "0 Completed" \
    "$(k get pod gang-trainer-0 -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode} {.status.containerStatuses[0].state.terminated.reason}')"
# rank 0 of each role prints the verdict; every rank prints its groups
for p in gang-trainer-0 gang-rollout-0; do
    verdict=$(pod_log $NS $p | grep '^selftest: ' | tail -n 1)
    case "$verdict" in *"all ok") pass "$p: $verdict" ;; *) fail "$p self-test: '$verdict'; log: $(pod_log $NS $p | tail -n 5)" ;; esac
done
expect_eq "trainer self-test covered all 8 trainer ranks" 1 \
    "$(pod_log $NS gang-trainer-0 | grep -c '^selftest: 8 rank(s)')"
groups=$(pod_log $NS gang-rollout-1 | grep -c '^selftest group .*: ok (8 checks)$')
[ "$groups" -gt 0 ] || fail "gang-rollout-1 reported no passing group: $(pod_log $NS gang-rollout-1 | tail -n 5)"
pod_log $NS gang-rollout-1 | grep -q 'wrong result' && fail "gang-rollout-1: $(pod_log $NS gang-rollout-1 | grep 'wrong result')"
pass "gang-rollout-1 (ranks 2-3): $groups group checks ok, none wrong"

# A job that cannot fit stays Pending with the planner's reason.
k apply -f - >/dev/null <<'JOB'
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: huge
spec:
  allocation: "megatron:d8t8"
JOB
reason_is() { [ "$(k get aj huge -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].reason}')" = "$1" ]; }
wait_until 30 reason_is Unschedulable || fail "huge job not Unschedulable"
msg=$(k get aj huge -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].message}')
case "$msg" in *"needs 64 GPUs"*) pass "unplaceable job is Unschedulable: $msg" ;; *) fail "reason: $msg" ;; esac
expect_eq "no pods for it" 0 "$(k get pods -l areal.io/job=huge --no-headers 2>/dev/null | wc -l)"
k delete aj gang huge --wait=true --timeout=60s >/dev/null || fail "kubectl delete aj did not finish"
gone() { [ "$(k get pods,svc,cm -l areal.io/job=gang --no-headers 2>/dev/null | wc -l)" = 0 ]; }
wait_until 30 gone || fail "children of gang left: $(k get pods,svc,cm -l areal.io/job=gang --no-headers 2>&1)"
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
