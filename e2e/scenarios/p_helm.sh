#!/usr/bin/env bash
# Scenario (p): the operator as users run it. `helm install` of
# charts/areal-operator (the pinned helm) starts its Deployment in the
# simulated cluster: two replicas, bound by the simulator's default-scheduler
# stand-in, each authenticating with its ServiceAccount's projected token
# (TokenRequest API, CA and namespace files under
# /var/run/secrets/kubernetes.io/serviceaccount), so the API server's RBAC
# authorizer checks the chart's rules on every call. One replica takes the
# chart's Lease; a job is applied, placed as one gang and Succeeds; the job is
# deleted (the operator removes its finalizer); `helm uninstall` leaves nothing.
# The metrics are the chart's secure default: https on 8443, each scrape's
# bearer token reviewed by the API server (TokenReview, SubjectAccessReview):
# no token or a forged one 401, a ServiceAccount not bound to the chart's
# metrics-reader ClusterRole 403, a bound one 200 with the areal_ metrics;
# the probes stay plain on 8081.
. "$(dirname "$0")/lib.sh"
. "$SCEN_DIR/chart_lib.sh"
NS=e2e-p
fresh_namespace $NS
k() { kubectl -n $NS "$@"; }
cleanup() {
    if [ "${ok:-0}" != 1 ]; then
        operator_pod_logs
        kubectl -n "$OPNS" get pods -o wide 2>&1 || true
        k get pods -o wide 2>&1 || true
        keep_operator_logs
        helm uninstall "$REL" -n "$OPNS" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT

t0=$SECONDS
chart_install e2e-p-system || fail "helm install did not become ready: $(kubectl -n e2e-p-system get pods -o wide 2>&1)"
pass "helm install --wait: the Deployment is available in $((SECONDS - t0)) s"
pods=$(operator_pods)
expect_eq "two operator replicas" 2 "$(echo "$pods" | grep -c .)"
for p in $pods; do
    expect_eq "$p Ready" True \
        "$(kubectl -n "$OPNS" get pod "$p" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')"
done
wait_until 40 has_leader || fail "no replica took the Lease $REL"
leader=$(lease_holder)
case " $(echo $pods) " in *" $leader "*) pass "replica $leader leads (the chart's Lease)" ;; *) fail "Lease holder '$leader' is not an operator pod ($pods)" ;; esac

# The credentials in the pod are the ServiceAccount's, and RBAC limits them.
sa=system:serviceaccount:$OPNS:$REL
[ -s "$(sa_dir "$leader")/token" ] || fail "no projected token for $leader"
expect_eq "the projected namespace file" "$OPNS" "$(cat "$(sa_dir "$leader")/namespace")"
who=$(as_pod "$leader" auth whoami -o jsonpath='{.status.userInfo.username}')
expect_eq "the pod's token authenticates as its ServiceAccount" "$sa" "$who"
expect_fail "the pod's token may not read secrets" "forbidden" as_pod "$leader" -n "$OPNS" get secrets
expect_eq "the pod's token may bind pods" yes "$(as_pod "$leader" auth can-i create pods --subresource=binding -n $NS)"

# A job through the in-cluster operator.
k apply -f - >/dev/null <<'JOB'
apiVersion: areal.io/v1alpha1
kind: AReaLJob
metadata:
  name: gang
spec:
  allocation: "sglang:d2t2+megatron:d2p2t2"
  image: areal/worker:latest
  roles:
  - name: trainer
    args: ["--selftest", "--hold-ms", "3000"]
  - name: rollout
    args: ["--selftest", "--hold-ms", "3000"]
JOB
t1=$SECONDS
wait_until 60 pods_running $NS gang 3 || fail "the gang's 3 pods did not all run: $(k get pods -o wide 2>&1)"
pass "job placed: 3 pods bound by the in-cluster operator and Running in $((SECONDS - t1)) s"
expect_eq "condition Scheduled=GangBound" GangBound \
    "$(k get aj gang -o jsonpath='{.status.conditions[?(@.type=="Scheduled")].reason}')"
wait_until 90 phase_is $NS gang Succeeded || fail "job phase $(job_phase $NS gang), want Succeeded"
pass "the job Succeeded $((SECONDS - t1)) s after it was applied"
ip=$(kubectl -n "$OPNS" get pod "$leader" -o jsonpath='{.status.podIP}')
url=https://$ip:8443/metrics
code() { curl -sk -o /dev/null --max-time 10 -w '%{http_code}' "$@" "$url"; }
plain=$(curl -s -o /dev/null --max-time 5 -w '%{http_code}' "http://$ip:8443/metrics" || true)
[ "$plain" != 200 ] || fail "/metrics answered plain http on the https port"
pass "plain http to the https port gets no metrics (HTTP code '$plain')"
expect_eq "/metrics without a token" 401 "$(code)"
expect_eq "/metrics with a forged token" 401 "$(code -H 'Authorization: Bearer forged.jwt.token')"
k create serviceaccount not-a-reader >/dev/null
expect_eq "/metrics with the token of a ServiceAccount not bound to $REL-metrics-reader" 403 \
    "$(code -H "Authorization: Bearer $(k create token not-a-reader --duration=10m)")"
t2=$SECONDS
tok=$(metrics_token)
expect_eq "/metrics with a bound ServiceAccount's token" 200 "$(code -H "Authorization: Bearer $tok")"
metrics=$(operator_metrics "$leader" "$tok") || fail "no /metrics at $url with a reader's token"
grep -q '^areal_reconciles_total' <<<"$metrics" ||
    fail "the leader's /metrics on its pod IP ($url) has no areal_reconciles_total"
pass "the leader serves /metrics to a reader on https://$ip:8443 ($(grep -c '^areal_' <<<"$metrics") areal_ samples)"
t3=$(date +%s%N)
for _ in 1 2 3 4 5; do [ "$(code -H "Authorization: Bearer $tok")" = 200 ] || fail "a cached scrape was refused"; done
pass "5 more scrapes with the same token in $((($(date +%s%N) - t3) / 1000000)) ms (cached decisions)"
# the served certificate is the operator's self-signed one, naming the pod IP
san=$({ openssl s_client -connect "$ip:8443" </dev/null 2>/dev/null || true; } |
    openssl x509 -noout -ext subjectAltName 2>/dev/null | tr -d ' \n' || true)
case "$san" in *"IPAddress:$ip"*) pass "self-signed serving certificate: $san" ;; *) fail "certificate SAN '$san' lacks $ip" ;; esac
expect_eq "/healthz plain on the probe port" 200 \
    "$(curl -s -o /dev/null --max-time 5 -w '%{http_code}' "http://$ip:8081/healthz")"
pass "secure metrics checks in $((SECONDS - t2)) s"
k delete aj gang --wait=true --timeout=60s >/dev/null || fail "the job was not deleted (finalizer left?)"
pass "the job deleted (the operator removed its finalizer)"

chart_uninstall
ok=1
kubectl delete namespace $NS --wait=false >/dev/null
pass "scenario time $((SECONDS - t0)) s"
