/*
 * ncclpg_coll.c - the NCCL backend behind areal/comm/coll.h: the ops table
 * over areal_ncclpg and its group factory. The table states device memory;
 * the generic layer has checked every buffer against the group's device
 * before these run. There are no async members: each NCCL call here already
 * waits for the group's stream with its deadline, so the generic layer runs
 * the blocking form at issue. Rejected: a second host thread per group to
 * fake asynchrony (the stream is the place for overlap; it is exposed by
 * areal_ncclpg_stream for that).
 */
#include <stddef.h>

#include "areal/comm/ncclpg.h"

static const char *nc_name(const void *g) {
    return areal_ncclpg_name(g);
}
static int nc_size(const void *g) {
    return areal_ncclpg_size(g);
}
static int nc_rank(const void *g) {
    return areal_ncclpg_rank(g);
}
static int nc_global_rank(const void *g, int j) {
    return areal_ncclpg_global_rank(g, j);
}
static void nc_set_timeout(void *g, int timeout_ms) {
    areal_ncclpg_set_timeout(g, timeout_ms);
}
static int nc_all_reduce(void *g, void *buf, size_t count, areal_dtype t, areal_redop op,
                         areal_error *err) {
    return areal_ncclpg_all_reduce(g, buf, count, t, op, err);
}
static int nc_reduce_scatter(void *g, const void *in, void *out, size_t count, areal_dtype t,
                             areal_redop op, areal_error *err) {
    return areal_ncclpg_reduce_scatter(g, in, out, count, t, op, err);
}
static int nc_all_gather(void *g, const void *in, void *out, size_t count, areal_dtype t,
                         areal_error *err) {
    return areal_ncclpg_all_gather(g, in, out, count, t, err);
}
static int nc_broadcast(void *g, void *buf, size_t count, areal_dtype t, int root,
                        areal_error *err) {
    return areal_ncclpg_broadcast(g, buf, count, t, root, err);
}
static int nc_send(void *g, const void *buf, size_t count, areal_dtype t, int peer,
                   areal_error *err) {
    return areal_ncclpg_send(g, buf, count, t, peer, err);
}
static int nc_recv(void *g, void *buf, size_t count, areal_dtype t, int peer, areal_error *err) {
    return areal_ncclpg_recv(g, buf, count, t, peer, err);
}
static int nc_all_to_all(void *g, const void *in, void *out, size_t count, areal_dtype t,
                         areal_error *err) {
    return areal_ncclpg_all_to_all(g, in, out, count, t, err);
}
static int nc_all_to_allv(void *g, const void *in, const size_t *sc, const size_t *sd, void *out,
                          const size_t *rc, const size_t *rd, areal_dtype t, areal_error *err) {
    return areal_ncclpg_all_to_allv(g, in, sc, sd, out, rc, rd, t, err);
}
static int nc_barrier(void *g, areal_error *err) {
    return areal_ncclpg_barrier(g, err);
}
static void nc_destroy(void *g) {
    areal_ncclpg_destroy(g);
}

static const areal_coll_ops nccl_ops = {
    .backend = "nccl",
    .mem = AREAL_MEM_DEVICE,
    .name = nc_name,
    .size = nc_size,
    .rank = nc_rank,
    .global_rank = nc_global_rank,
    .set_timeout = nc_set_timeout,
    .all_reduce = nc_all_reduce,
    .reduce_scatter = nc_reduce_scatter,
    .all_gather = nc_all_gather,
    .broadcast = nc_broadcast,
    .send = nc_send,
    .recv = nc_recv,
    .all_to_all = nc_all_to_all,
    .all_to_allv = nc_all_to_allv,
    .barrier = nc_barrier,
    .destroy = nc_destroy,
};

int areal_coll_from_ncclpg(areal_ncclpg *g, areal_coll **out, areal_error *err) {
    return areal_coll_wrap(&nccl_ops, g, areal_ncclpg_device(g), out, err);
}

static int nc_group(void *ctx, const char *name, const int *ranks, int n, areal_coll **out,
                    areal_error *err) {
    const areal_ncclpg_site *s = ctx;
    areal_ncclpg_config cfg = {.store = s->store,
                               .name = name,
                               .ranks = ranks,
                               .n = n,
                               .rank = s->rank,
                               .device = s->device,
                               .timeout_ms = s->timeout_ms};
    areal_ncclpg *g = NULL;
    *out = NULL;
    int rc = areal_ncclpg_create(&cfg, &g, err);
    return rc != AREAL_OK ? rc : areal_coll_from_ncclpg(g, out, err);
}

areal_coll_factory areal_ncclpg_coll_factory(const areal_ncclpg_site *site, int world) {
    return (areal_coll_factory){
        .group = nc_group, .ctx = (void *)site, .rank = site->rank, .world = world};
}
