/*
 * timed_coll.h - bench_parallel's stopwatch around a process group (header
 * only, for the bench): an areal_coll whose ops table forwards every call to
 * the group it wraps and times its point-to-point traffic, and a virtual
 * clock that replays a pipeline schedule as if each rank had a core of its
 * own (see below). Rejected: timers inside worker/parallel's pipe.c and
 * vpp.c (library code keeps no global counters, and the wrapper sees exactly
 * the transfers the schedule makes).
 */
#ifndef BENCH_TIMED_COLL_H
#define BENCH_TIMED_COLL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/comm/coll.h"
#include "bench_ranks.h"

/*
 * ---- the pp group under a stopwatch. Every call is forwarded; send, recv
 * and broadcast are timed (wall seconds inside them), and while a pipeline
 * call runs (vt_begin .. vt_end) each rank also keeps a virtual clock: its
 * own thread's CPU seconds, and after each receive the sender's clock when
 * it sent (an 8-byte message that follows each data message on the same
 * pair, so it never blocks). That replays the schedule as if each rank had a
 * core of its own, which 8 ranks on 2 shared cores do not: the wall-clock
 * wait share counts a peer's time waiting for a core as bubble, the virtual
 * one does not. Sends are instantaneous in it, as in areal_par_vpp_bubble's
 * simulation. The extra bytes are counted (extra) and left out of table 2.
 */

typedef struct timed {
    areal_coll *in;
    double wait;          /* wall seconds inside send, recv and broadcast */
    int active;           /* inside a pipeline call: the virtual clock runs */
    double v, busy, last; /* virtual clock, its busy part, thread CPU at the last event */
    uint64_t extra;       /* bytes of the clock's own messages */
} timed;

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void vt_advance(timed *t) {
    double now = thread_cpu_s();
    t->v += now - t->last, t->busy += now - t->last, t->last = now;
}

static void vt_begin(timed *t) {
    if (t != NULL)
        t->active = 1, t->v = 0, t->busy = 0, t->last = thread_cpu_s();
}

static void vt_end(timed *t) {
    if (t != NULL && t->active)
        vt_advance(t), t->active = 0;
}

#define FWD(call)                                                                                  \
    do {                                                                                           \
        double t0_ = wall_s();                                                                     \
        int rc_ = (call);                                                                          \
        ((timed *)g)->wait += wall_s() - t0_;                                                      \
        return rc_;                                                                                \
    } while (0)
#define IN(g) (((timed *)(g))->in)

static const char *t_name(const void *g) {
    return areal_coll_name(((const timed *)g)->in);
}
static int t_size(const void *g) {
    return areal_coll_size(((const timed *)g)->in);
}
static int t_rank(const void *g) {
    return areal_coll_rank(((const timed *)g)->in);
}
static int t_global_rank(const void *g, int j) {
    return areal_coll_global_rank(((const timed *)g)->in, j);
}
static void t_set_timeout(void *g, int ms) {
    areal_coll_set_timeout(IN(g), ms);
}
static int t_all_reduce(void *g, void *b, size_t n, areal_dtype t, areal_redop op, areal_error *e) {
    return areal_coll_all_reduce(IN(g), b, n, t, op, e);
}
static int t_reduce_scatter(void *g, const void *i, void *o, size_t n, areal_dtype t,
                            areal_redop op, areal_error *e) {
    return areal_coll_reduce_scatter(IN(g), i, o, n, t, op, e);
}
static int t_all_gather(void *g, const void *i, void *o, size_t n, areal_dtype t, areal_error *e) {
    return areal_coll_all_gather(IN(g), i, o, n, t, e);
}
static int t_broadcast(void *g, void *b, size_t n, areal_dtype t, int root, areal_error *e) {
    FWD(areal_coll_broadcast(IN(g), b, n, t, root, e));
}
static int t_send(void *g, const void *b, size_t n, areal_dtype t, int peer, areal_error *e) {
    timed *x = g;
    double t0 = wall_s();
    if (x->active)
        vt_advance(x);
    int rc = areal_coll_send(x->in, b, n, t, peer, e);
    if (rc == AREAL_OK && x->active) {
        vt_advance(x); /* the copy out is the sender's work */
        int64_t bits;
        memcpy(&bits, &x->v, sizeof bits);
        rc = areal_coll_send(x->in, &bits, 1, AREAL_DT_I64, peer, e);
        x->extra += sizeof bits;
        x->last = thread_cpu_s();
    }
    x->wait += wall_s() - t0;
    return rc;
}
static int t_recv(void *g, void *b, size_t n, areal_dtype t, int peer, areal_error *e) {
    timed *x = g;
    double t0 = wall_s();
    if (x->active)
        vt_advance(x);
    int rc = areal_coll_recv(x->in, b, n, t, peer, e);
    if (rc == AREAL_OK && x->active) {
        vt_advance(x);
        int64_t bits;
        double sent;
        rc = areal_coll_recv(x->in, &bits, 1, AREAL_DT_I64, peer, e);
        memcpy(&sent, &bits, sizeof sent);
        x->v = sent > x->v ? sent : x->v; /* idle in virtual time until the data was sent */
        x->last = thread_cpu_s();
    }
    x->wait += wall_s() - t0;
    return rc;
}
static int t_all_to_all(void *g, const void *i, void *o, size_t n, areal_dtype t, areal_error *e) {
    return areal_coll_all_to_all(IN(g), i, o, n, t, e);
}
static int t_all_to_allv(void *g, const void *i, const size_t *sc, const size_t *sd, void *o,
                         const size_t *rc, const size_t *rd, areal_dtype t, areal_error *e) {
    return areal_coll_all_to_allv(IN(g), i, sc, sd, o, rc, rd, t, e);
}
static int t_barrier(void *g, areal_error *e) {
    return areal_coll_barrier(IN(g), e);
}
static void t_destroy(void *g) {
    areal_coll_destroy(IN(g));
    free(g);
}
static void t_bytes(const void *g, areal_coll_bytes *out) {
    areal_coll_bytes_of(((const timed *)g)->in, out);
}

/* No async members: coll.c then runs an async call at issue, which the pp group never makes. */
static const areal_coll_ops timed_ops = {
    .backend = "cpu",
    .mem = AREAL_MEM_HOST,
    .name = t_name,
    .size = t_size,
    .rank = t_rank,
    .global_rank = t_global_rank,
    .set_timeout = t_set_timeout,
    .all_reduce = t_all_reduce,
    .reduce_scatter = t_reduce_scatter,
    .all_gather = t_all_gather,
    .broadcast = t_broadcast,
    .send = t_send,
    .recv = t_recv,
    .all_to_all = t_all_to_all,
    .all_to_allv = t_all_to_allv,
    .barrier = t_barrier,
    .destroy = t_destroy,
    .bytes = t_bytes,
};

#endif
