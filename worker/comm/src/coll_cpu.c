/*
 * coll_cpu.c - the CPU backend behind areal/comm/coll.h: the ops table over
 * areal_pg (comm.h), and the group factory over a joined areal_comm. Each
 * entry is a cast and a call: the CPU transport keeps its own argument checks
 * and failure spread; the table only states that its buffers are host memory.
 */
#include <stddef.h>

#include "areal/comm/comm.h"

static const char *cpu_name(const void *g) {
    return areal_pg_name(g);
}
static int cpu_size(const void *g) {
    return areal_pg_size(g);
}
static int cpu_rank(const void *g) {
    return areal_pg_rank(g);
}
static int cpu_global_rank(const void *g, int j) {
    return areal_pg_global_rank(g, j);
}
static void cpu_set_timeout(void *g, int timeout_ms) {
    areal_pg_set_timeout(g, timeout_ms);
}
static int cpu_all_reduce(void *g, void *buf, size_t count, areal_dtype t, areal_redop op,
                          areal_error *err) {
    return areal_pg_all_reduce(g, buf, count, t, op, err);
}
static int cpu_reduce_scatter(void *g, const void *in, void *out, size_t count, areal_dtype t,
                              areal_redop op, areal_error *err) {
    return areal_pg_reduce_scatter(g, in, out, count, t, op, err);
}
static int cpu_all_gather(void *g, const void *in, void *out, size_t count, areal_dtype t,
                          areal_error *err) {
    return areal_pg_all_gather(g, in, out, count, t, err);
}
static int cpu_broadcast(void *g, void *buf, size_t count, areal_dtype t, int root,
                         areal_error *err) {
    return areal_pg_broadcast(g, buf, count, t, root, err);
}
static int cpu_send(void *g, const void *buf, size_t count, areal_dtype t, int peer,
                    areal_error *err) {
    return areal_pg_send(g, buf, count, t, peer, err);
}
static int cpu_recv(void *g, void *buf, size_t count, areal_dtype t, int peer, areal_error *err) {
    return areal_pg_recv(g, buf, count, t, peer, err);
}
static int cpu_all_to_all(void *g, const void *in, void *out, size_t count, areal_dtype t,
                          areal_error *err) {
    return areal_pg_all_to_all(g, in, out, count, t, err);
}
static int cpu_all_to_allv(void *g, const void *in, const size_t *sc, const size_t *sd, void *out,
                           const size_t *rc, const size_t *rd, areal_dtype t, areal_error *err) {
    return areal_pg_all_to_allv(g, in, sc, sd, out, rc, rd, t, err);
}
static int cpu_barrier(void *g, areal_error *err) {
    return areal_pg_barrier(g, err);
}
static int cpu_all_reduce_async(void *g, void *buf, size_t count, areal_dtype t, areal_redop op,
                                void **w, areal_error *err) {
    return areal_pg_all_reduce_async(g, buf, count, t, op, (areal_work **)w, err);
}
static int cpu_reduce_scatter_async(void *g, const void *in, void *out, size_t count, areal_dtype t,
                                    areal_redop op, void **w, areal_error *err) {
    return areal_pg_reduce_scatter_async(g, in, out, count, t, op, (areal_work **)w, err);
}
static int cpu_all_gather_async(void *g, const void *in, void *out, size_t count, areal_dtype t,
                                void **w, areal_error *err) {
    return areal_pg_all_gather_async(g, in, out, count, t, (areal_work **)w, err);
}
static int cpu_broadcast_async(void *g, void *buf, size_t count, areal_dtype t, int root, void **w,
                               areal_error *err) {
    return areal_pg_broadcast_async(g, buf, count, t, root, (areal_work **)w, err);
}
static void cpu_work_test(void *w, int *done) {
    areal_work_test(w, done);
}
static int cpu_work_wait(void *w, areal_error *err) {
    return areal_work_wait(w, err);
}
static void cpu_destroy(void *g) {
    areal_pg_destroy(g);
}
static void cpu_bytes(const void *g, areal_coll_bytes *out) {
    areal_pg_bytes(g, out);
}

static const areal_coll_ops cpu_ops = {
    .backend = "cpu",
    .mem = AREAL_MEM_HOST,
    .name = cpu_name,
    .size = cpu_size,
    .rank = cpu_rank,
    .global_rank = cpu_global_rank,
    .set_timeout = cpu_set_timeout,
    .all_reduce = cpu_all_reduce,
    .reduce_scatter = cpu_reduce_scatter,
    .all_gather = cpu_all_gather,
    .broadcast = cpu_broadcast,
    .send = cpu_send,
    .recv = cpu_recv,
    .all_to_all = cpu_all_to_all,
    .all_to_allv = cpu_all_to_allv,
    .barrier = cpu_barrier,
    .all_reduce_async = cpu_all_reduce_async,
    .reduce_scatter_async = cpu_reduce_scatter_async,
    .all_gather_async = cpu_all_gather_async,
    .broadcast_async = cpu_broadcast_async,
    .work_test = cpu_work_test,
    .work_wait = cpu_work_wait,
    .destroy = cpu_destroy,
    .bytes = cpu_bytes,
};

int areal_coll_from_pg(areal_pg *g, areal_coll **out, areal_error *err) {
    return areal_coll_wrap(&cpu_ops, g, -1, out, err);
}

static int cpu_group(void *ctx, const char *name, const int *ranks, int n, areal_coll **out,
                     areal_error *err) {
    areal_pg *g = NULL;
    *out = NULL;
    int rc = areal_comm_group(ctx, name, ranks, n, &g, err);
    return rc != AREAL_OK ? rc : areal_coll_from_pg(g, out, err);
}

areal_coll_factory areal_comm_coll_factory(areal_comm *c) {
    return (areal_coll_factory){
        .group = cpu_group, .ctx = c, .rank = areal_comm_rank(c), .world = areal_comm_world(c)};
}
