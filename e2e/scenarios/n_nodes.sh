#!/usr/bin/env bash
# Scenario (n): the simulated nodes are what their inventory says, seen
# through the real API: `arealctl plan` on `kubectl get nodes,pods -o json`
# gives the same placement as on the inventory file (capacity, used GPUs,
# labels, taints all carried over); nodes can be added to a running cluster;
# a node whose heartbeat stops turns NotReady; removed nodes take their Lease.
. "$(dirname "$0")/lib.sh"
CLUSTER=$REPO/e2e/cluster
INV=$REPO/examples/clusters/two-racks.yaml
ARCTL=${AREAL_BIN:-$REPO/build/rel}/arealctl
[ -x "$ARCTL" ] || fail "no $ARCTL (run make first)"
ALLOC='sglang:d4t2+megatron:d2p2t4'

expect_eq "default scenario nodes Ready" "True True" \
    "$(kubectl get nodes gpu-node-0 gpu-node-1 -o jsonpath='{.items[*].status.conditions[?(@.type=="Ready")].status}')"

"$CLUSTER" nodes "$INV" || fail "e2e/cluster nodes $INV failed"
names=$(sed -n 's/^  - name: //p' "$INV")
expect_eq "inventory nodes added" 8 "$(echo "$names" | wc -l)"
expect_eq "GPU capacity" 8 "$(kubectl get node rack-0-node-0 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')"
expect_eq "taint carried" "nvidia.com/gpu=maintenance:NoSchedule" \
    "$(kubectl get node rack-1-node-3 -o jsonpath='{.spec.taints[0].key}={.spec.taints[0].value}:{.spec.taints[0].effect}')"
expect_eq "used GPUs held by a tenant pod" "rack-1-node-1 3" \
    "$(kubectl get pod -n areal-e2e-tenants tenant-rack-1-node-1 -o jsonpath='{.spec.nodeName} {.spec.containers[0].resources.requests.nvidia\.com/gpu}')"

# The same plan from the file and from the API (only this inventory's nodes).
objs=$(for n in $names; do printf 'node/%s ' "$n"; done)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$ARCTL" plan --alloc "$ALLOC" --cluster "$INV" >"$tmp/from-file.txt" || fail "arealctl plan on $INV failed"
# shellcheck disable=SC2086
kubectl get $objs pod/tenant-rack-1-node-1 -n areal-e2e-tenants -o json >"$tmp/api.json"
"$ARCTL" plan --alloc "$ALLOC" --cluster "$tmp/api.json" >"$tmp/from-api.txt" || fail "arealctl plan on the API's objects failed"
if ! diff -u "$tmp/from-file.txt" "$tmp/from-api.txt" >"$tmp/diff"; then
    cat "$tmp/diff" >&2
    fail "plan from the API differs from the plan from $INV"
fi
pass "arealctl plan: API objects == inventory file ($(head -1 "$tmp/from-file.txt"))"

# A node whose heartbeat stops is marked NotReady by the node-lifecycle
# controller after the grace period.
# The node simulator runs the tenant pod of rack-1-node-1 (sleep); when that
# node's kubelet dies, the pod's process dies with it.
tenant_running() {
    [ "$(kubectl -n areal-e2e-tenants get pod tenant-rack-1-node-1 -o jsonpath='{.status.phase}')" = Running ]
}
wait_until 30 tenant_running || fail "tenant pod of rack-1-node-1 not Running"
tenant_pid=$(cat "$AREAL_E2E_STATE"/pods/areal-e2e-tenants_tenant-rack-1-node-1_*/pid)
kill -0 "$tenant_pid" || fail "tenant pod process $tenant_pid is not alive"
pass "the node simulator runs the tenant pod (pid $tenant_pid)"
"$CLUSTER" stop-node rack-0-node-0 rack-1-node-1
wait_until 10 none_alive "$tenant_pid" || fail "the stopped node's pod process $tenant_pid still runs"
pass "a stopped node's pod processes are gone"
for _ in $(seq 150); do
    st=$(kubectl get node rack-0-node-0 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')
    [ "$st" = Unknown ] && break
    sleep 0.5
done
expect_eq "stopped node turns NotReady (Ready=Unknown)" Unknown "$st"
expect_eq "other nodes stay Ready" True \
    "$(kubectl get node rack-0-node-1 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')"

# shellcheck disable=SC2086
"$CLUSTER" remove-node $names
# shellcheck disable=SC2086
expect_eq "nodes removed" "" "$(kubectl get $objs --ignore-not-found -o name)"
for _ in $(seq 50); do
    left=$(kubectl get lease -n kube-node-lease -o name | grep -c rack- || true)
    [ "$left" = 0 ] && break
    sleep 0.2
done
expect_eq "their Leases garbage-collected" 0 "$left"
