#!/usr/bin/env bash
# Scenario (a): the AReaLJob CRD - schema, CEL rules, printer columns, status
# and scale subresources - against the real API server.
#
# Every manifest in examples/jobs/bad/ names the message it must be rejected
# with on its "# expect:" line; the valid example must be accepted.
. "$(dirname "$0")/lib.sh"
NS=e2e-a
fresh_namespace $NS
k() { kubectl -n $NS "$@"; }

expect_eq "CRD established" True \
    "$(kubectl get crd arealjobs.areal.io -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')"
expect_eq "short name aj" aj "$(kubectl get crd arealjobs.areal.io -o jsonpath='{.spec.names.shortNames[0]}')"

k apply -f "$REPO/examples/jobs/small.yaml" >/dev/null || fail "the valid example examples/jobs/small.yaml was rejected"
pass "valid job accepted"
expect_eq "fields kept (not pruned)" 2 "$(k get aj small -o jsonpath='{.spec.rollout.replicas}')"

n=0
for f in "$REPO"/examples/jobs/bad/*.yaml; do
    want=$(sed -n 's/^# expect: //p' "$f")
    [ -n "$want" ] || fail "$f has no '# expect:' line"
    expect_fail "rejects $(basename "$f")" "$want" k apply -f "$f"
    n=$((n + 1))
done
[ $n -ge 10 ] || fail "only $n bad manifests found"

# Status subresource: the operator's writes go through /status; a status in
# a plain update is ignored.
k patch aj small --subresource=status --type=merge -p '{"status": {"phase": "Running",
    "gpus": 12, "pods": 4, "readyPods": 3, "progress": {"step": 7}, "rolloutReplicas": 2,
    "rolloutSelector": "areal.io/job=small,areal.io/role-kind=rollout", "observedGeneration": 1}}' >/dev/null
k patch aj small --type=merge -p '{"status": {"phase": "Failed"}}' >/dev/null
expect_eq "status only through the subresource" Running "$(k get aj small -o jsonpath='{.status.phase}')"

# What the operator writes survives the schema (issue 11: placement quality
# keys like "trainer/tp" were pruned, and pods had no role or ranks).
k patch aj small --subresource=status --type=merge -p '{"status": {"trainerPods": 2,
    "rolloutReplacements": 1,
    "defaults": {"failurePolicy": {"maxRestarts": 3, "containerErrorSeconds": 300}},
    "placement": {"pods": [{"pod": "small-trainer-0", "node": "n0", "role": "trainer", "ranks": "0-3"}],
                  "quality": {"trainer/tp": {"groups": 2, "withinNode": 2}}}}}' >/dev/null
expect_eq "placement quality keeps its dynamic keys" 2 \
    "$(k get aj small -o "jsonpath={.status.placement.quality['trainer/tp'].withinNode}")"
expect_eq "placement pods keep role and ranks" "trainer 0-3" \
    "$(k get aj small -o jsonpath='{.status.placement.pods[0].role} {.status.placement.pods[0].ranks}')"
expect_eq "status.defaults kept" 300 \
    "$(k get aj small -o jsonpath='{.status.defaults.failurePolicy.containerErrorSeconds}')"
expect_eq "status.trainerPods and rolloutReplacements kept" "2 1" \
    "$(k get aj small -o jsonpath='{.status.trainerPods} {.status.rolloutReplacements}')"

header=$(k get aj | awk 'NR == 1' | tr -s ' ')
expect_eq "printer columns" "NAME PHASE ALLOCATION GPUS READY STEP VERSION REWARD AGE" "$header"
row=$(k get aj small --no-headers | tr -s ' ' | cut -d' ' -f1-6)
expect_eq "printer row" "small Running sglang:d2t2+megatron:d2p2t2 12 3 7" "$row"
expect_eq "category 'areal'" small "$(k get areal -o jsonpath='{.items[*].metadata.name}')"

# Scale subresource on the rollout replicas.
k scale aj small --replicas=3 >/dev/null || fail "kubectl scale aj small --replicas=3 failed"
expect_eq "kubectl scale sets spec.rollout.replicas" 3 "$(k get aj small -o jsonpath='{.spec.rollout.replicas}')"
expect_eq "scale subresource selector" "areal.io/job=small,areal.io/role-kind=rollout" \
    "$(k get aj small --subresource=scale -o jsonpath='{.status.selector}')"
expect_eq "scale subresource status replicas" 2 "$(k get aj small --subresource=scale -o jsonpath='{.status.replicas}')"
expect_fail "scale above maxReplicas rejected" "spec.rollout.replicas" k scale aj small --replicas=9

# Fields that may not change while the job runs.
expect_fail "allocation immutable while not suspended" "spec.allocation" \
    k patch aj small --type=merge -p '{"spec": {"allocation": "sglang:d4t2+megatron:d2p2t2"}}'
expect_fail "topology immutable while not suspended" "spec.topology" \
    k patch aj small --type=merge -p '{"spec": {"topology": {"levels": [{"label": "topology.kubernetes.io/zone"}]}}}'
k patch aj small --type=merge -p '{"spec": {"suspend": true}}' >/dev/null
k patch aj small --type=merge -p '{"spec": {"allocation": "sglang:d4t2+megatron:d2p2t2"}}' >/dev/null ||
    fail "allocation change while suspended was rejected"
pass "allocation may change while suspended"
expect_eq "default topology policy" Preferred \
    "$(k patch aj small --type=merge -p '{"spec": {"topology": {"levels": [{"label": "topology.kubernetes.io/zone"}]}}}' \
        -o jsonpath='{.spec.topology.levels[0].policy}')"

k delete aj small --wait=true >/dev/null
expect_eq "job deleted" "" "$(k get aj -o name)"
kubectl delete namespace $NS --wait=false >/dev/null
