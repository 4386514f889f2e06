#!/usr/bin/env bash
# Scenario (l): issue 11, item 4 - specs the API server refuses. Job names of
# 64 and 70 characters and "my.job" are refused at apply by the CRD's CEL rules
# with a message naming metadata.name; a 63-character name passes the CRD but
# leaves no room for the pods' hostnames: Failed within one reconcile, naming
# metadata.name, no pod; a 40-character name is placed and runs. A job whose env name the API server refuses for the pods (422) ends
# Failed within one reconcile with a condition naming the field, and the
# operator then stays quiet: no new Event, no status write for 5 s.
# Bounded: 60 s.
. "$(dirname "$0")/lib.sh"
scenario_with_operator e2e-l

job() { # NAME [ENV_NAME]
    local env=""
    [ -z "${2:-}" ] || env="    env: [{name: \"$2\", value: \"x\"}]"
    cat <<JOB
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: $1
spec:
  allocation: "sglang:d1+megatron:d1t1"
  roles:
  - name: trainer
    args: ["--hold-ms", "60000"]
$env
  - name: rollout
    args: ["--hold-ms", "60000"]
JOB
}
n63=$(printf 'a%.0s' $(seq 1 63))
n64=$(printf 'b%.0s' $(seq 1 64))
n70=$(printf 'c%.0s' $(seq 1 70))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; stop_scenario_operator' EXIT
for name in "$n64" "$n70" my.job; do
    job "$name" >"$tmp/job.yaml"
    expect_fail "the name '$name' (${#name} characters) is refused at apply" "metadata.name" \
        kubectl -n "$NS" apply -f "$tmp/job.yaml"
done

# 63 characters pass the CRD (the Service takes them) but not the pods'
# hostnames ("<job>-rollout-0"): Failed within one reconcile, naming the field
t0=$SECONDS
job "$n63" | k apply -f - >/dev/null || fail "a 63-character name was refused at apply"
invalid() { [ "$(k get aj "$n63" -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].reason}')" = InvalidSpec ]; }
wait_until 20 invalid || fail "no InvalidSpec condition for the 63-character name: $(k get aj "$n63" -o jsonpath='{.status}')"
msg=$(k get aj "$n63" -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].message}')
case "$msg" in *"metadata.name"*) pass "a 63-character name: InvalidSpec after $((SECONDS - t0))s: $msg" ;; *) fail "message: $msg" ;; esac
expect_eq "no pod for it" 0 "$(k get pods -l areal.io/job="$n63" --no-headers 2>/dev/null | wc -l)"
k delete aj "$n63" --wait=false >/dev/null
n40=$(printf 'd%.0s' $(seq 1 40))
job "$n40" | k apply -f - >/dev/null || fail "a 40-character name was refused"
wait_until 60 pods_running $NS "$n40" 2 || fail "the 40-character job did not run: $(k get aj "$n40" -o jsonpath='{.status}')"
pass "a 40-character name is placed and runs"
k delete aj "$n40" --wait=false >/dev/null

t0=$SECONDS
job badenv BAD=NAME | k apply -f - >/dev/null || fail "the job with a bad env name was refused at apply"
reason_of() { k get aj badenv -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].reason}'; }
rejected() { [ "$(reason_of)" = ChildRejected ]; }
wait_until 20 rejected || fail "no ChildRejected condition: $(k get aj badenv -o jsonpath='{.status}')"
msg=$(k get aj badenv -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].message}')
case "$msg" in *"env"*"name"*) pass "ChildRejected after $((SECONDS - t0))s, naming the field: $msg" ;; *) fail "message: $msg" ;; esac
expect_eq "the job is Failed" Failed "$(job_phase $NS badenv)"
rv0=$(k get aj badenv -o jsonpath='{.metadata.resourceVersion}')
ev0=$(k get events --field-selector involvedObject.name=badenv --no-headers | wc -l)
sleep 5
expect_eq "no status write for 5 s" "$rv0" "$(k get aj badenv -o jsonpath='{.metadata.resourceVersion}')"
expect_eq "no new Event for 5 s" "$ev0" "$(k get events --field-selector involvedObject.name=badenv --no-headers | wc -l)"
expect_eq "no pod" 0 "$(k get pods -l areal.io/job=badenv --no-headers 2>/dev/null | wc -l)"
k delete aj --all --wait=false >/dev/null
k delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
