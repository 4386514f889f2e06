#!/usr/bin/env bash
# Scenario (k): issue 11, item 3 - the node under a running trainer stops (its
# kubelet dies: heartbeats stop, nothing confirms its pods' deletion). Once
# the node-lifecycle controller marks it NotReady and the job's
# failurePolicy.nodeLostSeconds (10) pass, the pods there are deleted with
# grace 0 and the gang is replanned on the healthy node of its pool. Bounded:
# the node grace (AREAL_E2E_NODE_GRACE, 20 s) + nodeLostSeconds + 60 s.
. "$(dirname "$0")/lib.sh"
CLUSTER=$REPO/e2e/cluster
POOL=$SCEN_DIR/nodes-pool-2x8.yaml
"$CLUSTER" nodes "$POOL" >/dev/null || fail "could not add the nodes of $POOL"
scenario_with_operator e2e-k
cleanup_k() {
    k delete aj --all --wait=false >/dev/null 2>&1 || true
    k delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
    stop_scenario_operator
    # shellcheck disable=SC2046
    "$CLUSTER" remove-node $(sed -n 's/^  - name: //p' "$POOL") >/dev/null 2>&1 || true
}
trap cleanup_k EXIT

k apply -f - >/dev/null <<'JOB'
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: orphan
spec:
  allocation: "sglang:d2+megatron:d1t2"
  failurePolicy:
    nodeLostSeconds: 10
    backoff: {initialSeconds: 1, maxSeconds: 1}
  roles:
  - name: trainer
    nodeSelector: {areal.io/e2e-pool: k}
    args: ["--hold-ms", "300000"]
  - name: rollout
    nodeSelector: {areal.io/e2e-pool: k}
    args: ["--hold-ms", "300000"]
JOB
wait_until 60 pods_running $NS orphan 3 || fail "the gang did not run: $(k get pods -o wide 2>&1)"
wait_until 30 phase_is $NS orphan Running || fail "job phase $(job_phase $NS orphan), want Running"
dead=$(k get pod orphan-trainer-0 -o jsonpath='{.spec.nodeName}')
case "$dead" in gpu-node-2[01]) ;; *) fail "the trainer is on '$dead', not in the pool" ;; esac
alive=gpu-node-20
[ "$dead" = gpu-node-20 ] && alive=gpu-node-21
pass "gang running; the trainer is on $dead"

t0=$SECONDS
"$CLUSTER" stop-node "$dead"
pass "the kubelet of $dead stopped"
not_ready() {
    [ "$(kubectl get node "$dead" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" != True ]
}
wait_until 60 not_ready || fail "$dead never turned NotReady"
t_nr=$((SECONDS - t0))
pass "$dead NotReady after ${t_nr}s"

# replanned: three running pods, none on the dead node, the job Running again
replanned() {
    pods_running $NS orphan 3 &&
        [ -z "$(k get pods -l areal.io/job=orphan -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -x "$dead")" ] &&
        phase_is $NS orphan Running
}
wait_until 70 replanned || fail "not replanned within nodeLostSeconds + 60 s of NotReady: $(k get pods -o wide 2>&1; k get aj orphan -o jsonpath='{.status}')"
t_re=$((SECONDS - t0))
expect_eq "every pod of the new gang on the healthy node" "$alive" \
    "$(k get pods -l areal.io/job=orphan -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u)"
expect_eq "one gang restart" 1 "$(k get aj orphan -o jsonpath='{.status.restarts}')"
msg=$(k get events --field-selector involvedObject.name=orphan,reason=GangRestarting -o jsonpath='{.items[*].message}')
case "$msg" in *"lost"*"$dead"*) pass "the restart says why: $msg" ;; *) fail "GangRestarting event: '$msg'" ;; esac
pass "replanned and Running $((t_re - t_nr))s after NotReady (${t_re}s after the stop)"
ok=1
