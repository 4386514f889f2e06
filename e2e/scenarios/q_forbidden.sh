#!/usr/bin/env bash
# Scenario (q): the chart's RBAC is what the API server enforces on the
# in-cluster operator. The chart is installed (one replica, no leader
# election), then the `pods/binding` rule is taken out of its ClusterRole, as
# a hand-edited or outdated chart would. A job applied then cannot be bound:
# the operator reports the refused call once - the job's Scheduled condition
# and a Warning Event name the verb, the resource and the ServiceAccount - and
# does not loop (no further attempts, one Event, the log line once).
. "$(dirname "$0")/lib.sh"
. "$SCEN_DIR/chart_lib.sh"
NS=e2e-q
fresh_namespace $NS
k() { kubectl -n $NS "$@"; }
cleanup() {
    if [ "${ok:-0}" != 1 ]; then
        operator_pod_logs
        k get pods,events -o wide 2>&1 || true
        keep_operator_logs
        helm uninstall "$REL" -n "$OPNS" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT

t0=$SECONDS
chart_install e2e-q-system --set replicaCount=1 --set leaderElection.enabled=false ||
    fail "helm install did not become ready: $(kubectl -n e2e-q-system get pods -o wide 2>&1)"
pod=$(operator_pods)
pass "helm install: operator pod $pod Running"
sa=system:serviceaccount:$OPNS:$REL
expect_eq "RBAC allows the binding before the edit" yes \
    "$(kubectl auth can-i create pods --subresource=binding -n $NS --as "$sa")"
kubectl get clusterrole "$REL" -o json | python3 -c '
import json, sys
role = json.load(sys.stdin)
for r in role["rules"]:
    r["resources"] = [x for x in r.get("resources", []) if x != "pods/binding"]
role["rules"] = [r for r in role["rules"] if r["resources"]]
json.dump(role, sys.stdout)' | kubectl replace -f - >/dev/null
wait_until 20 bash -c "[ \"\$(kubectl auth can-i create pods --subresource=binding -n $NS --as $sa)\" = no ]" ||
    fail "the pods/binding rule is still in force"
pass "the pods/binding rule removed from ClusterRole $REL"

k apply -f - >/dev/null <<'JOB'
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: nobind
spec:
  allocation: "sglang:d2t2"
  image: areal/worker:latest
  roles:
  - name: rollout
    args: ["--hold-ms", "60000"]
JOB
cond() { k get aj nobind -o jsonpath="{.status.conditions[?(@.type==\"Scheduled\")].$1}"; }
reported() { [ "$(cond reason)" = ChildRejected ]; }
wait_until 60 reported || fail "no rejection reported; Scheduled: $(cond reason): $(cond message)"
msg=$(cond message)
case "$msg" in
*'cannot create resource "pods/binding"'*"$sa"* | *"$sa"*'cannot create resource "pods/binding"'*)
    pass "the Scheduled condition names the verb, the resource and the account: $msg" ;;
*) fail "the condition does not name create pods/binding and $sa: $msg" ;;
esac
expect_eq "the job is Failed, not retried" Failed "$(job_phase $NS nobind)"
events() {
    k get events --field-selector involvedObject.name=nobind,reason=ChildRejected \
        -o jsonpath='{range .items[*]}{.type} {.count} {.message}{"\n"}{end}'
}
wait_until 20 bash -c "[ -n \"\$(kubectl -n $NS get events --field-selector involvedObject.name=nobind,reason=ChildRejected -o name)\" ]" ||
    fail "no ChildRejected Event: $(k get events 2>&1)"
ev=$(events)
case "$ev" in Warning*'pods/binding'*) pass "a Warning Event says so: ${ev:0:160}..." ;; *) fail "event: $ev" ;; esac
logf=$(ls -dt "$AREAL_E2E_STATE/pods/${OPNS}_${pod}_"*/ | head -n 1)operator.log
n1=$(grep -c 'pods/binding' "$logf" || true)
e1=$(events | wc -l)
sleep 6 # several resyncs and backoffs of a looping controller
n2=$(grep -c 'pods/binding' "$logf" || true)
expect_eq "no further attempt in 6 s (operator log lines naming pods/binding)" "$n1" "$n2"
expect_eq "no further ChildRejected Event in 6 s" "$e1" "$(events | wc -l)"
# the gang's binds go out together, so each refused pod is reported, once
[ "$e1" -ge 1 ] && [ "$e1" -le 2 ] || fail "$e1 ChildRejected Events for a 2-pod gang: $(events)"
expect_eq "each Event reported once (count 1)" "Warning 1" "$(events | cut -d' ' -f1-2 | sort -u)"
expect_eq "no pod of the job is bound" "" \
    "$(k get pods -l areal.io/job=nobind -o jsonpath='{.items[*].spec.nodeName}')"

k delete aj nobind --wait=true --timeout=60s >/dev/null || fail "the job was not deleted"
chart_uninstall
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
pass "scenario time $((SECONDS - t0)) s"
