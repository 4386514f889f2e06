#!/usr/bin/env bash
# Scenario (q): the chart's RBAC is what the API server enforces on the
# in-cluster operator. The chart is installed (one replica, no leader
# election), then the `pods/binding` rule is taken out of its ClusterRole, as
# a hand-edited or outdated chart would. A job applied then cannot be bound:
# the operator reports the refused call once - the job's Scheduled condition
# (reason Forbidden, the job still Pending) and a Warning Event name the verb,
# the resource, the ServiceAccount and the retry - and does not loop (no
# further attempt for the first 30 s of its backoff, one Event, the log line
# once). Then the rule is restored, as an admin fixing RBAC would, without
# touching the job: the next slow retry binds it and it runs.
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
kubectl get clusterrole "$REL" -o json >"$AREAL_E2E_STATE/q-clusterrole.json"
python3 -c '
import json, sys
role = json.load(sys.stdin)
for r in role["rules"]:
    r["resources"] = [x for x in r.get("resources", []) if x != "pods/binding"]
role["rules"] = [r for r in role["rules"] if r["resources"]]
json.dump(role, sys.stdout)' <"$AREAL_E2E_STATE/q-clusterrole.json" | kubectl replace -f - >/dev/null
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
reported() { [ "$(cond reason)" = Forbidden ]; }
wait_until 60 reported || fail "no rejection reported; Scheduled: $(cond reason): $(cond message)"
msg=$(cond message)
case "$msg" in
*'cannot create resource "pods/binding"'*"$sa"* | *"$sa"*'cannot create resource "pods/binding"'*)
    pass "the Scheduled condition names the verb, the resource and the account: $msg" ;;
*) fail "the condition does not name create pods/binding and $sa: $msg" ;;
esac
case "$msg" in *"retried in 30 s (attempt 1;"*) pass "the condition states the slow retry" ;;
*) fail "the condition does not state the retry (30 s, attempt 1): $msg" ;; esac
expect_eq "the job waits (Pending), not Failed: a fixed rule heals it" Pending "$(job_phase $NS nobind)"
events() {
    k get events --field-selector involvedObject.name=nobind,reason=Forbidden \
        -o jsonpath='{range .items[*]}{.type} {.count} {.message}{"\n"}{end}'
}
wait_until 20 bash -c "[ -n \"\$(kubectl -n $NS get events --field-selector involvedObject.name=nobind,reason=Forbidden -o name)\" ]" ||
    fail "no Forbidden Event: $(k get events 2>&1)"
ev=$(events)
case "$ev" in Warning*'pods/binding'*) pass "a Warning Event says so: ${ev:0:160}..." ;; *) fail "event: $ev" ;; esac
logf=$(ls -dt "$AREAL_E2E_STATE/pods/${OPNS}_${pod}_"*/ | head -n 1)operator.log
n1=$(grep -c 'pods/binding' "$logf" || true)
e1=$(events | wc -l)
sleep 6 # several resyncs and backoffs of a looping controller
n2=$(grep -c 'pods/binding' "$logf" || true)
expect_eq "no further attempt in 6 s (operator log lines naming pods/binding)" "$n1" "$n2"
expect_eq "no further Forbidden Event in 6 s" "$e1" "$(events | wc -l)"
# the gang's binds go out together, so each refused pod is reported, once
[ "$e1" -ge 1 ] && [ "$e1" -le 2 ] || fail "$e1 ChildRejected Events for a 2-pod gang: $(events)"
expect_eq "each Event reported once (count 1)" "Warning 1" "$(events | cut -d' ' -f1-2 | sort -u)"
expect_eq "no pod of the job is bound" "" \
    "$(k get pods -l areal.io/job=nobind -o jsonpath='{.items[*].spec.nodeName}')"

# The admin restores the rule; the job's spec is untouched (generation 1).
python3 -c 'import json, sys
role = json.load(sys.stdin)
role["metadata"].pop("resourceVersion", None)
json.dump(role, sys.stdout)' <"$AREAL_E2E_STATE/q-clusterrole.json" | kubectl replace -f - >/dev/null
wait_until 20 bash -c "[ \"\$(kubectl auth can-i create pods --subresource=binding -n $NS --as $sa)\" = yes ]" ||
    fail "the pods/binding rule is not back in force"
t_fix=$SECONDS
pass "the pods/binding rule restored to ClusterRole $REL (the job's generation: $(k get aj nobind -o jsonpath='{.metadata.generation}'))"
wait_until 60 pods_running $NS nobind 2 ||
    fail "the job did not heal within 60 s of the fix: $(k get pods -o wide 2>&1); Scheduled: $(cond reason): $(cond message)"
pass "the next retry bound the gang: 2 pods Running $((SECONDS - t_fix)) s after the fix (backoff 30 s)"
healed() { [ "$(cond reason)" != Forbidden ] && [ "$(job_phase $NS nobind)" = Running ]; }
wait_until 20 healed || fail "after the fix: phase $(job_phase $NS nobind), Scheduled $(cond reason): $(cond message)"
pass "the job runs: phase Running, Scheduled $(cond reason)"

k delete aj nobind --wait=true --timeout=60s >/dev/null || fail "the job was not deleted"
chart_uninstall
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
pass "scenario time $((SECONDS - t0)) s"
