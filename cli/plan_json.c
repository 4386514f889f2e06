/*
 * plan_json.c - `arealctl plan --json`: the layout as one JSON document for
 * tools (the operator's tests compare against it). Built with jansson; every
 * `_new` setter steals the reference it is given, so each value has exactly
 * one owner, the document root, freed once at the end.
 */
#include <stdlib.h>

#include <jansson.h>

#include "cli.h"

static json_t *int_array(const int *v, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

static json_t *strategy_json(const areal_strategy *s) {
    return json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "dp", s->dp, "tp", s->tp, "pp", s->pp, "cp",
                     s->cp, "ep", s->ep, "etp", s->etp, "edp", s->edp);
}

static json_t *groups_json(const areal_role_plan *role, int *members) {
    json_t *groups = json_object();
    for (int k = 0; groups && k < AREAL_GROUP_KIND_COUNT; k++) {
        if (!areal_role_has_kind(role, (areal_group_kind)k))
            continue;
        json_t *list = json_array();
        int count = areal_role_group_count(role, (areal_group_kind)k);
        for (int g = 0; list && g < count; g++) {
            int size = areal_role_group_ranks(role, (areal_group_kind)k, g, members);
            json_array_append_new(list, int_array(members, size));
        }
        json_object_set_new(groups, areal_group_kind_name((areal_group_kind)k), list);
    }
    return groups;
}

static json_t *pods_json(const plan_view *v, const areal_role_plan *role, int *members) {
    json_t *pods = json_array();
    for (int i = 0; pods && i < role->n_pods; i++) {
        const areal_pod_plan *pod = &v->plan->pods[role->first_pod + i];
        for (int j = 0; j < pod->n_ranks; j++)
            members[j] = pod->first_rank + j;
        json_array_append_new(pods, json_pack("{s:s,s:s,s:o}", "name", pod->name, "node",
                                              v->cluster->nodes[pod->node].name, "ranks",
                                              int_array(members, pod->n_ranks)));
    }
    return pods;
}

static json_t *quality_json(const areal_plan *p, const areal_role_plan *role) {
    json_t *q = json_object();
    for (int i = 0; q && i < role->n_quality; i++) {
        const areal_kind_quality *kq = &role->quality[i];
        json_t *within = json_object(), *cross = json_object();
        for (int l = 0; l <= p->n_levels; l++) {
            json_object_set_new(within, p->level_name[l], json_integer(kq->within[l]));
            json_object_set_new(cross, p->level_name[l], json_integer(kq->cross_links[l]));
        }
        json_object_set_new(q, areal_group_kind_name(kq->kind),
                            json_pack("{s:i,s:o,s:o}", "groups", kq->n_groups, "within", within,
                                      "cross_links", cross));
    }
    return q;
}

static json_t *rank_json(const plan_view *v, int *members) {
    const areal_role_plan *role = &v->plan->roles[v->rank_role];
    json_t *groups = json_object();
    for (int k = 0; groups && k < AREAL_GROUP_KIND_COUNT; k++) {
        if (!areal_role_has_kind(role, (areal_group_kind)k))
            continue;
        int count = areal_role_group_count(role, (areal_group_kind)k);
        for (int g = 0; g < count; g++) {
            int size = areal_role_group_ranks(role, (areal_group_kind)k, g, members);
            int j = 0;
            while (j < size && members[j] != v->rank)
                j++;
            if (j < size) {
                json_object_set_new(
                    groups, areal_group_kind_name((areal_group_kind)k),
                    json_pack("{s:i,s:o}", "index", g, "ranks", int_array(members, size)));
                break;
            }
        }
    }
    const areal_plan *p = v->plan;
    int pod = role->first_pod + v->rank / role->gpus_per_pod;
    return json_pack("{s:s,s:i,s:s,s:s,s:o}", "role", role->name, "rank", v->rank, "pod",
                     p->pods[pod].name, "node", v->cluster->nodes[p->pods[pod].node].name, "groups",
                     groups);
}

int plan_print_json(FILE *out, const plan_view *v) {
    const areal_plan *p = v->plan;
    int max_world = 1;
    for (int r = 0; r < p->n_roles; r++)
        if (p->roles[r].world > max_world)
            max_world = p->roles[r].world;
    int *members = malloc((size_t)max_world * sizeof *members);
    int canonical_len = areal_alloc_format(v->alloc, NULL, 0);
    char *canonical = malloc((size_t)(canonical_len > 0 ? canonical_len : 0) + 1);
    if (canonical != NULL)
        areal_alloc_format(v->alloc, canonical, canonical_len + 1);
    json_t *levels = json_array(), *roles = json_array();
    for (int l = 0; levels && l <= p->n_levels; l++)
        json_array_append_new(levels, json_string(p->level_name[l]));
    for (int r = 0; members && roles && r < p->n_roles; r++) {
        const areal_role_plan *role = &p->roles[r];
        json_t *colocated = role->colocated_with >= 0
                                ? json_string(p->roles[role->colocated_with].name)
                                : json_null();
        json_array_append_new(
            roles,
            json_pack("{s:s,s:s,s:i,s:b,s:i,s:o,s:o,s:o,s:o,s:o}", "name", role->name, "backend",
                      areal_backend_name(role->backend), "world_size", role->world, "inference",
                      role->inference, "gpus_per_pod", role->gpus_per_pod, "colocated_with",
                      colocated, "strategy", strategy_json(&role->strategy), "groups",
                      groups_json(role, members), "pods", pods_json(v, role, members), "quality",
                      quality_json(p, role)));
    }
    json_t *doc =
        json_pack("{s:s,s:s,s:s,s:b,s:I,s:o,s:o}", "job", v->job_name, "allocation", v->alloc_text,
                  "canonical", canonical ? canonical : "", "legacy", v->alloc->legacy, "gpus",
                  (json_int_t)p->gpus, "levels", levels, "roles", roles);
    if (doc && v->rank_role >= 0 && members)
        json_object_set_new(doc, "rank", rank_json(v, members));
    int rc = CLI_FAILURE;
    if (doc && members && json_dumpf(doc, out, JSON_COMPACT) == 0) {
        fputc('\n', out);
        rc = CLI_OK;
    }
    if (rc != CLI_OK)
        cli_failure("out of memory writing JSON");
    json_decref(doc);
    free(members);
    free(canonical);
    return rc;
}
