/*
 * ep_dispatch.c - MoE token dispatch and combine by all-to-all(v) over the
 * ep group (see ep.h): the slots of this rank's token part go to their
 * experts' ranks, run there (expert tensor parallel over etp), and come back;
 * the backward moves their gradients the same way.
 *
 * Layout of one exchange: the model's slots are sorted by expert (token
 * order within one), so the slots of this rank's token part are one run
 * [lo[e], hi[e]) per expert, and the runs of peer p's experts are adjacent
 * once packed: one all-to-allv block per peer. The receiver gets, from each
 * peer, its rows for each local expert in expert order; it regroups them by
 * expert (all peers' rows of expert 0, then 1, ...) so each expert runs as
 * one matrix product, and undoes that order before sending back.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "areal/parallel/ep.h"
#include "areal/parallel/groups.h"

/* What one layer's forward keeps for its backward (the dispatcher's saved state). */
typedef struct ep_saved {
    int P, ne, E, H, I;
    size_t TK;
    int32_t *lo, *hi;       /* [E] this part's slot run of each expert */
    int64_t *rcnt;          /* [P * ne] rows from peer p for local expert j */
    int *counts;            /* [ne] rows of each local expert */
    size_t *eo;             /* [ne + 1] scratch of regroup */
    size_t S, R;            /* rows sent, rows received */
    float *xin, *g, *u, *h; /* [R, H], [R, I] x3 in expert order */
} ep_saved;

static void saved_free(void *p) {
    ep_saved *s = p;
    if (s == NULL)
        return;
    free(s->lo);
    free(s->rcnt);
    free(s->counts);
    free(s->eo);
    free(s->xin);
    free(s);
}

/* Block offsets (in floats) of the send side (per peer, from lo/hi) and the receive side. */
typedef struct ep_plan {
    size_t *sc, *sd, *rc, *rd; /* [P] each */
} ep_plan;

static int plan_make(const ep_saved *s, ep_plan *p) {
    p->sc = calloc((size_t)s->P * 4, sizeof(size_t));
    if (p->sc == NULL)
        return -1;
    p->sd = p->sc + s->P, p->rc = p->sd + s->P, p->rd = p->rc + s->P;
    size_t so = 0, ro = 0;
    for (int q = 0; q < s->P; q++) {
        size_t a = 0, b = 0;
        for (int j = 0; j < s->ne; j++) {
            int e = q * s->ne + j;
            a += (size_t)(s->hi[e] - s->lo[e]);
            b += (size_t)s->rcnt[(size_t)q * s->ne + j];
        }
        p->sc[q] = a * s->H, p->sd[q] = so, so += a * s->H;
        p->rc[q] = b * s->H, p->rd[q] = ro, ro += b * s->H;
    }
    return 0;
}

/* Packs slot rows [lo[e], hi[e]) of src [TK, H] in expert order into dst [S, H]. */
static void pack(const ep_saved *s, const float *src, float *dst) {
    size_t o = 0, H = (size_t)s->H;
    for (int e = 0; e < s->E; e++) {
        size_t n = (size_t)(s->hi[e] - s->lo[e]);
        memcpy(dst + o * H, src + (size_t)s->lo[e] * H, sizeof(float) * n * H);
        o += n;
    }
}

/* The inverse of pack into dst [TK, H]; every slot outside the runs is zeroed. */
static void unpack(const ep_saved *s, const float *src, float *dst) {
    size_t o = 0, H = (size_t)s->H;
    memset(dst, 0, sizeof(float) * s->TK * H);
    for (int e = 0; e < s->E; e++) {
        size_t n = (size_t)(s->hi[e] - s->lo[e]);
        memcpy(dst + (size_t)s->lo[e] * H, src + o * H, sizeof(float) * n * H);
        o += n;
    }
}

/* Received (peer, expert) order <-> expert order: to_expert 1 regroups src into dst, 0 undoes it.
 */
static void regroup(const ep_saved *s, const float *src, float *dst, int to_expert) {
    size_t H = (size_t)s->H, pe = 0, *eo = s->eo; /* pe: offset in (peer, expert) order */
    eo[0] = 0;
    for (int j = 0; j < s->ne; j++)
        eo[j + 1] = eo[j] + (size_t)s->counts[j];
    for (int q = 0; q < s->P; q++)
        for (int j = 0; j < s->ne; j++) {
            size_t n = (size_t)s->rcnt[(size_t)q * s->ne + j];
            const float *a = to_expert ? src + pe * H : src + eo[j] * H;
            float *b = to_expert ? dst + eo[j] * H : dst + pe * H;
            memcpy(b, a, sizeof(float) * n * H);
            eo[j] += n, pe += n;
        }
}

static int a2av(areal_coll *ep, const float *in, const size_t *sc, const size_t *sd, float *out,
                const size_t *rc, const size_t *rd, areal_error *err) {
    return areal_coll_all_to_allv(ep, in, sc, sd, out, rc, rd, AREAL_DT_F32, err);
}

/* The tp sum of the parts (n_parts > 1): each slot written by exactly one rank of the tp group. */
static int sum_parts(areal_par_ep *d, float *buf, size_t n, areal_error *err) {
    if (d->n_parts < 2)
        return AREAL_OK;
    if (!d->contrib)
        memset(buf, 0, sizeof(float) * n);
    return areal_coll_all_reduce(d->g.tp, buf, n, AREAL_DT_F32, AREAL_SUM, err);
}

static int oom(areal_error *err, int layer) {
    return areal_error_set(err, AREAL_ENOMEM, -1, "layer %d: out of memory in the MoE dispatch",
                           layer);
}

/* This part's run of each expert, and the rows each peer sends for each local expert. */
static int route_counts(areal_par_ep *d, ep_saved *s, int T, const int32_t *slot_tok,
                        const int32_t *off, areal_error *err) {
    int t0 = T * d->part / d->n_parts, t1 = T * (d->part + 1) / d->n_parts;
    int64_t *scnt = malloc(sizeof(int64_t) * (size_t)s->E);
    if (scnt == NULL)
        return oom(err, -1);
    for (int e = 0; e < s->E; e++) {
        int a = off[e], b = off[e + 1];
        while (a < b && slot_tok[a] < t0)
            a++;
        int c = a;
        while (c < b && slot_tok[c] < t1)
            c++;
        s->lo[e] = a, s->hi[e] = c, scnt[e] = c - a;
        s->S += (size_t)(c - a);
    }
    int rc = s->P > 1
                 ? areal_coll_all_to_all(d->g.ep, scnt, s->rcnt, (size_t)s->ne, AREAL_DT_I64, err)
                 : (memcpy(s->rcnt, scnt, sizeof(int64_t) * (size_t)s->E), AREAL_OK);
    free(scnt);
    return rc;
}

static int disp_fwd(void *ctx, const areal_model *m, int layer, int T, const int32_t *slot_tok,
                    const int32_t *off, const float *xg, float *y, void **saved, areal_error *err) {
    areal_par_ep *d = ctx;
    int e0;
    ep_saved *s = calloc(1, sizeof *s);
    *saved = s;
    if (s == NULL)
        return oom(err, layer);
    s->P = areal_par_size(d->g.ep), s->E = m->cfg.num_experts, s->H = m->cfg.hidden_size;
    s->TK = (size_t)T * m->cfg.num_experts_per_tok;
    areal_moe_local(m, &e0, &s->ne, &s->I);
    s->lo = malloc(sizeof(int32_t) * 2 * (size_t)s->E);
    s->rcnt = malloc(sizeof(int64_t) * (size_t)s->P * s->ne);
    s->counts = calloc((size_t)s->ne, sizeof(int));
    s->eo = calloc((size_t)s->ne + 1, sizeof(size_t));
    if (s->lo == NULL || s->rcnt == NULL || s->counts == NULL || s->eo == NULL)
        return oom(err, layer);
    s->hi = s->lo + s->E;
    int rc = route_counts(d, s, T, slot_tok, off, err);
    if (rc != AREAL_OK)
        return rc;
    for (int q = 0; q < s->P; q++)
        for (int j = 0; j < s->ne; j++)
            s->counts[j] += (int)s->rcnt[(size_t)q * s->ne + j];
    for (int j = 0; j < s->ne; j++) {
        s->R += (size_t)s->counts[j];
        d->empty += s->counts[j] == 0;
        if (d->load != NULL)
            d->load[(size_t)layer * s->E + e0 + j] += s->counts[j];
    }
    d->rows_in += (long)s->R;
    size_t H = (size_t)s->H, I = (size_t)s->I, big = s->R > s->S ? s->R : s->S;
    /* xin, g, u, h kept; the send, receive and output buffers are scratch */
    s->xin = malloc(sizeof(float) * (s->R * (H + 3 * I) + 1));
    float *scr = malloc(sizeof(float) * (big * H * 2 + s->R * H + 1));
    ep_plan p = {0};
    if (s->xin == NULL || scr == NULL || plan_make(s, &p) != 0) {
        free(scr);
        return oom(err, layer);
    }
    s->g = s->xin + s->R * H, s->u = s->g + s->R * I, s->h = s->u + s->R * I;
    float *sbuf = scr, *rbuf = scr + big * H, *yl = rbuf + big * H;
    pack(s, xg, sbuf);
    rc = a2av(d->g.ep, sbuf, p.sc, p.sd, rbuf, p.rc, p.rd, err);
    if (rc == AREAL_OK) {
        regroup(s, rbuf, s->xin, 1);
        areal_moe_experts_fwd(m, layer, s->xin, s->counts, s->g, s->u, s->h, yl);
        if (areal_par_size(d->g.etp) > 1) /* each etp rank holds a slice's partial output */
            rc = areal_coll_all_reduce(d->g.etp, yl, s->R * H, AREAL_DT_F32, AREAL_SUM, err);
    }
    if (rc == AREAL_OK) {
        regroup(s, yl, rbuf, 0);
        rc = a2av(d->g.ep, rbuf, p.rc, p.rd, sbuf, p.sc, p.sd, err); /* back: the reverse plan */
    }
    if (rc == AREAL_OK) {
        unpack(s, sbuf, y);
        rc = sum_parts(d, y, s->TK * H, err);
    }
    free(p.sc);
    free(scr);
    return rc;
}

static int disp_bwd(void *ctx, const areal_model *m, int layer, void *saved, const float *dy,
                    float *dxg, areal_error *err) {
    areal_par_ep *d = ctx;
    ep_saved *s = saved;
    if (s == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "layer %d: MoE backward without its dispatch forward", layer);
    size_t H = (size_t)s->H, big = s->R > s->S ? s->R : s->S;
    float *scr = malloc(sizeof(float) * (big * H * 2 + s->R * H * 2 + 1));
    ep_plan p = {0};
    if (scr == NULL || plan_make(s, &p) != 0) {
        free(scr);
        return oom(err, layer);
    }
    float *sbuf = scr, *rbuf = scr + big * H, *dyin = rbuf + big * H, *dxin = dyin + s->R * H;
    pack(s, dy, sbuf);
    int rc = a2av(d->g.ep, sbuf, p.sc, p.sd, rbuf, p.rc, p.rd, err);
    if (rc == AREAL_OK) {
        regroup(s, rbuf, dyin, 1);
        rc = areal_moe_experts_bwd(m, layer, s->xin, s->counts, s->g, s->u, s->h, dyin, dxin, err);
    }
    if (rc == AREAL_OK && areal_par_size(d->g.etp) > 1)
        rc = areal_coll_all_reduce(d->g.etp, dxin, s->R * H, AREAL_DT_F32, AREAL_SUM, err);
    if (rc == AREAL_OK) {
        regroup(s, dxin, rbuf, 0);
        rc = a2av(d->g.ep, rbuf, p.rc, p.rd, sbuf, p.sc, p.sd, err);
    }
    if (rc == AREAL_OK) {
        unpack(s, sbuf, dxg);
        rc = sum_parts(d, dxg, s->TK * H, err);
    }
    free(p.sc);
    free(scr);
    return rc;
}

static const areal_moe_dispatch EP_DISPATCH = {
    .fwd = disp_fwd, .bwd = disp_bwd, .saved_free = saved_free};

areal_par_ep_groups areal_par_ep_groups_of(areal_coll *const gs[AREAL_GROUP_KIND_COUNT]) {
    areal_par_ep_groups g = {
        .ep = gs[AREAL_GROUP_EP],
        .etp = gs[AREAL_GROUP_ETP],
        .edp = gs[AREAL_GROUP_EDP],
        .tp = gs[AREAL_GROUP_TP],
        .dp = gs[AREAL_GROUP_DP_CP] != NULL ? gs[AREAL_GROUP_DP_CP] : gs[AREAL_GROUP_DP],
        .pp = gs[AREAL_GROUP_PP],
        .tp_dp_cp = gs[AREAL_GROUP_TP_DP_CP],
    };
    return g;
}

int areal_par_ep_init(areal_par_ep *d, const areal_par_ep_groups *g, areal_error *err) {
    memset(d, 0, sizeof *d);
    int tp = areal_par_size(g->tp), etp = areal_par_size(g->etp), tr = areal_par_rank(g->tp);
    if (tp % etp != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "expert parallel: etp %d must divide tp %d (Megatron's expert "
                               "layout); choose etp 1 or etp = tp",
                               etp, tp);
    d->g = *g;
    d->n_parts = tp / etp;
    d->part = tr / etp;
    d->contrib = areal_par_rank(g->etp) == 0;
    return AREAL_OK;
}

const areal_moe_dispatch *areal_par_ep_dispatch_ops(void) {
    return &EP_DISPATCH;
}

void areal_par_ep_bind(areal_model *m, areal_par_ep *d) {
    areal_model_set_moe_dispatch(m, &EP_DISPATCH, d);
}

int areal_par_ep_shard_of(const areal_model_config *cfg, const areal_par_ep_groups *g,
                          areal_model_shard *out, areal_error *err) {
    areal_par_groups pg = {.tp = g->tp, .pp = g->pp, .ep = g->ep};
    int rc = areal_par_shard_of(cfg, &pg, out, err);
    if (rc != AREAL_OK)
        return rc;
    int tp = areal_par_size(g->tp), etp = areal_par_size(g->etp);
    if (tp % etp != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "shard: etp %d must divide tp %d; choose etp 1 or etp = tp", etp,
                               tp);
    out->etp = etp, out->etp_rank = areal_par_rank(g->etp), out->ep_a2a = true;
    return areal_model_shard_check(cfg, out, err);
}
