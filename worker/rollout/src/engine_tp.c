/*
 * engine_tp.c - the lock-step protocol of a tensor-parallel engine (t > 1,
 * engine.h "Tensor parallelism"): the leader's messages, sent by its
 * scheduler thread (the only thread that touches the tp group, so the
 * messages and the model's reductions can never interleave), and the
 * followers' loop that answers them.
 *
 * Every message starts with a header of HDR int32 broadcast from member 0:
 * {op, a0, a1, a2, ...}. Then, by op:
 *   HELLO {n_blocks, block_tokens}: the cache geometry (followers allocate
 *         the same block ids for their local heads);
 *   STEP  {T, n_seqs, n_table_total} + one int32 payload: tokens[T],
 *         cu[n_seqs + 1], start[n_seqs], n_table[n_seqs], the tables
 *         concatenated; the followers then run the same paged forward (no
 *         logits) and meet the leader's in the model's reductions;
 *   PING  {}: the idle heartbeat;
 *   LOAD  {bytes} + the directory (bytes with its NUL): every rank loads its
 *         shard, then one all-reduce of a per-rank failure flag, then each
 *         failed rank broadcasts its message; all switch, or none;
 *   STOP  {}: the leader's engine is being destroyed.
 * Rejected: a message per sequence (n_seqs broadcasts per step) and
 * variable headers (one fixed header keeps the followers' receive a single
 * known-size call).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/pool.h"
#include "engine_internal.h"

#define HDR 8
#define MSG 512 /* bytes of a failed rank's load message (an areal_error message) */

enum { OP_HELLO = 1, OP_STEP = 2, OP_PING = 3, OP_LOAD = 4, OP_STOP = 5 };

int eng_tp_reduce(void *ctx, areal_reduce_point point, int layer, float *buf, size_t count,
                  areal_error *err) {
    (void)point;
    (void)layer;
    return areal_coll_all_reduce(ctx, buf, count, AREAL_DT_F32, AREAL_SUM, err);
}

static int send_hdr(areal_coll *c, int op, int a0, int a1, int a2, areal_error *err) {
    int32_t h[HDR] = {op, a0, a1, a2, 0, 0, 0, 0};
    return areal_coll_broadcast(c, h, HDR, AREAL_DT_I32, 0, err);
}

int eng_tp_hello(areal_engine *e, areal_error *err) {
    return send_hdr(e->tp, OP_HELLO, e->blocks.n, e->cfg.block_tokens, 0, err);
}

int eng_tp_ping(areal_engine *e, areal_error *err) {
    return send_hdr(e->tp, OP_PING, 0, 0, 0, err);
}

int eng_tp_stop(areal_engine *e, areal_error *err) {
    return send_hdr(e->tp, OP_STOP, 0, 0, 0, err);
}

/* Broadcasts len bytes from member root, as int32 words (the collectives move no bytes). */
static int bcast_bytes(areal_coll *c, char *buf, size_t len, int root, areal_error *err) {
    size_t words = (len + 3) / 4;
    int32_t *w = calloc(words ? words : 1, sizeof *w);
    if (w == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "tp: no memory for %zu bytes", len);
    memcpy(w, buf, len);
    int rc = areal_coll_broadcast(c, w, words, AREAL_DT_I32, root, err);
    if (rc == AREAL_OK)
        memcpy(buf, w, len);
    free(w);
    return rc;
}

static int32_t *grow(int32_t **buf, size_t *cap, size_t n) {
    if (n > *cap) {
        int32_t *b = realloc(*buf, sizeof(int32_t) * n);
        if (b == NULL)
            return NULL;
        *buf = b;
        *cap = n;
    }
    return *buf;
}

int eng_tp_step(areal_engine *e, int nb, areal_error *err) {
    int T = e->cu[nb];
    size_t tab = 0;
    for (int i = 0; i < nb; i++)
        tab += (size_t)e->pseq[i].n_table;
    size_t n = (size_t)T + (size_t)nb + 1 + 2 * (size_t)nb + tab;
    int32_t *p = grow(&e->tp_buf, &e->tp_cap, n);
    if (p == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "tp step: no memory for %zu ints", n);
    memcpy(p, e->step_tok, sizeof(int32_t) * (size_t)T);
    memcpy(p + T, e->cu, sizeof(int32_t) * ((size_t)nb + 1));
    int32_t *start = p + T + nb + 1, *ntab = start + nb, *t = ntab + nb;
    for (int i = 0; i < nb; i++) {
        start[i] = e->pseq[i].start;
        ntab[i] = e->pseq[i].n_table;
        memcpy(t, e->pseq[i].table, sizeof(int32_t) * (size_t)ntab[i]);
        t += ntab[i];
    }
    int rc = send_hdr(e->tp, OP_STEP, T, nb, (int)tab, err);
    if (rc == AREAL_OK)
        rc = areal_coll_broadcast(e->tp, p, n, AREAL_DT_I32, 0, err);
    return rc;
}

/*
 * The load vote, the same on every rank: each sets its own flag, one
 * all-reduce, then every failed rank broadcasts its message (the first one
 * lands in err). Returns AREAL_OK when nobody failed, AREAL_EINVAL naming the
 * first failed rank (a bad directory), or the collective's error.
 */
static int vote(areal_coll *c, int self_rc, const areal_error *self_err, areal_error *err) {
    int n = areal_coll_size(c), me = areal_coll_rank(c);
    float *f = calloc((size_t)n, sizeof *f);
    if (f == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "tp load: no memory");
    f[me] = self_rc != AREAL_OK ? 1.0f : 0.0f;
    int rc = areal_coll_all_reduce(c, f, (size_t)n, AREAL_DT_F32, AREAL_SUM, err);
    int bad = -1;
    for (int r = 0; rc == AREAL_OK && r < n; r++) {
        if (f[r] == 0)
            continue;
        char msg[MSG] = {0};
        if (r == me)
            snprintf(msg, sizeof msg, "%.500s", self_err->msg);
        rc = bcast_bytes(c, msg, MSG, r, err);
        msg[MSG - 1] = '\0';
        if (rc == AREAL_OK && bad < 0) {
            bad = r;
            areal_error_set(err, AREAL_EINVAL, -1, "tp rank %d of %d could not load its shard: %s",
                            r, n, msg);
        }
    }
    free(f);
    return rc != AREAL_OK ? rc : bad >= 0 ? AREAL_EINVAL : AREAL_OK;
}

int eng_tp_load(areal_engine *e, const char *dir, int self_rc, areal_error *err) {
    size_t len = strlen(dir) + 1;
    char *buf = malloc(len);
    if (buf == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "tp load: no memory");
    memcpy(buf, dir, len);
    int rc = send_hdr(e->tp, OP_LOAD, (int)len, 0, 0, err);
    if (rc == AREAL_OK)
        rc = bcast_bytes(e->tp, buf, len, 0, err);
    free(buf);
    if (rc != AREAL_OK)
        return rc;
    areal_error none;
    areal_error_clear(&none);
    return vote(e->tp, self_rc, &none, err);
}

void eng_tp_fail(areal_engine *e, const areal_error *why) {
    pthread_mutex_lock(&e->mu);
    if (!e->tp_failed) {
        e->tp_failed = true;
        snprintf(e->tp_why, sizeof e->tp_why, "tensor-parallel group %.60s failed: %.500s",
                 areal_coll_name(e->tp), why->msg);
    }
    e->draining = true; /* submissions now get ESTOPPED */
    for (eng_req *q = e->live_head; q != NULL; q = q->next)
        q->abort_flag = true;
    e->any_flag = e->live_head != NULL;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
}

bool areal_engine_failed(areal_engine *e, char *why, size_t cap) {
    pthread_mutex_lock(&e->mu);
    bool f = e->tp_failed;
    if (why != NULL && cap > 0)
        snprintf(why, cap, "%s", f ? e->tp_why : "");
    pthread_mutex_unlock(&e->mu);
    return f;
}

/* ---- the follower ------------------------------------------------------------------ */

typedef struct follower {
    areal_coll *c;
    areal_model *m;
    areal_pool *pool;
    areal_paged_kv kv;
    int32_t *buf;
    size_t cap;
    areal_paged_seq *seqs;
    int n_seqs_cap;
} follower;

static int f_step(follower *f, const int32_t *h, areal_error *err) {
    int T = h[1], n = h[2], tab = h[3];
    if (T < 1 || n < 1 || tab < 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "tp follower: bad step header %d %d %d", T, n,
                               tab);
    size_t len = (size_t)T + (size_t)n + 1 + 2 * (size_t)n + (size_t)tab;
    int32_t *p = grow(&f->buf, &f->cap, len);
    if (p == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "tp follower: no memory for a step");
    int rc = areal_coll_broadcast(f->c, p, len, AREAL_DT_I32, 0, err);
    if (rc != AREAL_OK)
        return rc;
    if (n > f->n_seqs_cap) {
        areal_paged_seq *s = realloc(f->seqs, sizeof *s * (size_t)n);
        if (s == NULL)
            return areal_error_set(err, AREAL_ENOMEM, -1, "tp follower: no memory");
        f->seqs = s;
        f->n_seqs_cap = n;
    }
    const int32_t *cu = p + T, *start = cu + n + 1, *ntab = start + n, *t = ntab + n;
    for (int i = 0; i < n; i++) {
        f->seqs[i] = (areal_paged_seq){t, ntab[i], start[i]};
        t += ntab[i];
    }
    return areal_model_step_paged(f->m, &f->kv, p, cu, f->seqs, n, NULL, 0, NULL, err);
}

static int f_load(follower *f, const int32_t *h, areal_error *err) {
    int len = h[1];
    if (len < 1 || len > 1 << 20)
        return areal_error_set(err, AREAL_EINVAL, -1, "tp follower: bad load header %d", len);
    char *dir = malloc((size_t)len);
    if (dir == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "tp follower: no memory");
    int rc = bcast_bytes(f->c, dir, (size_t)len, 0, err);
    if (rc != AREAL_OK) {
        free(dir);
        return rc;
    }
    dir[len - 1] = '\0';
    areal_model nm;
    areal_error le;
    areal_error_clear(&le);
    int lrc = areal_model_load_shard(&nm, dir, &f->m->shard, f->pool, &le);
    free(dir);
    if (lrc == AREAL_OK && (nm.n_params != f->m->n_params || nm.n_specs != f->m->n_specs)) {
        areal_model_free(&nm);
        lrc = areal_error_set(&le, AREAL_EINVAL, -1,
                              "the new shard has %zu parameters in %zu tensors, the served one "
                              "%zu in %zu: another architecture",
                              nm.n_params, nm.n_specs, f->m->n_params, f->m->n_specs);
    }
    areal_error verr;
    rc = vote(f->c, lrc, &le, &verr);
    if (rc == AREAL_OK) { /* everyone loaded: switch with them */
        areal_model_free(f->m);
        *f->m = nm;
        areal_error pe; /* the packed decode copy, as the leader's (without memory: unpacked) */
        (void)areal_model_infer_pack(f->m, &pe);
        areal_model_set_reduce(f->m, eng_tp_reduce, f->c);
        return AREAL_OK;
    }
    if (lrc == AREAL_OK)
        areal_model_free(&nm);
    if (rc == AREAL_EINVAL) /* someone failed to load: everyone keeps the old weights */
        return AREAL_OK;
    *err = verr;
    return rc;
}

int areal_engine_follow(areal_model *model, const areal_engine_follow_config *cfg,
                        areal_error *err) {
    areal_coll *c = cfg->tp_group;
    if (c == NULL || areal_coll_rank(c) < 1 || model->shard.tp != areal_coll_size(c) ||
        model->shard.tp_rank != areal_coll_rank(c))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "tp follower: the model is shard %d of tp %d but the group has "
                               "%d members and this is member %d (a follower is member >= 1 and "
                               "holds the shard of its rank)",
                               model->shard.tp_rank, model->shard.tp, c ? areal_coll_size(c) : 0,
                               c ? areal_coll_rank(c) : -1);
    if (!areal_paged_shard_ok(&model->cfg, &model->shard, err))
        return AREAL_EINVAL;
    follower f = {.c = c, .m = model};
    int rc = AREAL_OK;
    if (cfg->threads > 1 && (rc = areal_pool_create(cfg->threads, &f.pool, err)) != AREAL_OK)
        return rc;
    areal_pool *old_pool = model->pool;
    model->pool = f.pool;
    areal_error pe; /* the packed decode copy, as the leader's (same numbers, faster) */
    if (model->infer_pack == NULL)
        (void)areal_model_infer_pack(model, &pe);
    areal_model_set_reduce(model, eng_tp_reduce, c);
    bool have_kv = false;
    for (;;) {
        int32_t h[HDR];
        if ((rc = areal_coll_broadcast(c, h, HDR, AREAL_DT_I32, 0, err)) != AREAL_OK)
            break;
        if (h[0] == OP_STOP)
            break;
        if (h[0] == OP_PING)
            continue;
        if (h[0] == OP_HELLO) {
            if (have_kv)
                areal_paged_kv_free(&f.kv);
            rc = areal_paged_kv_init_local(&f.kv, model, h[1], h[2], err);
            have_kv = rc == AREAL_OK;
        } else if (h[0] == OP_STEP && have_kv) {
            rc = f_step(&f, h, err);
        } else if (h[0] == OP_LOAD) {
            rc = f_load(&f, h, err);
        } else {
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "tp follower: unexpected message %d from the leader", h[0]);
        }
        if (rc != AREAL_OK)
            break; /* the leader meets the failure in its next collective */
    }
    if (have_kv)
        areal_paged_kv_free(&f.kv);
    free(f.buf);
    free(f.seqs);
    model->pool = old_pool;
    areal_pool_destroy(f.pool);
    return rc;
}
