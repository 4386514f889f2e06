/*
 * plan_text.c - `arealctl plan` tables: roles, pods -> nodes, the groups of
 * one rank, and the placement quality per group kind.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void strategy_text(const areal_role_plan *r, char *buf, size_t cap) {
    const areal_strategy *s = &r->strategy;
    if (r->inference)
        snprintf(buf, cap, "d%d t%d p%d (%d servers of %d GPUs)", s->dp, s->tp, s->pp, s->dp,
                 s->tp * s->pp);
    else
        snprintf(buf, cap, "d%d t%d p%d c%d e%d etp%d edp%d", s->dp, s->tp, s->pp, s->cp, s->ep,
                 s->etp, s->edp);
}

static const char *level_key(const char *name) {
    areal_topology t;
    areal_topology_default(&t);
    int l = areal_topology_level(&t, name);
    static _Thread_local char key[AREAL_TOPO_KEY_MAX];
    snprintf(key, sizeof key, "%s", l >= 1 ? t.key[l - 1] : "");
    return key;
}

static void print_roles(FILE *out, const plan_view *v) {
    const areal_plan *p = v->plan;
    fprintf(out, "%-12s %-9s %6s  %-40s %s\n", "ROLE", "BACKEND", "WORLD", "STRATEGY", "PODS");
    for (int r = 0; r < p->n_roles; r++) {
        const areal_role_plan *role = &p->roles[r];
        char strategy[96], pods[64];
        strategy_text(role, strategy, sizeof strategy);
        if (role->colocated_with >= 0)
            snprintf(pods, sizeof pods, "colocated on %s", p->roles[role->colocated_with].name);
        else
            snprintf(pods, sizeof pods, "%d x %d GPUs", role->n_pods, role->gpus_per_pod);
        fprintf(out, "%-12s %-9s %6d  %-40s %s\n", role->name, areal_backend_name(role->backend),
                role->world, strategy, pods);
    }
}

static void print_pods(FILE *out, const plan_view *v) {
    const areal_plan *p = v->plan;
    fprintf(out, "\n%-28s %-16s", "POD", "NODE");
    for (int l = 1; l <= p->n_levels; l++)
        fprintf(out, " %-12.12s", p->level_name[l]);
    fprintf(out, " RANKS\n");
    for (int i = 0; i < p->n_pods; i++) {
        const areal_pod_plan *pod = &p->pods[i];
        const areal_node *node = &v->cluster->nodes[pod->node];
        fprintf(out, "%-28s %-16s", pod->name, node->name);
        for (int l = 1; l <= p->n_levels; l++) {
            const char *val = areal_node_label(node, level_key(p->level_name[l]));
            fprintf(out, " %-12.12s", val ? val : "-");
        }
        if (pod->n_ranks == 1)
            fprintf(out, " %d\n", pod->first_rank);
        else
            fprintf(out, " %d-%d\n", pod->first_rank, pod->first_rank + pod->n_ranks - 1);
    }
}

static void print_rank(FILE *out, const plan_view *v) {
    const areal_role_plan *role = &v->plan->roles[v->rank_role];
    int rank = v->rank;
    fprintf(out, "\nGROUPS OF %s RANK %d", role->name, rank);
    if (!role->inference) {
        areal_layout l;
        if (areal_layout_init(&l, &role->strategy, NULL) == AREAL_OK) {
            areal_rank_coords c = areal_rank_coords_of(&l, rank);
            fprintf(out, "  (tp %d cp %d dp %d pp %d | etp %d ep %d edp %d)", c.tp, c.cp, c.dp,
                    c.pp, c.etp, c.ep, c.edp);
        }
    }
    fprintf(out, "\n");
    int *members = malloc((size_t)role->world * sizeof *members);
    if (members == NULL)
        return;
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
        if (!areal_role_has_kind(role, (areal_group_kind)k))
            continue;
        int count = areal_role_group_count(role, (areal_group_kind)k);
        int g = -1;
        for (int i = 0; i < count && g < 0; i++) {
            int size = areal_role_group_ranks(role, (areal_group_kind)k, i, members);
            for (int j = 0; j < size; j++)
                if (members[j] == rank)
                    g = i;
        }
        fprintf(out, "  %-10s", areal_group_kind_name((areal_group_kind)k));
        if (g < 0) {
            fprintf(out, "(none)\n");
            continue;
        }
        int size = areal_role_group_ranks(role, (areal_group_kind)k, g, members);
        fprintf(out, "group %d of %d: [", g, count);
        for (int j = 0; j < size && j < 32; j++)
            fprintf(out, "%s%d", j ? " " : "", members[j]);
        fprintf(out, "%s]\n", size > 32 ? " ..." : "");
    }
    free(members);
}

static void print_quality(FILE *out, const plan_view *v) {
    const areal_plan *p = v->plan;
    fprintf(out,
            "\nQUALITY: groups inside one domain of each level / neighbour links crossing it\n");
    fprintf(out, "%-12s %-10s %6s", "ROLE", "KIND", "GROUPS");
    for (int l = 0; l <= p->n_levels; l++)
        fprintf(out, " %14.14s", p->level_name[l]);
    fprintf(out, "\n");
    for (int r = 0; r < p->n_roles; r++) {
        const areal_role_plan *role = &p->roles[r];
        for (int q = 0; q < role->n_quality; q++) {
            const areal_kind_quality *kq = &role->quality[q];
            if (areal_role_group_size(role, kq->kind) <= 1)
                continue; /* singleton groups are trivially local */
            fprintf(out, "%-12s %-10s %6d", role->name, areal_group_kind_name(kq->kind),
                    kq->n_groups);
            for (int l = 0; l <= p->n_levels; l++) {
                char cell[32];
                snprintf(cell, sizeof cell, "%d in / %ld x", kq->within[l], kq->cross_links[l]);
                fprintf(out, " %14s", cell);
            }
            fprintf(out, "\n");
        }
    }
}

void plan_print_text(FILE *out, const plan_view *v) {
    const areal_plan *p = v->plan;
    int used_nodes = 0;
    char *seen = calloc((size_t)v->cluster->n_nodes, 1);
    for (int i = 0; seen && i < p->n_pods; i++)
        if (!seen[p->pods[i].node]) {
            seen[p->pods[i].node] = 1;
            used_nodes++;
        }
    free(seen);
    fprintf(out, "job %s: %s - %ld GPUs in %d pods on %d of %d nodes\n\n", v->job_name,
            v->alloc_text, p->gpus, p->n_pods, used_nodes, v->cluster->n_nodes);
    print_roles(out, v);
    print_pods(out, v);
    if (v->rank_role >= 0)
        print_rank(out, v);
    print_quality(out, v);
}
