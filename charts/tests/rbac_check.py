#!/usr/bin/env python3
"""rbac_check.py - checks a rendered areal-operator chart (helm template output).

What: the RBAC granted to the operator's ServiceAccount must be exactly the API
calls the operator makes (OPERATOR_CALLS below), each in the right scope: the
informers' reads cluster-wide, the reconcile's writes cluster-wide or in the one
watched namespace (a Role), the Lease only through a Role in the release
namespace and by name; with --metrics-secure, create on tokenreviews and
subjectaccessreviews (cluster-scoped), and the <fullname>-metrics-reader
ClusterRole (get /metrics, the one nonResourceURLs rule allowed) bound to no
operator account. Nothing else: no secrets, no wildcard, no verb the operator
never calls. Also checks the Deployment (probes, non-root read-only
security context, anti-affinity, flags agreeing with the RBAC) and that the CRD
is the one of crds/.
Why a source scan too: OPERATOR_CALLS is a copy of what operator/src does; the
scan of operator/src fails this test when a new kube_* call or resource
appears there, so the chart cannot silently fall behind the code.
Usage: rbac_check.py RENDERED.yaml REPO_ROOT [--namespace NS] [--release-namespace NS]
       [--no-leader-election]; exit 0 when clean, 1 with one line per problem.
"""
import argparse
import re
import sys
from pathlib import Path

import yaml

# (apiGroup, resource) -> verbs, by where the operator calls them.
CLUSTER_READS = {("", "nodes"): {"list", "watch"}, ("", "pods"): {"list", "watch"}}
JOB_RULES = {
    ("areal.io", "arealjobs"): {"list", "watch", "patch", "delete"},
    ("areal.io", "arealjobs/status"): {"patch"},
    ("", "pods"): {"create", "delete"},
    ("", "pods/binding"): {"create"},
    ("", "services"): {"create", "patch"},
    ("", "configmaps"): {"create", "patch"},
    ("", "events"): {"create"},
}
LEASE_RULES = {("coordination.k8s.io", "leases"): {"create", "get", "update"}}
# --metrics-secure: each scrape's token reviewed (operator/src/metrics_auth.c)
REVIEW_RULES = {("authentication.k8s.io", "tokenreviews"): {"create"},
                ("authorization.k8s.io", "subjectaccessreviews"): {"create"}}

# The kube_* calls of operator/ (file -> functions) and the resources its
# reconcile names; the tables above were derived from exactly these.
OPERATOR_CALLS = {
    "operator/src/controller.c": {"kube_create", "kube_delete", "kube_bind_pod", "kube_patch",
                                  "kube_reflector_run", "kube_watch_new", "kube_watch_stop",
                                  "kube_watch_free"},
    "operator/src/lease.c": {"kube_get", "kube_create", "kube_update"},
    # status.progress (patch arealjobs/status) and TrainerPhase Events (create events)
    "operator/src/progress_poll.c": {"kube_create", "kube_patch"},
    # TokenReview and SubjectAccessReview of the secure metrics
    "operator/src/metrics_auth.c": {"kube_create"},
}
OPERATOR_RESOURCES = {"arealjobs", "pods", "nodes", "services", "configmaps", "events"}
KUBE_CALL = re.compile(r"\b(kube_(?:get|list|create|update|patch|delete|bind_pod|reflector_run|"
                       r"watch_\w+|request\w*|apply\w*|evict\w*))\s*\(")
RESOURCE_NAME = re.compile(r'(?:resource_for|push)\s*\([^"]*"([a-z/]+)"')


def scan_sources(root, problems):
    """Compares operator/'s kube calls and resource names with the tables above."""
    found = {}
    resources = set()
    for f in sorted((root / "operator").rglob("*.c")):
        rel = f.relative_to(root).as_posix()
        if "/tests/" in rel or "/fuzz/" in rel:
            continue
        text = f.read_text()
        calls = set(KUBE_CALL.findall(text))
        if calls:
            found[rel] = calls
        resources |= set(RESOURCE_NAME.findall(text))
    for rel in sorted(set(found) | set(OPERATOR_CALLS)):
        new = found.get(rel, set()) - OPERATOR_CALLS.get(rel, set())
        gone = OPERATOR_CALLS.get(rel, set()) - found.get(rel, set())
        if new:
            problems.append(f"{rel} calls {sorted(new)}, unknown to this checker: add the verbs "
                            "to charts/areal-operator/templates/rbac.yaml and OPERATOR_CALLS")
        if gone:
            problems.append(f"{rel} no longer calls {sorted(gone)}: drop what they needed from "
                            "the chart's RBAC and OPERATOR_CALLS")
    for r in sorted(resources - OPERATOR_RESOURCES):
        problems.append(f"operator/ names resource '{r}', unknown to this checker: grant it in "
                        "the chart and add it to OPERATOR_RESOURCES")


def granted(docs, sa, sa_ns):
    """(scope, apiGroup, resource) -> (verbs, resourceNames) of the SA's bound rules.

    scope is "*" for a ClusterRoleBinding, else the RoleBinding's namespace."""
    roles = {}
    for d in docs:
        if d["kind"] == "ClusterRole":
            roles[("ClusterRole", None, d["metadata"]["name"])] = d
        elif d["kind"] == "Role":
            roles[("Role", d["metadata"].get("namespace"), d["metadata"]["name"])] = d
    out = []
    for d in docs:
        if d["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa and
                   s.get("namespace") == sa_ns for s in d.get("subjects", [])):
            continue
        scope = "*" if d["kind"] == "ClusterRoleBinding" else d["metadata"].get("namespace")
        ref = d["roleRef"]
        key = (ref["kind"], None if ref["kind"] == "ClusterRole" else scope, ref["name"])
        role = roles.get(key)
        if role is None:
            out.append((scope, None, None, set(), [], f"{d['kind']} {d['metadata']['name']} "
                        f"binds {ref['kind']} {ref['name']}, which the chart does not render"))
            continue
        for rule in role.get("rules", []):
            for g in rule.get("apiGroups", []):
                for r in rule.get("resources", []):
                    out.append((scope, g, r, set(rule.get("verbs", [])),
                                rule.get("resourceNames", []), f"{ref['kind']} {ref['name']}"))
    return out


def check_reader(docs, sa, secure, problems):
    """The metrics-reader ClusterRole: only with --metrics-secure, exactly get /metrics,
    never bound to the operator's own account (it grants scrapers, not the operator)."""
    readers = [d for d in docs if d["kind"] == "ClusterRole" and
               d["metadata"]["name"].endswith("-metrics-reader")]
    if secure and len(readers) != 1:
        problems.append(f"{len(readers)} *-metrics-reader ClusterRoles with --metrics-secure, "
                        "expected 1 (what scrapers are bound to)")
    if not secure and readers:
        problems.append("a *-metrics-reader ClusterRole without --metrics-secure (plain "
                        "metrics need no grant)")
    for r in readers:
        if r.get("rules") != [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]:
            problems.append(f"ClusterRole {r['metadata']['name']}: rules {r.get('rules')}, "
                            "expected exactly nonResourceURLs [/metrics] verbs [get]")
    names = {r["metadata"]["name"] for r in readers}
    for d in docs:
        if d["kind"] in ("ClusterRoleBinding", "RoleBinding") and d["roleRef"]["name"] in names \
                and any(x.get("name") == sa for x in d.get("subjects", [])):
            problems.append(f"{d['kind']} {d['metadata']['name']} binds the metrics reader to "
                            "the operator's own ServiceAccount")
    return names


def check_rbac(docs, args, sa, lease_name, secure, problems):
    readers = check_reader(docs, sa, secure, problems)
    for d in docs:
        if d["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in d.get("rules", []):
            where = f"{d['kind']} {d['metadata']['name']}"
            for field in ("apiGroups", "resources", "verbs", "nonResourceURLs"):
                if "*" in rule.get(field, []):
                    problems.append(f"{where}: wildcard in {field}")
            if rule.get("nonResourceURLs") and d["metadata"]["name"] not in readers:
                problems.append(f"{where}: nonResourceURLs {rule['nonResourceURLs']}")
            if "secrets" in rule.get("resources", []):
                problems.append(f"{where}: grants secrets")
    want = {}  # (scope, group, resource) -> verbs
    for k, v in CLUSTER_READS.items():
        want.setdefault(("*",) + k, set()).update(v)
    job_scope = args.namespace or "*"
    for k, v in JOB_RULES.items():
        want.setdefault((job_scope,) + k, set()).update(v)
    if not args.no_leader_election:
        for k, v in LEASE_RULES.items():
            want[(args.release_namespace,) + k] = set(v)
    if secure:
        for k, v in REVIEW_RULES.items():
            want.setdefault(("*",) + k, set()).update(v)
    have = {}
    for scope, g, r, verbs, names, where in granted(docs, sa, args.release_namespace):
        if g is None:
            problems.append(where)
            continue
        key = (scope, g, r)
        extra = verbs - want.get(key, set())
        if extra:
            problems.append(f"{where} grants {sorted(extra)} on {g or 'core'}/{r} in scope "
                            f"{scope}, which the operator never calls there")
        if r == "leases" and names and names != [lease_name]:
            problems.append(f"{where}: leases limited to {names}, the operator uses {lease_name}")
        if r == "leases" and not names and verbs & {"get", "update"}:
            problems.append(f"{where}: get/update on every Lease; limit them to {lease_name}")
        have.setdefault(key, set()).update(verbs)
    for key, verbs in sorted(want.items()):
        missing = verbs - have.get(key, set())
        if missing:
            scope, g, r = key
            problems.append(f"missing {sorted(missing)} on {g or 'core'}/{r} in scope {scope}: "
                            "the operator calls them")


def check_deployment(docs, args, problems):
    deps = [d for d in docs if d["kind"] == "Deployment"]
    if len(deps) != 1:
        problems.append(f"{len(deps)} Deployments rendered, expected 1")
        return None, None, False
    spec = deps[0]["spec"]["template"]["spec"]
    c = spec["containers"][0]
    flags = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "") for a in c.get("args", []))
    sa = spec.get("serviceAccountName")
    if flags.get("namespace", "") != (args.namespace or ""):
        problems.append(f"--namespace is '{flags.get('namespace', '')}', the RBAC was checked "
                        f"for '{args.namespace or ''}'")
    if args.no_leader_election == ("leader-elect" in flags):
        problems.append("--leader-elect disagrees with the leader-election RBAC")
    if "leader-elect" in flags and flags.get("lease-namespace") != args.release_namespace:
        problems.append("--lease-namespace is not the release namespace")
    probes = {p: (c.get(p) or {}).get("httpGet", {}).get("path")
              for p in ("livenessProbe", "readinessProbe")}
    if probes != {"livenessProbe": "/healthz", "readinessProbe": "/readyz"}:
        problems.append(f"probes {probes}: expected /healthz (liveness), /readyz (readiness)")
    # the probes are plain HTTP on --health-probe-address: their port must be that one
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    probe_port = flags.get("health-probe-address", "").rpartition(":")[2]
    for p in ("livenessProbe", "readinessProbe"):
        hg = (c.get(p) or {}).get("httpGet", {})
        port = ports.get(hg.get("port"), hg.get("port"))
        if str(port) != probe_port or hg.get("scheme", "HTTP") != "HTTP":
            problems.append(f"{p} on port {hg.get('port')} ({port}), but the probes are plain "
                            f"HTTP on --health-probe-address port {probe_port or '(unset)'}")
    sc, psc = c.get("securityContext", {}), spec.get("securityContext", {})
    if not (sc.get("readOnlyRootFilesystem") and sc.get("allowPrivilegeEscalation") is False):
        problems.append("the container is not read-only without privilege escalation")
    if not (psc.get("runAsNonRoot") or sc.get("runAsNonRoot")):
        problems.append("the pod may run as root")
    if not c.get("resources", {}).get("requests"):
        problems.append("the container has no resource requests")
    if deps[0]["spec"].get("replicas", 1) > 1 and not spec.get("affinity", {}).get(
            "podAntiAffinity"):
        problems.append("several replicas without pod anti-affinity")
    return sa, flags.get("lease-name"), "metrics-secure" in flags


def check_crd(docs, root, problems):
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    src = yaml.safe_load((root / "crds/areal.io_arealjobs.yaml").read_text())
    if crds != [src]:
        problems.append("the rendered CRD is not crds/areal.io_arealjobs.yaml "
                        "(render with --include-crds)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("rendered")
    p.add_argument("root")
    p.add_argument("--namespace", default="")
    p.add_argument("--release-namespace", default="default")
    p.add_argument("--no-leader-election", action="store_true")
    p.add_argument("--skip-source-scan", action="store_true")
    args = p.parse_args()
    root = Path(args.root)
    docs = [d for d in yaml.safe_load_all(Path(args.rendered).read_text()) if d]
    problems = []
    if not args.skip_source_scan:
        scan_sources(root, problems)
    sa, lease_name, secure = check_deployment(docs, args, problems)
    check_rbac(docs, args, sa, lease_name, secure, problems)
    check_crd(docs, root, problems)
    for line in problems:
        print(f"rbac_check: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
