/*
 * bench_layout.c - `make bench` figures of the layout engine:
 *   1. parse + every group of every kind for a 4,096-rank 5D strategy;
 *   2. placement of a 1,024-GPU job on a 4,000-node inventory with 4 topology
 *      levels (cliques of 8 nodes, leaves of 16, spines of 250, zones of 2,000),
 *      30% of GPUs already used (seeded).
 * Each figure is the median of repeated runs on this machine, wall clock.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/alloc.h"
#include "areal/clock.h"
#include "areal/groups.h"
#include "areal/placement.h"

static double now_ms(void) {
    return areal_mono_s() * 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

#define RUNS 41

static int bench_groups(void) {
    const char *s = "megatron:(attn:d32p4t8c4|ffn:p4t4e8)";
    int *members = malloc(4096 * sizeof *members);
    double t[RUNS];
    long checksum = 0, groups = 0;
    for (int run = 0; run < RUNS; run++) {
        double t0 = now_ms();
        areal_alloc a;
        areal_error err;
        areal_layout l;
        if (areal_alloc_parse(s, &a, &err) != AREAL_OK ||
            areal_layout_init(&l, &a.comp[0].strategy, &err) != AREAL_OK) {
            fprintf(stderr, "bench: %s\n", err.msg);
            free(members);
            return 1;
        }
        groups = 0;
        for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
            int count = areal_group_count(&l, (areal_group_kind)k);
            for (int g = 0; g < count; g++) {
                int size = areal_group_ranks(&l, (areal_group_kind)k, g, members);
                checksum += members[size - 1];
                groups++;
            }
        }
        t[run] = now_ms() - t0;
    }
    printf("parse + all groups, %s (4096 ranks, d32 t8 p4 c4 e8 etp4, %ld groups of 16 kinds): "
           "median %.3f ms over %d runs (checksum %ld)\n",
           s, groups, median(t, RUNS), RUNS, checksum);
    free(members);
    return 0;
}

static int build_inventory(areal_cluster *c) {
    areal_cluster_init(c);
    uint64_t seed = 4000;
    for (int i = 0; i < 4000; i++) {
        char name[32], clique[32], leaf[32], spine[32], zone[32];
        snprintf(name, sizeof name, "node-%04d", i);
        snprintf(clique, sizeof clique, "clique-%d", i / 8);
        snprintf(leaf, sizeof leaf, "leaf-%d", i / 16);
        snprintf(spine, sizeof spine, "spine-%d", i / 250);
        snprintf(zone, sizeof zone, "zone-%d", i / 2000);
        int idx = areal_cluster_add_node(c, name, 8, 0, NULL);
        if (idx < 0 || areal_cluster_set_label(c, idx, "nvidia.com/gpu.clique", clique, NULL) ||
            areal_cluster_set_label(c, idx, "network.topology.nvidia.com/leaf", leaf, NULL) ||
            areal_cluster_set_label(c, idx, "network.topology.nvidia.com/spine", spine, NULL) ||
            areal_cluster_set_label(c, idx, "topology.kubernetes.io/zone", zone, NULL))
            return 1;
    }
    long used = 0, target = (long)(0.3 * 4000 * 8);
    while (used < target) {
        int size = 1 << (rng_next(&seed) % 4);
        areal_node *n = &c->nodes[rng_next(&seed) % 4000];
        if (n->gpus - n->gpus_used >= size) {
            n->gpus_used += size;
            used += size;
        }
    }
    return 0;
}

static int bench_placement(void) {
    areal_cluster c;
    if (build_inventory(&c) != 0) {
        fprintf(stderr, "bench: cannot build the inventory\n");
        return 1;
    }
    const char *s = "sglang:d32t8+megatron:d8p12t8e8"; /* 256 + 768 = 1024 GPUs */
    areal_alloc a;
    areal_error err;
    if (areal_alloc_parse(s, &a, &err) != AREAL_OK) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    areal_job job;
    areal_job_init(&job, "bench", &a);
    double t[RUNS];
    areal_plan p;
    for (int run = 0; run < RUNS; run++) {
        double t0 = now_ms();
        int rc = areal_place(&job, &c, &p, &err);
        t[run] = now_ms() - t0;
        if (rc != AREAL_OK) {
            fprintf(stderr, "bench: placement failed: %s\n", err.msg);
            areal_cluster_free(&c);
            return 1;
        }
        if (run < RUNS - 1)
            areal_plan_free(&p);
    }
    printf("placement of %s (%ld GPUs, %d pods) on 4000 nodes x 8 GPUs, 4 topology levels, 30%% "
           "used: median %.3f ms over %d runs (goal < 10 ms)\n",
           s, p.gpus, p.n_pods, median(t, RUNS), RUNS);
    const areal_role_plan *trainer = &p.roles[1];
    for (int q = 0; q < trainer->n_quality; q++) {
        const areal_kind_quality *kq = &trainer->quality[q];
        if (kq->kind != AREAL_GROUP_TP && kq->kind != AREAL_GROUP_EP &&
            kq->kind != AREAL_GROUP_PP && kq->kind != AREAL_GROUP_DP)
            continue;
        printf("  trainer %-3s groups %4d:", areal_group_kind_name(kq->kind), kq->n_groups);
        for (int l = 0; l <= p.n_levels; l++)
            printf("  in one %s %4d", p.level_name[l], kq->within[l]);
        printf("\n");
    }
    areal_plan_free(&p);
    areal_cluster_free(&c);
    return 0;
}

int main(void) {
    int rc = bench_groups();
    if (rc == 0)
        rc = bench_placement();
    return rc;
}
