# e2e/scenarios/chart_lib.sh - helpers of the scenarios that install the
# operator with its Helm chart (sourced after lib.sh).
# shellcheck shell=bash
#
# The chart is installed with the pinned helm (e2e/versions.env, on PATH
# through e2e/cluster env) as release $REL in namespace $OPNS; its operator
# pods run in the simulated cluster (image areal/operator -> the build dir,
# entrypoint areal-operator) and talk to the API server with their
# ServiceAccount's projected token, so the API server's RBAC authorizer
# decides every call. --set metrics.bindAddress=podIP: the simulator's pods
# share one network namespace, so two replicas cannot both bind 0.0.0.0:8443
# (metrics, https: the chart's metrics.secure default) and 0.0.0.0:8081
# (the plain probes).
REL=areal-operator
CHART=$REPO/charts/areal-operator

# chart_install OPNS [HELM ARGS...]
chart_install() {
    local ns=$1
    shift
    OPNS=$ns
    kubectl delete namespace "$OPNS" --ignore-not-found --wait=true >/dev/null
    helm install "$REL" "$CHART" -n "$OPNS" --create-namespace \
        --set metrics.bindAddress=podIP --wait --timeout 120s "$@" >/dev/null
}

# operator_pods: names of the release's operator pods.
operator_pods() {
    kubectl -n "$OPNS" get pods -l "app.kubernetes.io/instance=$REL" \
        -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'
}

# lease_holder: the pod that leads.
lease_holder() { kubectl -n "$OPNS" get lease "$REL" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
has_leader() { [ -n "$(lease_holder)" ]; }

# sa_dir POD: the service-account files the simulator projected for POD.
sa_dir() {
    local d
    d=$(ls -dt "$AREAL_E2E_STATE/pods/${OPNS}_$1_"*/ 2>/dev/null | head -n 1)
    echo "${d}secrets/kubernetes.io/serviceaccount"
}

# as_pod POD KUBECTL ARGS...: kubectl with POD's credentials only (its token
# and CA, the server its env names), none of the admin's.
as_pod() {
    local pod=$1 dir server
    shift
    dir=$(sa_dir "$pod")
    server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
    kubectl --kubeconfig=/dev/null --server="$server" --certificate-authority="$dir/ca.crt" \
        --token="$(cat "$dir/token")" "$@"
}

# keep_operator_logs: the operator pods' logs go where e2e/run checks every
# line to be a JSON record (and removes them).
keep_operator_logs() {
    local p d
    [ -n "${AREAL_E2E_OPERATOR_LOGS:-}" ] || return 0
    for d in "$AREAL_E2E_STATE/pods/${OPNS}_"*/; do
        [ -f "$d/operator.log" ] && cp "$d/operator.log" "$AREAL_E2E_OPERATOR_LOGS/pod-$(basename "$d").log"
    done
    return 0
}

# operator_pod_logs: every operator pod's log (for a failed scenario).
operator_pod_logs() {
    local d
    for d in "$AREAL_E2E_STATE/pods/${OPNS}_"*/; do
        [ -f "$d/operator.log" ] || continue
        echo "--- $(basename "$d")"
        tail -n 25 "$d/operator.log"
    done
}

# metrics_token: a token of ServiceAccount e2e-scraper in $OPNS, bound to the
# chart's $REL-metrics-reader ClusterRole as a user binds their Prometheus.
# The first call creates both and waits until RBAC says yes (a SAR answered
# before the binding is seen would be a refusal the operator caches 10 s).
metrics_token() {
    local sa=system:serviceaccount:$OPNS:e2e-scraper
    if ! kubectl -n "$OPNS" get sa e2e-scraper >/dev/null 2>&1; then
        kubectl -n "$OPNS" create serviceaccount e2e-scraper >/dev/null
        kubectl create clusterrolebinding "$OPNS-e2e-scraper" --clusterrole="$REL-metrics-reader" \
            --serviceaccount="$OPNS:e2e-scraper" >/dev/null
        wait_until 20 bash -c "[ \"\$(kubectl auth can-i get /metrics --as $sa)\" = yes ]" ||
            fail "the binding of $sa to $REL-metrics-reader is not in force"
    fi
    kubectl -n "$OPNS" create token e2e-scraper --duration=10m
}

# operator_metrics POD [TOKEN]: POD's /metrics over https with TOKEN (default:
# metrics_token's). -k: the certificate is the operator's self-signed one, as
# a ServiceMonitor's insecureSkipVerify.
operator_metrics() {
    local ip tok=${2:-}
    [ -n "$tok" ] || tok=$(metrics_token)
    ip=$(kubectl -n "$OPNS" get pod "$1" -o jsonpath='{.status.podIP}')
    curl -sfk --max-time 10 -H "Authorization: Bearer $tok" "https://$ip:8443/metrics"
}

# chart_uninstall: helm uninstall, then nothing of the release may be left:
# no object labelled with it, no ClusterRole/Binding, no operator process.
chart_uninstall() {
    local pids
    pids=$(cat "$AREAL_E2E_STATE/pods/${OPNS}_"*/pid 2>/dev/null || true)
    kubectl delete clusterrolebinding "$OPNS-e2e-scraper" --ignore-not-found >/dev/null
    helm uninstall "$REL" -n "$OPNS" --wait --timeout 60s >/dev/null
    left() {
        kubectl -n "$OPNS" get all,sa,role,rolebinding,lease,cm,secret,events \
            -l "app.kubernetes.io/instance=$REL" --no-headers 2>/dev/null
        kubectl get clusterrole,clusterrolebinding -l "app.kubernetes.io/instance=$REL" --no-headers 2>/dev/null
        kubectl -n "$OPNS" get pods --no-headers 2>/dev/null
    }
    nothing_left() { [ -z "$(left)" ]; }
    wait_until 60 nothing_left || fail "helm uninstall left: $(left)"
    # shellcheck disable=SC2086
    wait_until 30 none_alive $pids || fail "operator processes still alive after uninstall: $pids"
    pass "helm uninstall left nothing (no object of the release, no ClusterRole, no pod, no process)"
    keep_operator_logs
    kubectl delete namespace "$OPNS" --wait=false >/dev/null
}
