/*
 * fsdp.c - fully sharded data parallelism: per-unit ranges, the layer by
 * layer forward and backward with gathers and reduce-scatters, the sharded
 * optimizer step (see fsdp.h).
 */
#include "areal/parallel/fsdp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/shard.h"
#include "areal/parallel/groups.h"
#include "areal/parallel/reduce.h"

struct areal_par_fsdp {
    areal_model_config cfg;
    areal_coll *dp;
    int d, r, n_layers, n_units; /* unit 0: root; unit 1 + l: layer l */
    areal_pool *pool;
    areal_tensor_spec *whole; /* the HF tensors, in buffer order */
    size_t n_whole;
    int *t_unit;   /* [n_whole] the unit of tensor i */
    size_t *t_off; /* [n_whole] its first float in the unit's flat */
    size_t *u_n;   /* [n_units] floats of the unit's flat (unpadded) */
    size_t *u_len; /* [n_units] the rank's range: ceil(u_n / d) */
    size_t *u_off; /* [n_units] the range's first float in p / g / adam */
    size_t n;      /* the rank's floats: sum of u_len */
    float *p, *g;  /* [n] parameters and summed gradients of the ranges */
    areal_adamw adam;
    int64_t live_gathered, live_acts; /* bytes live now, beyond the persistent ranges */
    areal_par_fsdp_mem mem;
};

static size_t numel(const areal_tensor_spec *t) {
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}

static void count(areal_par_fsdp *f, int64_t gathered, int64_t acts) {
    f->live_gathered += gathered, f->live_acts += acts;
    int64_t live = f->mem.persistent + f->live_gathered + f->live_acts;
    if (live > f->mem.peak)
        f->mem.peak = live;
    if (f->live_gathered > f->mem.peak_gathered)
        f->mem.peak_gathered = f->live_gathered;
    if (f->live_acts > f->mem.peak_acts)
        f->mem.peak_acts = f->live_acts;
}

/* The unit of an HF tensor name: 1 + its layer, or 0 (root). */
static int unit_of(const char *name, int n_layers) {
    int l = -1;
    if (sscanf(name, "model.layers.%d.", &l) == 1 && l >= 0 && l < n_layers)
        return 1 + l;
    return 0;
}

static int find_whole(const areal_par_fsdp *f, const char *name) {
    for (size_t i = 0; i < f->n_whole; i++)
        if (strcmp(f->whole[i].name, name) == 0)
            return (int)i;
    return -1;
}

void areal_par_fsdp_free(areal_par_fsdp *f) {
    if (f == NULL)
        return;
    free(f->whole), free(f->t_unit), free(f->t_off);
    free(f->u_n), free(f->u_len), free(f->u_off);
    free(f->p), free(f->g);
    areal_adamw_free(&f->adam);
    free(f);
}

int areal_par_fsdp_create(const areal_model_config *cfg, areal_coll *dp, areal_pool *pool,
                          areal_par_fsdp **out, areal_error *err) {
    *out = NULL;
    areal_par_fsdp *f = calloc(1, sizeof *f);
    if (f == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "fsdp: out of memory");
    f->cfg = *cfg, f->dp = dp, f->pool = pool;
    f->d = areal_par_size(dp), f->r = areal_par_rank(dp);
    f->n_layers = cfg->num_layers, f->n_units = 1 + cfg->num_layers;
    int rc = areal_model_expected_tensors(cfg, &f->whole, &f->n_whole, err);
    if (rc != AREAL_OK) {
        free(f);
        return rc;
    }
    f->t_unit = calloc(f->n_whole ? f->n_whole : 1, sizeof *f->t_unit);
    f->t_off = calloc(f->n_whole ? f->n_whole : 1, sizeof *f->t_off);
    f->u_n = calloc((size_t)f->n_units, sizeof *f->u_n);
    f->u_len = calloc((size_t)f->n_units, sizeof *f->u_len);
    f->u_off = calloc((size_t)f->n_units, sizeof *f->u_off);
    if (f->t_unit == NULL || f->t_off == NULL || f->u_n == NULL || f->u_len == NULL ||
        f->u_off == NULL) {
        areal_par_fsdp_free(f);
        return areal_error_set(err, AREAL_ENOMEM, -1, "fsdp: out of memory");
    }
    for (size_t i = 0; i < f->n_whole; i++) {
        int u = unit_of(f->whole[i].name, f->n_layers);
        f->t_unit[i] = u;
        f->t_off[i] = f->u_n[u];
        f->u_n[u] += numel(&f->whole[i]);
    }
    for (int u = 0; u < f->n_units; u++) {
        f->u_len[u] = (f->u_n[u] + (size_t)f->d - 1) / (size_t)f->d;
        f->u_off[u] = f->n;
        f->n += f->u_len[u];
    }
    f->p = calloc(f->n ? f->n : 1, sizeof(float));
    f->g = calloc(f->n ? f->n : 1, sizeof(float));
    rc = f->p == NULL || f->g == NULL
             ? areal_error_set(err, AREAL_ENOMEM, -1, "fsdp: out of memory for %zu floats", f->n)
             : areal_adamw_init(&f->adam, f->n ? f->n : 1, err);
    if (rc != AREAL_OK) {
        areal_par_fsdp_free(f);
        return rc;
    }
    f->adam.n = f->n;
    f->mem.persistent = (int64_t)f->n * 16;
    f->mem.peak = f->mem.persistent;
    *out = f;
    return AREAL_OK;
}

int areal_par_fsdp_locate(const areal_par_fsdp *f, const char *name, size_t *a, size_t *b,
                          size_t *at, areal_error *err) {
    int i = find_whole(f, name);
    if (i < 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "fsdp: the model has no tensor %s", name);
    int u = f->t_unit[i];
    size_t lo = (size_t)f->r * f->u_len[u], hi = lo + f->u_len[u];
    size_t t0 = f->t_off[i], t1 = t0 + numel(&f->whole[i]);
    size_t x = t0 > lo ? t0 : lo, y = t1 < hi ? t1 : hi;
    if (y < x)
        y = x;
    *a = x - t0, *b = y - t0, *at = f->u_off[u] + (x - lo);
    return AREAL_OK;
}

const areal_tensor_spec *areal_par_fsdp_tensors(const areal_par_fsdp *f, size_t *n) {
    *n = f->n_whole;
    return f->whole;
}

int areal_par_fsdp_set_tensor(areal_par_fsdp *f, const char *name, int which, const float *values,
                              areal_error *err) {
    if (which != 0 && which != 2 && which != 3)
        return areal_error_set(err, AREAL_EINVAL, -1, "fsdp: which %d is not 0, 2 or 3", which);
    size_t a, b, at;
    int rc = areal_par_fsdp_locate(f, name, &a, &b, &at, err);
    if (rc != AREAL_OK)
        return rc;
    float *dst = which == 0 ? f->p : which == 2 ? f->adam.m : f->adam.v;
    memcpy(dst + at, values + a, sizeof(float) * (b - a));
    return AREAL_OK;
}

/* Unit u's padded flat [u_len * d] of src (p, g, adam m or v) into full. */
static int gather(areal_par_fsdp *f, int u, const float *src, float *full, areal_error *err) {
    if (f->d == 1) {
        memcpy(full, src + f->u_off[u], sizeof(float) * f->u_len[u]);
        return AREAL_OK;
    }
    return areal_coll_all_gather(f->dp, src + f->u_off[u], full, f->u_len[u], AREAL_DT_F32, err);
}

/* full [u_len * d] summed over dp, this rank's range added into g. scratch: [u_len]. */
static int scatter_add(areal_par_fsdp *f, int u, const float *full, float *scratch,
                       areal_error *err) {
    float *dst = f->g + f->u_off[u];
    size_t n = f->u_len[u];
    if (f->d == 1) {
        for (size_t k = 0; k < n; k++)
            dst[k] += full[k];
        return AREAL_OK;
    }
    int rc = areal_coll_reduce_scatter(f->dp, full, scratch, n, AREAL_DT_F32, AREAL_SUM, err);
    for (size_t k = 0; rc == AREAL_OK && k < n; k++)
        dst[k] += scratch[k];
    return rc;
}

int areal_par_fsdp_get_tensor(areal_par_fsdp *f, const char *name, int which, float *out,
                              areal_error *err) {
    int i = find_whole(f, name);
    if (i < 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "fsdp: the model has no tensor %s", name);
    if (which < 0 || which > 3)
        return areal_error_set(err, AREAL_EINVAL, -1, "fsdp: which %d is not 0..3", which);
    const float *src = which == 0 ? f->p : which == 1 ? f->g : which == 2 ? f->adam.m : f->adam.v;
    int u = f->t_unit[i];
    float *full = malloc(sizeof(float) * f->u_len[u] * (size_t)f->d + 1);
    if (full == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "fsdp: out of memory gathering %s", name);
    int rc = gather(f, u, src, full, err);
    if (rc == AREAL_OK)
        memcpy(out, full + f->t_off[i], sizeof(float) * numel(&f->whole[i]));
    free(full);
    return rc;
}

/*
 * The step's working buffers: the root unit whole (params and gradient
 * sum), one layer unit's gathered params and gradient, the stage model.
 */
typedef struct step {
    areal_par_fsdp *f;
    float *root_p, *root_g; /* [u_len[0] * d] */
    float *lay_p, *lay_g;   /* [max layer u_len * d] */
    float *scratch;         /* [max u_len] */
    size_t root_pad, lay_pad;
} step;

static void stage_release(step *s, int l, areal_model *m);

/*
 * Stage model of layer l, its parameters copied from the root and the
 * gathered layer unit. On failure nothing is left allocated.
 */
static int stage_model(step *s, int l, areal_model *m, areal_error *err) {
    areal_par_fsdp *f = s->f;
    areal_model_shard sh;
    int rc = areal_model_shard_stage(&f->cfg, l, f->n_layers, &sh, err);
    if (rc == AREAL_OK)
        rc = gather(f, 1 + l, f->p, s->lay_p, err);
    if (rc == AREAL_OK) {
        count(f, (int64_t)(s->f->u_len[1 + l] * (size_t)f->d) * 4, 0);
        rc = areal_model_init_shard(m, &f->cfg, &sh, f->pool, err);
        if (rc != AREAL_OK)
            count(f, -(int64_t)(s->f->u_len[1 + l] * (size_t)f->d) * 4, 0);
    }
    if (rc != AREAL_OK)
        return rc;
    count(f, (int64_t)m->n_params * 8, 0);
    for (size_t j = 0; j < m->n_specs; j++) {
        int i = find_whole(f, m->specs[j].name);
        if (i < 0) { /* a shard's list is a subset of the whole list (shard.c) */
            rc = areal_error_set(err, AREAL_EINVAL, -1, "fsdp: stage tensor %s not in the model",
                                 m->specs[j].name);
            break;
        }
        const float *src = (f->t_unit[i] == 0 ? s->root_p : s->lay_p) + f->t_off[i];
        memcpy(m->params + m->offset[j], src, sizeof(float) * numel(&m->specs[j]));
    }
    if (rc != AREAL_OK)
        stage_release(s, l, m);
    return rc;
}

/* Frees the stage model of layer l and uncounts it with the gathered unit. */
static void stage_release(step *s, int l, areal_model *m) {
    count(s->f, -(int64_t)m->n_params * 8 - (int64_t)(s->f->u_len[1 + l] * (size_t)s->f->d) * 4, 0);
    areal_model_free(m);
}

/* Layer l's backward: gradients of its unit reduce-scattered, the root's accumulated. */
static int layer_backward(step *s, int l, const areal_acts *a, const float *d_out, float *dx,
                          areal_error *err) {
    areal_par_fsdp *f = s->f;
    areal_model m = {0};
    int rc = stage_model(s, l, &m, err);
    if (rc != AREAL_OK)
        return rc;
    size_t pad = f->u_len[1 + l] * (size_t)f->d;
    count(f, (int64_t)pad * 4, 0);
    memset(s->lay_g, 0, sizeof(float) * pad);
    rc = areal_model_backward_stage(&m, a, d_out, dx, err);
    for (size_t j = 0; rc == AREAL_OK && j < m.n_specs; j++) {
        int i = find_whole(f, m.specs[j].name);
        float *dst = (f->t_unit[i] == 0 ? s->root_g : s->lay_g) + f->t_off[i];
        const float *src = m.grads + m.offset[j];
        for (size_t k = 0, n = numel(&m.specs[j]); k < n; k++)
            dst[k] += src[k];
    }
    if (rc == AREAL_OK)
        rc = scatter_add(f, 1 + l, s->lay_g, s->scratch, err);
    count(f, -(int64_t)pad * 4, 0);
    stage_release(s, l, &m);
    return rc;
}

/* One micro-batch forward then backward, layer by layer. */
static int micro_batch(step *s, int mb, const areal_batch *b, areal_par_loss_fn loss_fn,
                       void *loss_ctx, double *loss, areal_error *err) {
    areal_par_fsdp *f = s->f;
    int L = f->n_layers, rc = AREAL_OK, done = 0;
    areal_acts *acts = calloc((size_t)L, sizeof *acts);
    int64_t *acts_bytes = calloc((size_t)L, sizeof *acts_bytes);
    size_t TH = (size_t)b->n_tokens * (size_t)f->cfg.hidden_size;
    float *dx = malloc(sizeof(float) * TH + 1), *dnext = malloc(sizeof(float) * TH + 1);
    float *dlogits = NULL;
    if (acts == NULL || acts_bytes == NULL || dx == NULL || dnext == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "fsdp: out of memory for a micro-batch");
    for (int l = 0; rc == AREAL_OK && l < L; l++) {
        areal_model m = {0};
        rc = stage_model(s, l, &m, err);
        if (rc != AREAL_OK)
            break;
        rc = areal_model_forward_stage(&m, b, l == 0 ? NULL : acts[l - 1].hidden, &acts[l], err);
        stage_release(s, l, &m);
        if (rc != AREAL_OK)
            break;
        done = l + 1;
        acts_bytes[l] = (int64_t)areal_acts_floats(&acts[l]) * 4;
        count(f, 0, acts_bytes[l]);
    }
    if (rc == AREAL_OK) {
        const areal_acts *last = &acts[L - 1];
        dlogits = calloc((size_t)last->T * (size_t)last->V + 1, sizeof(float));
        rc = dlogits == NULL
                 ? areal_error_set(err, AREAL_ENOMEM, -1, "fsdp: out of memory for dlogits")
                 : loss_fn(loss_ctx, mb, last->logits, last->T, last->V, dlogits, loss, err);
    }
    const float *d_out = dlogits;
    for (int l = L - 1; rc == AREAL_OK && l >= 0; l--) {
        rc = layer_backward(s, l, &acts[l], d_out, l > 0 ? dx : NULL, err);
        float *t = dx;
        dx = dnext, dnext = t;
        d_out = dnext;
    }
    for (int l = 0; l < done; l++) {
        count(f, 0, -acts_bytes[l]);
        areal_acts_free(&acts[l]);
    }
    free(acts), free(acts_bytes), free(dx), free(dnext), free(dlogits);
    return rc;
}

int areal_par_fsdp_forward_backward(areal_par_fsdp *f, const areal_batch *mbs, int n_mb,
                                    areal_par_loss_fn loss_fn, void *loss_ctx, double *loss,
                                    areal_error *err) {
    if (n_mb < 1)
        return areal_error_set(err, AREAL_EINVAL, -1, "fsdp: n_mb %d must be >= 1", n_mb);
    memset(f->g, 0, sizeof(float) * f->n);
    step s = {.f = f, .root_pad = f->u_len[0] * (size_t)f->d};
    size_t maxlen = f->u_len[0];
    for (int u = 1; u < f->n_units; u++) {
        if (f->u_len[u] * (size_t)f->d > s.lay_pad)
            s.lay_pad = f->u_len[u] * (size_t)f->d;
        if (f->u_len[u] > maxlen)
            maxlen = f->u_len[u];
    }
    s.root_p = malloc(sizeof(float) * s.root_pad + 1);
    s.root_g = calloc(s.root_pad + 1, sizeof(float));
    s.lay_p = malloc(sizeof(float) * s.lay_pad + 1);
    s.lay_g = malloc(sizeof(float) * s.lay_pad + 1);
    s.scratch = malloc(sizeof(float) * maxlen + 1);
    int rc = AREAL_OK;
    if (s.root_p == NULL || s.root_g == NULL || s.lay_p == NULL || s.lay_g == NULL ||
        s.scratch == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "fsdp: out of memory for the step");
    if (rc == AREAL_OK)
        rc = gather(f, 0, f->p, s.root_p, err);
    /* the root unit, whole for the step (the gathered layer buffers are counted as they fill) */
    count(f, (int64_t)s.root_pad * 8, 0);
    double sum = 0;
    for (int i = 0; rc == AREAL_OK && i < n_mb; i++)
        rc = micro_batch(&s, i, &mbs[i], loss_fn, loss_ctx, &sum, err);
    if (rc == AREAL_OK)
        rc = scatter_add(f, 0, s.root_g, s.scratch, err);
    count(f, -(int64_t)s.root_pad * 8, 0);
    if (loss != NULL)
        *loss = sum;
    free(s.root_p), free(s.root_g), free(s.lay_p), free(s.lay_g), free(s.scratch);
    return rc;
}

int areal_par_fsdp_optim_step(areal_par_fsdp *f, const areal_adamw_cfg *cfg, double lr,
                              double max_norm, double *norm, areal_error *err) {
    double ss = 0;
    for (size_t k = 0; k < f->n; k++)
        ss += (double)f->g[k] * f->g[k];
    /* the comm runtime sums no doubles: the sum of squares as a float and its remainder */
    float hl[2] = {(float)ss, 0};
    hl[1] = (float)(ss - (double)hl[0]);
    int rc =
        f->d > 1 ? areal_coll_all_reduce(f->dp, hl, 2, AREAL_DT_F32, AREAL_SUM, err) : AREAL_OK;
    if (rc != AREAL_OK)
        return rc;
    if (f->d > 1)
        ss = (double)hl[0] + (double)hl[1];
    *norm = sqrt(ss);
    areal_par_clip(f->g, f->n, *norm, max_norm);
    if (f->n > 0)
        areal_adamw_step(&f->adam, cfg, lr, f->p, f->g, f->pool);
    else
        f->adam.step++;
    return AREAL_OK;
}

areal_par_fsdp_mem areal_par_fsdp_memory(const areal_par_fsdp *f) {
    return f->mem;
}

areal_par_fsdp_view areal_par_fsdp_state(areal_par_fsdp *f) {
    return (areal_par_fsdp_view){.params = f->p,
                                 .grads = f->g,
                                 .adam = &f->adam,
                                 .n = f->n,
                                 .n_units = f->n_units,
                                 .unit_off = f->u_off,
                                 .unit_len = f->u_len,
                                 .dp = f->d,
                                 .dp_rank = f->r};
}

int areal_par_fsdp_forward(areal_par_fsdp *f, const areal_batch *mbs, int n_mb,
                           areal_par_loss_fn fn, void *ctx, areal_error *err) {
    if (n_mb < 1)
        return areal_error_set(err, AREAL_EINVAL, -1, "fsdp: n_mb %d must be >= 1", n_mb);
    step s = {.f = f, .root_pad = f->u_len[0] * (size_t)f->d};
    for (int u = 1; u < f->n_units; u++)
        if (f->u_len[u] * (size_t)f->d > s.lay_pad)
            s.lay_pad = f->u_len[u] * (size_t)f->d;
    s.root_p = malloc(sizeof(float) * s.root_pad + 1);
    s.lay_p = malloc(sizeof(float) * s.lay_pad + 1);
    int rc = s.root_p == NULL || s.lay_p == NULL
                 ? areal_error_set(err, AREAL_ENOMEM, -1, "fsdp: out of memory for the forward")
                 : gather(f, 0, f->p, s.root_p, err);
    count(f, (int64_t)s.root_pad * 4, 0);
    for (int i = 0; rc == AREAL_OK && i < n_mb; i++) {
        /* two activation records at a time: the layer's input and its output */
        areal_acts prev = {0}, cur = {0};
        int have_prev = 0;
        for (int l = 0; rc == AREAL_OK && l < f->n_layers; l++) {
            areal_model m = {0};
            rc = stage_model(&s, l, &m, err);
            if (rc != AREAL_OK)
                break;
            rc = areal_model_forward_stage(&m, &mbs[i], have_prev ? prev.hidden : NULL, &cur, err);
            stage_release(&s, l, &m);
            if (have_prev)
                areal_acts_free(&prev);
            have_prev = rc == AREAL_OK;
            if (have_prev)
                prev = cur;
        }
        double scratch = 0;
        if (rc == AREAL_OK)
            rc = fn(ctx, i, prev.logits, prev.T, prev.V, NULL, &scratch, err);
        if (have_prev)
            areal_acts_free(&prev);
    }
    count(f, -(int64_t)s.root_pad * 4, 0);
    free(s.root_p), free(s.lay_p);
    return rc;
}
