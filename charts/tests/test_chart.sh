#!/usr/bin/env bash
# test_chart.sh - the Helm chart's test, part of `make test`: helm lint, then
# helm template with the default values and with non-default ones (one watched
# namespace, one replica without leader election, a ServiceMonitor, plain
# metrics, a mounted serving certificate, metrics readers), each render
# checked by rbac_check.py (the operator's RBAC is exactly its API calls, the
# Deployment's flags agree with it, the CRD is crds/'s); then the checker is fed
# broken renders (a rule dropped, secrets added, a wildcard or extra verb, every
# Lease, writes cluster-wide for one namespace, a wrong probe, a probe on the
# HTTPS port, no token reviews, a wider or self-bound metrics reader, an unknown
# API call in operator/src) and must refuse each, so it can fail.
# Needs the pinned helm of the e2e cache (e2e/build-bins) and python3 with PyYAML;
# without them it says so and passes nothing. Prints cmocka's lines ("[       OK ]",
# "[  PASSED  ] N test(s).") so scripts/run-tests.sh counts it like a test binary.
set -uo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=e2e/lib.sh
. e2e/lib.sh
helm=${AREAL_HELM:-$E2E_BIN/helm}
CHART=charts/areal-operator
if [ ! -x "$helm" ]; then
    echo "chart: skipped: helm is not built yet; run 'make e2e' (or e2e/build-bins) once"
    exit 0
fi
if ! python3 -c 'import yaml' 2>/dev/null; then
    echo "chart: skipped: python3 with PyYAML (Debian: python3-yaml) is needed for the RBAC check"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() {
    passed=$((passed + 1))
    echo "[       OK ] $1"
}
bad() {
    failed=$((failed + 1))
    echo "[  FAILED  ] $1"
    [ -f "$tmp/out" ] && sed 's/^/    /' "$tmp/out" | tail -n 20
}
# helm warns on stderr that crds/ holds a link (to the one CRD of crds/); that is the design
quiet() { grep -v 'found symbolic link in path' || true; }

if "$helm" lint --strict "$CHART" >"$tmp/out" 2>&1 && ! grep -qE '^\[(WARNING|ERROR)\]' "$tmp/out"; then
    ok "helm lint --strict"
else
    bad "helm lint --strict"
fi
if "$helm" lint --strict "$CHART" --set namespaces[0]=team-a --set replicaCount=1 \
    --set leaderElection.enabled=false >"$tmp/out" 2>&1 && ! grep -qE '^\[(WARNING|ERROR)\]' "$tmp/out"; then
    ok "helm lint --strict, one namespace, one replica"
else
    bad "helm lint --strict, one namespace, one replica"
fi

# render NAME CHECK-ARGS -- HELM-ARGS: helm template, then the checker on it
render() {
    local name=$1
    shift
    local check=()
    while [ "$1" != -- ]; do
        check+=("$1")
        shift
    done
    shift
    if ! "$helm" template t "$CHART" -n areal-system --include-crds "$@" >"$tmp/$name.yaml" 2>"$tmp/out"; then
        quiet <"$tmp/out" >"$tmp/out2" && mv "$tmp/out2" "$tmp/out"
        bad "helm template ($name)"
        return
    fi
    if python3 charts/tests/rbac_check.py "$tmp/$name.yaml" . --release-namespace areal-system \
        "${check[@]}" >"$tmp/out" 2>&1; then
        ok "helm template + RBAC check ($name)"
    else
        bad "helm template + RBAC check ($name)"
    fi
}
render default --
render one-namespace --namespace team-a -- --set 'namespaces[0]=team-a' --set workers=4 \
    --set kubeClient.qps=50 --set kubeClient.burst=100 --set schedulerName=my-sched \
    --set workerImage=registry.example/areal/worker:1 --set logLevel=debug
render single-replica --no-leader-election -- --set replicaCount=1 --set leaderElection.enabled=false \
    --set antiAffinity=none
render servicemonitor -- --set metrics.serviceMonitor.enabled=true --set antiAffinity=required
render plain-metrics -- --set metrics.secure=false --set metrics.port=8080 \
    --set metrics.serviceMonitor.enabled=true
render cert-secret -- --set metrics.certSecret=areal-metrics-tls \
    --set 'metrics.readers[0].name=prometheus-k8s' --set 'metrics.readers[0].namespace=monitoring'

# The flags reach the container.
args=$(python3 -c 'import sys,yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "Deployment": print(" ".join(d["spec"]["template"]["spec"]["containers"][0]["args"]))' \
    "$tmp/one-namespace.yaml")
want="--qps=50 --burst=100 --workers=4 --scheduler-name=my-sched --default-image=registry.example/areal/worker:1 --metrics-address=0.0.0.0:8443 --metrics-secure --health-probe-address=0.0.0.0:8081 --progress-port=8090 --progress-interval=5 --namespace=team-a --leader-elect --lease-namespace=areal-system --lease-name=t-areal-operator --id=\$(POD_NAME)"
if [ "$args" = "$want" ]; then ok "values become the operator's flags"; else
    echo "got:  $args" >"$tmp/out"
    echo "want: $want" >>"$tmp/out"
    bad "values become the operator's flags"
fi
# ...and every flag the chart sets is one the program knows.
if [ -x "${AREAL_BIN:-build/rel}/areal-operator" ]; then
    help=$("${AREAL_BIN:-build/rel}/areal-operator" --help)
    missing=""
    for a in $args; do
        f=${a%%=*}
        grep -q -- "$f" <<<"$help" || missing="$missing $f"
    done
    if [ -z "$missing" ]; then ok "every flag is in areal-operator --help"; else
        echo "unknown:$missing" >"$tmp/out"
        bad "every flag is in areal-operator --help"
    fi
fi
if grep -q 'kind: ServiceMonitor' "$tmp/servicemonitor.yaml" && ! grep -q 'kind: ServiceMonitor' "$tmp/default.yaml"; then
    ok "a ServiceMonitor only when enabled"
else
    bad "a ServiceMonitor only when enabled"
fi

# Secure metrics: the ServiceMonitor scrapes https with its token; plain ones http.
# smon FILE: "scheme bearerTokenFile insecureSkipVerify" of its endpoint
smon() {
    python3 -c 'import sys,yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "ServiceMonitor":
        e = d["spec"]["endpoints"][0]
        print(e.get("scheme", "http"), e.get("bearerTokenFile", "-"), e.get("tlsConfig", {}).get("insecureSkipVerify", "-"))' "$1"
}
got="$(smon "$tmp/servicemonitor.yaml") / $(smon "$tmp/plain-metrics.yaml")"
if [ "$got" = "https /var/run/secrets/kubernetes.io/serviceaccount/token True / http - -" ]; then
    ok "the ServiceMonitor scrapes https with its ServiceAccount token (plain: http)"
else
    echo "got: $got" >"$tmp/out"
    bad "the ServiceMonitor scrapes https with its ServiceAccount token (plain: http)"
fi
# a mounted certificate: the Secret as a read-only volume at --metrics-cert-dir; the readers bound
certs=$(python3 -c 'import sys,yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if not d: continue
    if d["kind"] == "Deployment":
        s = d["spec"]["template"]["spec"]; c = s["containers"][0]
        m = c["volumeMounts"][0]
        print([a for a in c["args"] if a.startswith("--metrics-cert-dir")][0], m["mountPath"], m["readOnly"], s["volumes"][0]["secret"]["secretName"])
    if d["kind"] == "ClusterRoleBinding" and d["roleRef"]["name"].endswith("-metrics-reader"):
        print(d["subjects"])' "$tmp/cert-secret.yaml" | sort)
want_certs=$(printf '%s\n' "--metrics-cert-dir=/var/run/areal/metrics-certs /var/run/areal/metrics-certs True areal-metrics-tls" \
    "[{'kind': 'ServiceAccount', 'name': 'prometheus-k8s', 'namespace': 'monitoring'}]" | sort)
if [ "$certs" = "$want_certs" ]; then ok "metrics.certSecret is mounted for --metrics-cert-dir; metrics.readers are bound"; else
    printf 'got:  %s\nwant: %s\n' "$certs" "$want_certs" >"$tmp/out"
    bad "metrics.certSecret is mounted for --metrics-cert-dir; metrics.readers are bound"
fi
if ! grep -q -- '--metrics-secure\|metrics-reader\|tokenreviews' "$tmp/plain-metrics.yaml"; then
    ok "plain metrics: no --metrics-secure, no review rules, no reader role"
else
    bad "plain metrics: no --metrics-secure, no review rules, no reader role"
fi

# The default images are the ones the Dockerfiles build, at the repository's VERSION.
version=$(cat VERSION)
app=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$CHART/Chart.yaml")
images=$(grep -ho 'image: "[^"]*"\|--default-image=[^ ]*' "$tmp/default.yaml" | sed 's/image: "//; s/"$//; s/--default-image=//' | sort | tr '\n' ' ')
if [ "$app" = "$version" ] && [ "$images" = "areal/operator:$version areal/worker:$version " ] &&
    grep -q '^IMAGE_PREFIX ?= areal$' Makefile &&
    grep -q 'operator/Dockerfile -t $(IMAGE_PREFIX)/operator:$(AREAL_VERSION)' Makefile &&
    grep -q 'worker/Dockerfile -t $(IMAGE_PREFIX)/worker:$(AREAL_VERSION)' Makefile; then
    ok "the default images are make images' (areal/operator, areal/worker at VERSION $version)"
else
    echo "appVersion $app, VERSION $version, images: $images" >"$tmp/out"
    bad "the default images are make images'"
fi

# Refused values: a clear message naming the value.
refuse() { # refuse WHAT PATTERN HELM-ARGS...
    local what=$1 pat=$2
    shift 2
    if "$helm" template t "$CHART" "$@" >/dev/null 2>"$tmp/out"; then
        bad "refuses $what"
    elif grep -q -- "$pat" "$tmp/out"; then
        ok "refuses $what"
    else
        bad "refuses $what (message lacks '$pat')"
    fi
}
refuse "two namespaces" "watches one namespace or all" --set 'namespaces={a,b}'
refuse "two replicas without a Lease" "needs leaderElection.enabled" --set leaderElection.enabled=false
refuse "a bad log level" "logLevel 'loud'" --set logLevel=loud
refuse "17 workers" "workers 17" --set workers=17
refuse "probes on the metrics port" "both 8443" --set probes.port=8443
refuse "a certificate for plain metrics" "needs metrics.secure" --set metrics.secure=false \
    --set metrics.certSecret=x

# The checker must fail broken renders.
broken() { # broken WHAT SED-EXPR [CHECK-ARGS...]
    local what=$1 expr=$2
    shift 2
    sed -e "$expr" "$tmp/default.yaml" >"$tmp/broken.yaml"
    if cmp -s "$tmp/broken.yaml" "$tmp/default.yaml"; then
        bad "checker refuses $what (the edit changed nothing)"
    elif python3 charts/tests/rbac_check.py "$tmp/broken.yaml" . --release-namespace areal-system \
        --skip-source-scan "$@" >"$tmp/out" 2>&1; then
        bad "checker refuses $what"
    else
        ok "checker refuses $what"
    fi
}
broken "a missing pods/binding" 's|\[pods/binding, |[|'
broken "secrets" 's|\[pods/binding, events|[pods/binding, secrets, events|'
broken "a wildcard verb" 's|verbs: \[list, watch\]|verbs: ["*"]|'
broken "an extra verb" 's|verbs: \[list, watch, patch, delete\]|verbs: [list, watch, patch, delete, update]|'
broken "leases without a name" '/resourceNames:/d'
broken "the write rules cluster-wide with one namespace" 's|--metrics-address=0.0.0.0:8443|&\n            - --namespace=team-a|' --namespace team-a
broken "a probe on the wrong path" 's|path: /readyz|path: /healthz|'
broken "a probe on the HTTPS metrics port" 's|port: probes|port: metrics|'
broken "secure metrics without token reviews" 's|resources: \[tokenreviews\]|resources: [tokenreviewz]|'
broken "a metrics reader wider than get /metrics" 's|nonResourceURLs: \[/metrics\]|nonResourceURLs: [/metrics, /debug]|'
broken "nonResourceURLs in the operator's role" 's|    resources: \[nodes, pods\]|&\n  - nonResourceURLs: [/metrics]\n    verbs: [get]|'
broken "the metrics reader bound to the operator" 's|^  name: t-areal-operator$|  name: t-areal-operator-metrics-reader|'
# and a source call it does not know
mkdir -p "$tmp/repo/operator/src" "$tmp/repo/crds"
cp crds/areal.io_arealjobs.yaml "$tmp/repo/crds/"
cp operator/src/*.c "$tmp/repo/operator/src/"
echo 'static void x(void) { kube_get(kc, &res, "s", &o, &e); resource_for("secrets", ns); }' >>"$tmp/repo/operator/src/controller.c"
if python3 charts/tests/rbac_check.py "$tmp/default.yaml" "$tmp/repo" --release-namespace areal-system >"$tmp/out" 2>&1; then
    bad "checker refuses an API call the RBAC does not know"
elif grep -q "kube_get" "$tmp/out" && grep -q "secrets" "$tmp/out"; then
    ok "checker refuses an API call the RBAC does not know"
else
    bad "checker refuses an API call the RBAC does not know (message)"
fi

echo "[  PASSED  ] $passed test(s)."
[ "$failed" -eq 0 ] || echo "[  FAILED  ] $failed test(s)."
[ "$failed" -eq 0 ]
