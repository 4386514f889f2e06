/*
 * step_hf.c - a parallel step's state as whole HF tensors (see step.h):
 * gathered for weight sync, HF saves and checkpoints, set from them on a
 * resume, for any layout (context and expert parallelism included: the cp
 * replicas write nothing, the experts are written by their edp rank 0).
 */
#include <stdlib.h>
#include <string.h>

#include "areal/parallel/reduce.h"
#include "areal/parallel/step.h"

static size_t numel(const areal_tensor_spec *t) {
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}

/* Local slice `src` of HF tensor hf into `full` (slice NULL or dim < 0: the whole tensor). */
static void slice_put(float *full, const float *src, const areal_tensor_spec *hf,
                      const areal_tensor_slice *sl) {
    size_t rows = (size_t)hf->shape[0], cols = hf->ndim == 2 ? (size_t)hf->shape[1] : 1;
    if (sl == NULL || sl->dim < 0)
        memcpy(full, src, sizeof(float) * rows * cols);
    else if (sl->dim == 0)
        memcpy(full + (size_t)sl->start * cols, src, sizeof(float) * (size_t)sl->len * cols);
    else
        for (size_t r = 0; r < rows; r++)
            memcpy(full + r * cols + (size_t)sl->start, src + r * (size_t)sl->len,
                   sizeof(float) * (size_t)sl->len);
}

static int bad_which(int which, areal_error *err) {
    return areal_error_set(err, AREAL_EINVAL, -1,
                           "parallel step: state %d is not a tensor's (0 parameters, 2 exp_avg, "
                           "3 exp_avg_sq)",
                           which);
}

/* A flat range [lo, hi) of a ZeRO-1 rank's moments and where its first element lives. */
typedef struct mrange {
    size_t lo, hi;
    float *m, *v;
} mrange;

/* A ZeRO-1 rank's moment ranges (one, or the overlapped reducer's one per bucket; caller frees). */
static mrange *zero1_ranges(areal_par_step *s, size_t *n) {
    areal_par_overlap *o = s->overlap;
    *n = o != NULL ? o->nb : 1;
    mrange *r = calloc(*n ? *n : 1, sizeof *r);
    if (r == NULL)
        return NULL;
    if (o == NULL) {
        r[0] = (mrange){s->z.lo, s->z.hi, s->z.adam.m, s->z.adam.v};
        return r;
    }
    for (size_t k = 0; k < o->nb; k++) {
        areal_par_overlap_piece(o, k, &r[k].lo, &r[k].hi);
        r[k].m = o->adam.m + o->b[k].goff;
        r[k].v = o->adam.v + o->b[k].goff;
    }
    return r;
}

/*
 * ZeRO-1 moment `which` of the local tensor at [a, a + ln): to tmp (ln
 * floats, zero where another rank holds it) when put is 0, from tmp when 1.
 */
static int zero1_moments(areal_par_step *s, int which, size_t a, size_t ln, float *tmp, int put,
                         areal_error *err) {
    size_t n;
    mrange *r = zero1_ranges(s, &n);
    if (r == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "parallel step: no memory");
    for (size_t k = 0; k < n; k++) {
        size_t lo = r[k].lo > a ? r[k].lo : a, hi = r[k].hi < a + ln ? r[k].hi : a + ln;
        float *src = which == AREAL_PAR_EXP_AVG ? r[k].m : r[k].v; /* src[0]: flat r[k].lo */
        for (size_t x = lo; x < hi; x++) {
            if (put)
                src[x - r[k].lo] = tmp[x - a];
            else
                tmp[x - a] = src[x - r[k].lo];
        }
    }
    free(r);
    return AREAL_OK;
}

/* This rank's buffer of state `which` over chunk c's local parameters, flat index `base` first. */
static const float *local_state(areal_par_step *s, int c, int which, size_t *base) {
    *base = 0;
    if (which == AREAL_PAR_PARAMS)
        return areal_par_step_chunk(s, c)->params;
    const areal_adamw *a =
        s->kind == AREAL_PAR_ZERO1 ? &s->z.adam : areal_par_step_chunk_adam(s, c);
    if (s->kind == AREAL_PAR_ZERO1)
        *base = s->z.lo;
    return which == AREAL_PAR_EXP_AVG ? a->m : a->v;
}

int areal_par_step_get_tensor(areal_par_step *s, areal_coll *world, const areal_tensor_spec *hf,
                              int which, float *out, areal_error *err) {
    if (which != AREAL_PAR_PARAMS && which != AREAL_PAR_EXP_AVG && which != AREAL_PAR_EXP_AVG_SQ)
        return bad_which(which, err);
    if (s->kind == AREAL_PAR_FSDP)
        return areal_par_fsdp_get_tensor(s->fsdp, hf->name, which, out, err);
    size_t n = numel(hf);
    memset(out, 0, sizeof(float) * n);
    /* under vpp each chunk is looked at: the tensor lives in at most one owning chunk */
    for (int c = 0; c < areal_par_step_n_chunks(s); c++) {
        areal_model *m = areal_par_step_chunk(s, c);
        int j = areal_model_find(m, hf->name);
        /* one writer per element: ep.h's owners under dispatch; else the tp x pp owner on dp
         * rank 0 of cp rank 0 (the cp ranks hold replicas) */
        int ep = s->ep != NULL;
        int dp0 = ep || (areal_par_rank(s->g.dp) == 0 && areal_par_rank(s->cp.cp) == 0);
        int owns = j >= 0 && (ep ? areal_par_ep_counts(m, &s->ep->g, (size_t)j)
                                 : areal_par_counts(m, (size_t)j));
        if (owns) {
            const areal_tensor_spec *loc = &m->specs[j];
            size_t ln = numel(loc), a = m->offset[j], base = 0;
            const float *src = local_state(s, c, which, &base);
            int zero1_moment = s->kind == AREAL_PAR_ZERO1 && which != AREAL_PAR_PARAMS;
            if (!zero1_moment && dp0) {
                slice_put(out, src + a, hf, m->slices != NULL ? &m->slices[j] : NULL);
            } else if (zero1_moment) {
                /* the elements of the tensor in this rank's range(s), zero elsewhere */
                float *tmp = calloc(ln ? ln : 1, sizeof(float));
                if (tmp == NULL)
                    return areal_error_set(err, AREAL_ENOMEM, -1,
                                           "parallel step: no memory for %s (%zu floats)", hf->name,
                                           ln);
                int rc = zero1_moments(s, which, a, ln, tmp, 0, err);
                if (rc == AREAL_OK)
                    slice_put(out, tmp, hf, m->slices != NULL ? &m->slices[j] : NULL);
                free(tmp);
                if (rc != AREAL_OK)
                    return rc;
            }
        }
    }
    if (world == NULL || areal_coll_size(world) < 2)
        return AREAL_OK;
    return areal_coll_all_reduce(world, out, n, AREAL_DT_F32, AREAL_SUM, err);
}

static int set_in_chunk(areal_par_step *s, int c, const areal_tensor_spec *hf, int which,
                        const float *whole, areal_error *err);

int areal_par_step_set_tensor(areal_par_step *s, const areal_tensor_spec *hf, int which,
                              const float *whole, areal_error *err) {
    if (which != AREAL_PAR_PARAMS && which != AREAL_PAR_EXP_AVG && which != AREAL_PAR_EXP_AVG_SQ)
        return bad_which(which, err);
    if (s->kind == AREAL_PAR_FSDP)
        return areal_par_fsdp_set_tensor(s->fsdp, hf->name, which, whole, err);
    int n = areal_par_step_n_chunks(s);
    for (int c = 0; c < n - 1; c++) { /* vpp: every chunk holding it (a tied copy too) */
        int rc = set_in_chunk(s, c, hf, which, whole, err);
        if (rc != AREAL_OK)
            return rc;
    }
    return set_in_chunk(s, n - 1, hf, which, whole, err);
}

/* areal_par_step_set_tensor on chunk c (a tensor it lacks skipped). */
static int set_in_chunk(areal_par_step *s, int c, const areal_tensor_spec *hf, int which,
                        const float *whole, areal_error *err) {
    areal_model *m = areal_par_step_chunk(s, c);
    int j = areal_model_find(m, hf->name);
    if (j < 0)
        return AREAL_OK;
    const areal_tensor_spec *loc = &m->specs[j];
    size_t ln = numel(loc), a = m->offset[j], base = 0;
    float *dst = (float *)local_state(s, c, which, &base);
    const areal_tensor_slice *sl = m->slices != NULL ? &m->slices[j] : NULL;
    if (s->kind != AREAL_PAR_ZERO1 || which == AREAL_PAR_PARAMS) {
        if (sl == NULL || sl->dim < 0)
            memcpy(dst + a, whole, sizeof(float) * ln);
        else
            areal_tensor_slice_copy(dst + a, whole, hf, sl);
        return AREAL_OK;
    }
    float *tmp = malloc(sizeof(float) * (ln ? ln : 1));
    if (tmp == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1,
                               "parallel step: no memory for %s (%zu floats)", hf->name, ln);
    if (sl == NULL || sl->dim < 0)
        memcpy(tmp, whole, sizeof(float) * ln);
    else
        areal_tensor_slice_copy(tmp, whole, hf, sl);
    int rc = zero1_moments(s, which, a, ln, tmp, 1, err);
    free(tmp);
    return rc;
}
