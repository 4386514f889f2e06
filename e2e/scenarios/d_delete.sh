#!/usr/bin/env bash
# Scenario (d): deleting a running job removes every child. The operator
# deletes the pods; the node simulator stops each container as a kubelet does
# (SIGTERM to the pod's processes, SIGKILL only after the grace period), writes
# the final status and removes the pod; the Service and ConfigMap go with the
# job (owner references); no process of the job is left.
. "$(dirname "$0")/lib.sh"
scenario_with_operator e2e-d

k apply -f - >/dev/null <<'JOB'
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: long
spec:
  allocation: "sglang:d2t2+megatron:d2t2"
  roles:
  - name: trainer
    args: ["--hold-ms", "600000"]
  - name: rollout
    args: ["--hold-ms", "600000"]
JOB
wait_until 60 pods_running $NS long 3 || fail "the job's pods did not all run: $(k get pods -o wide 2>&1)"
wait_until 20 phase_is $NS long Running || fail "job phase $(job_phase $NS long), want Running"
pids=$(pod_pids $NS long)
expect_eq "one container process per pod, alive" 3 "$(for p in $pids; do kill -0 "$p" 2>/dev/null && echo "$p"; done | wc -l)"
expect_eq "service and config map exist" 2 "$(k get svc,cm -l areal.io/job=long --no-headers | wc -l)"

t0=$SECONDS
k delete aj long --wait=true --timeout=60s >/dev/null || fail "kubectl delete aj did not finish"
pass "kubectl delete aj finished (the operator removed its finalizer)"
# The processes themselves tell whether SIGTERM stopped them: the time until
# the children are gone also holds garbage collection of the Service and
# ConfigMap, which on a fresh cluster waits until kube-controller-manager's
# garbage collector has discovered the CRD's type (its discovery resyncs every
# 30 s), so it says nothing about the workers.
wait_until 25 none_alive $pids ||
    fail "the workers did not stop on SIGTERM within 25s (grace is 30s): $pids still alive"
pass "the workers stopped on SIGTERM after $((SECONDS - t0))s, well inside the 30s grace period; no process of the job is left"
gone() { [ "$(k get pods,svc,cm -l areal.io/job=long --no-headers 2>/dev/null | wc -l)" = 0 ]; }
wait_until 60 gone || fail "children left: $(k get pods,svc,cm -l areal.io/job=long --no-headers 2>&1)"
pass "every pod, the service and the config map are gone ($((SECONDS - t0))s)"
for p in long-trainer-0 long-rollout-0; do
    pod_log $NS $p | grep -q 'SIGTERM received' ||
        fail "$p did not log a SIGTERM: $(pod_log $NS $p | tail -n 3)"
done
pass "the pods' launchers got SIGTERM and forwarded it to their ranks"
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
