#!/usr/bin/env bash
# Scenario (j): issue 11, item 2 - the API server is killed twice while a
# gang of 33 pods (32 one-GPU rollout servers and an 8-GPU trainer, 40 GPUs on
# six nodes) is being created by an operator held to 5 requests a second.
# Afterwards every planned pod exists, then all are bound, then all run; at
# no poll is the job Running while a pod of its gang is missing, unbound or
# not running. Bounded: 240 s.
. "$(dirname "$0")/lib.sh"
CLUSTER=$REPO/e2e/cluster
EXTRA=$SCEN_DIR/nodes-extra-4x8.yaml
"$CLUSTER" nodes "$EXTRA" >/dev/null || fail "could not add the nodes of $EXTRA"
scenario_with_operator e2e-j --qps 5 --burst 5
cleanup_j() {
    k delete aj --all --wait=false >/dev/null 2>&1 || true
    k delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
    stop_scenario_operator
    # shellcheck disable=SC2046
    "$CLUSTER" remove-node $(sed -n 's/^  - name: //p' "$EXTRA") >/dev/null 2>&1 || true
}
trap cleanup_j EXIT
N=33

k apply -f - >/dev/null <<'JOB'
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: big
spec:
  allocation: "sglang:d32+megatron:d1t8"
  roles:
  - name: trainer
    args: ["--hold-ms", "300000"]
  - name: rollout
    args: ["--hold-ms", "300000"]
JOB
t0=$SECONDS
npods() { k get pods -l areal.io/job=big --no-headers 2>/dev/null | wc -l; }
at_least() { [ "$(npods)" -ge "$1" ]; }
wait_until 60 at_least 3 || fail "no pod of the gang was created: $(k get aj big -o yaml)"
pass "creation under way ($(npods) of $N pods after $((SECONDS - t0))s)"
"$CLUSTER" restart-apiserver || fail "the API server did not come back (first kill)"
have=$(npods)
pass "API server killed and back ($have of $N pods)"
[ "$have" -lt "$N" ] || echo "# note: the gang was complete before the first kill"
wait_until 60 at_least $((have + 1)) || fail "no pod created after the first restart"
"$CLUSTER" restart-apiserver || fail "the API server did not come back (second kill)"
pass "API server killed again and back ($(npods) of $N pods)"

# state: "PODS BOUND RUNNING PHASE"
state() {
    local pods phase
    pods=$(k get pods -l areal.io/job=big -o json)
    phase=$(k get aj big -o jsonpath='{.status.phase}')
    echo "$(echo "$pods" | jq '[.items[] | select(.metadata.deletionTimestamp == null)] | length')" \
        "$(echo "$pods" | jq '[.items[] | select(.metadata.deletionTimestamp == null and .spec.nodeName != null)] | length')" \
        "$(echo "$pods" | jq '[.items[] | select(.metadata.deletionTimestamp == null and .status.phase == "Running")] | length')" \
        "${phase:-none}" \
        "$(echo "$pods" | jq '[.items[] | select(.metadata.deletionTimestamp == null and .metadata.labels["areal.io/role-kind"] == "trainer" and .spec.nodeName != null and .status.phase == "Running")] | length')"
}
seen_all=0 seen_bound=0
# Running means the trainer gang (TN pods) is bound and running; the rollout
# servers are replicas the operator adds one at a time (issue 16's per-role
# semantics), so after the kills the job may be Running while servers still
# come - but never with an unbound or missing trainer pod, and every server
# must come within the bound. (The stricter "Running only with all 33" of
# issue 11 is what the pre-split operator did; see the issue note.)
TN=1
while [ $((SECONDS - t0)) -lt 240 ]; do
    read -r n b r ph tr <<<"$(state)" || continue
    if [ "$ph" = Running ] && [ "$tr" != $TN ]; then
        fail "the job is Running with $tr of $TN trainer pods bound and running ($n pods, $b bound, $r running of $N)"
    fi
    [ "$n" = $N ] && [ "$seen_all" = 0 ] && seen_all=$((SECONDS - t0))
    [ "$b" = $N ] && [ "$seen_bound" = 0 ] && seen_bound=$((SECONDS - t0))
    [ "$ph" = Running ] && [ "$n" = $N ] && [ "$b" = $N ] && [ "$r" = $N ] && break
    sleep 1
done
expect_eq "the whole gang exists, bound and running, and the job says Running" "$N $N $N Running" "$n $b $r $ph"
pass "all $N pods existed after ${seen_all}s, all bound after ${seen_bound}s, Running after $((SECONDS - t0))s"
pass "gang restarts: $(k get aj big -o jsonpath='{.status.restarts}')"
ok=1
