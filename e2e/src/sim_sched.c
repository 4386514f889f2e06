/*
 * sim_sched.c - a stand-in for kube-scheduler for the pods that name it
 * (see areal/simkubelet.h).
 *
 * Why: the suite runs no kube-scheduler (the operator binds its own pods),
 * but a chart installs the operator as a Deployment, whose pods name
 * "default-scheduler" and wait unbound forever without one. This binds each
 * such pod through pods/binding, as the scheduler does, to the live
 * simulated nodes in turn (round robin spreads replicas, which is what the
 * chart's preferred anti-affinity asks for).
 * Rejected: building kube-scheduler too (another 90 MB binary and minutes of
 * Go build for two pods) and nodeName in the chart (a real cluster's
 * scheduler would then be bypassed). Not done: resource fit, node selectors
 * and affinity terms (no chart of this repository needs more than spreading).
 */
#include <stdio.h>
#include <string.h>

#include "areal/simkubelet.h"

typedef struct pass {
    kube_client *c;
    const char *const *nodes;
    size_t n_nodes, *rr;
    int bound;
    areal_error *err;
    int rc;
} pass;

static int on_page(void *ud, const json_t *items) {
    pass *p = ud;
    size_t i;
    json_t *pod;
    json_array_foreach(items, i, pod) {
        const json_t *meta = json_object_get(pod, "metadata");
        if (json_object_get(meta, "deletionTimestamp") != NULL)
            continue;
        const char *ns = json_string_value(json_object_get(meta, "namespace"));
        const char *name = json_string_value(json_object_get(meta, "name"));
        const char *uid = json_string_value(json_object_get(meta, "uid"));
        if (ns == NULL || name == NULL)
            continue;
        const char *node = p->nodes[*p->rr % p->n_nodes];
        kube_error ke;
        int rc = kube_bind_pod(p->c, ns, name, uid, node, &ke);
        if (rc == KUBE_OK) {
            (*p->rr)++;
            p->bound++;
        } else if (rc != KUBE_ECONFLICT && rc != KUBE_ENOTFOUND && p->rc == AREAL_OK) {
            p->rc = areal_error_set(p->err, AREAL_EIO, -1, "binding %s/%s to %s: %s", ns, name,
                                    node, ke.msg);
        }
    }
    return KUBE_OK;
}

int sim_sched_bind_pending(kube_client *c, const char *const *nodes, size_t n_nodes, size_t *rr,
                           int *bound, areal_error *err) {
    *bound = 0;
    if (n_nodes == 0)
        return AREAL_OK;
    kube_resource res = {NULL, "v1", "pods", NULL};
    kube_list_opts lo = {.field_selector = "spec.nodeName=,spec.schedulerName=default-scheduler",
                         .limit = 500};
    pass p = {c, nodes, n_nodes, rr, 0, err, AREAL_OK};
    kube_error ke;
    int rc = kube_list_pages(c, &res, &lo, on_page, &p, NULL, 0, &ke);
    *bound = p.bound;
    if (rc != KUBE_OK)
        return areal_error_set(err, AREAL_EIO, -1, "listing unscheduled pods: %s", ke.msg);
    return p.rc;
}
