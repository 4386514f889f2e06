#!/usr/bin/env bash
# Scenario (e): the API server is restarted while a job runs. The operator's
# informers re-list and re-watch, the node simulator keeps running the pods
# and writes the status it could not write while the server was down, and the
# job completes with the same pods (no duplicate, no restart).
. "$(dirname "$0")/lib.sh"
scenario_with_operator e2e-e

k apply -f - >/dev/null <<'JOB'
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: outage
spec:
  allocation: "sglang:d2t2+megatron:d2t2"
  roles:
  - name: trainer
    args: ["--selftest", "--hold-ms", "15000"]
  - name: rollout
    args: ["--selftest", "--hold-ms", "15000"]
JOB
wait_until 60 pods_running $NS outage 3 || fail "the job's pods did not all run: $(k get pods -o wide 2>&1)"
before=$(pod_uids $NS outage)
pass "gang running"

t0=$SECONDS
"$REPO/e2e/cluster" restart-apiserver || fail "the API server did not come back"
pass "API server restarted ($((SECONDS - t0))s)"
kill -0 "$OP_PID" 2>/dev/null || fail "the operator exited during the outage"
pass "the operator survived the outage"

wait_until 120 phase_is $NS outage Succeeded || fail "job phase $(job_phase $NS outage), want Succeeded"
pass "the job Succeeded after the outage"
# (on success the operator removes the pods that still run, so fewer may be left)
for u in $(k get pods -l areal.io/job=outage -o jsonpath='{.items[*].metadata.uid}'); do
    echo "$before" | grep -q " $u$" || fail "pod uid $u is new: a pod was recreated or duplicated"
done
expect_eq "the trainer rank-0 pod is the original one" \
    "$(echo "$before" | grep '^outage-trainer-0 ')" "$(pod_uids $NS outage | grep '^outage-trainer-0 ')"
pass "no pod was recreated or duplicated"
expect_eq "no gang restart" 0 "$(k get aj outage -o jsonpath='{.status.restarts}')"
verdict=$(pod_log $NS outage-trainer-0 | grep '^selftest: ' | tail -n 1)
case "$verdict" in *"all ok") pass "trainer self-test: $verdict" ;; *) fail "self-test: '$verdict'" ;; esac
grep -qiE 'relist|watch' "$log" && pass "operator log mentions its re-watch: $(grep -iE 'relist|watch' "$log" | tail -n 1)"
k delete aj outage --wait=true --timeout=60s >/dev/null || fail "kubectl delete aj did not finish"
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
