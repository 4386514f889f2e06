#!/usr/bin/env bash
# Scenario (t): spec.ttlSecondsAfterFinished. A short job (one trainer pod
# running the worker's self-test, which exits 0) with a TTL of 3 s Succeeds;
# the API server keeps its status.completionTime (the CRD's status schema);
# the operator deletes the job 3 s after that time - not before, and without a
# polling loop (it requeues the job for the moment) - with an Expired Event,
# and the job's Service and ConfigMap go with it (ownerReferences).
. "$(dirname "$0")/lib.sh"
scenario_with_operator e2e-t
t0=$SECONDS

k apply -f - >/dev/null <<'JOB'
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: brief
spec:
  allocation: "megatron:d1t1"
  image: areal/worker:latest
  ttlSecondsAfterFinished: 3
  roles:
  - name: trainer
    args: ["--selftest"]
JOB
wait_until 60 phase_is e2e-t brief Succeeded || fail "job phase $(job_phase e2e-t brief), want Succeeded: $(k get pods -o wide 2>&1)"
done_at=$(k get aj brief -o jsonpath='{.status.completionTime}')
[ -n "$done_at" ] || fail "status.completionTime is empty: $(k get aj brief -o jsonpath='{.status}')"
seen=$(date +%s.%N)
pass "Succeeded; status.completionTime $done_at"
done_s=$(date -d "$done_at" +%s)
exists() { k get aj brief >/dev/null 2>&1; }
gone() { ! exists; }
# kept until completionTime + 3 s (completionTime has second resolution: 2 s of the 3 is safe to check)
while python3 -c "import sys,time; sys.exit(0 if time.time() < $done_s + 2 else 1)"; do
    exists || fail "the job was deleted before its TTL: completion $done_at, now $(date -u +%T)"
    sleep 0.2
done
pass "kept for 2 s after completionTime"
wait_until 15 gone || fail "the job was not deleted after its TTL: $(k get aj brief -o yaml 2>&1 | tail -n 20)"
gone_at=$(date +%s.%N)
after=$(python3 -c "print('%.1f' % ($gone_at - $done_s))")
python3 -c "import sys; sys.exit(0 if 2 <= $after <= 8 else 1)" ||
    fail "deleted $after s after completionTime, want about 3"
pass "deleted $after s after completionTime ($(python3 -c "print('%.1f' % ($gone_at - $seen))") s after Succeeded was seen; ttlSecondsAfterFinished 3)"
reasons=$(k get events --field-selector involvedObject.name=brief -o jsonpath='{range .items[*]}{.reason} {end}')
case "$reasons" in *Expired*) pass "Events: $reasons" ;; *) fail "no Expired Event: $reasons" ;; esac
children() { [ "$(k get pods,svc,cm -l areal.io/job=brief --no-headers 2>/dev/null | wc -l)" = 0 ]; }
wait_until 30 children || fail "children of brief left: $(k get pods,svc,cm -l areal.io/job=brief --no-headers 2>&1)"
pass "pods, Service and ConfigMap gone with it"
ok=1
kubectl delete namespace e2e-t --wait=false >/dev/null
pass "scenario time $((SECONDS - t0)) s"
