/*
 * model_ref_util.h - reading the PyTorch reference files (ref.safetensors)
 * written by model/fixtures/make_model_refs.py, and the scaled error used to
 * compare against them (header only: each test is one C file).
 */
#ifndef MODEL_REF_UTIL_H
#define MODEL_REF_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/safetensors.h"

/* Tensor `name` of f as a new fp32 array (NULL if absent); *n its length. */
static inline float *ref_f32(const areal_st_file *f, const char *name, size_t *n) {
    const areal_st_tensor *t = areal_st_header_find(&f->hdr, name);
    if (t == NULL)
        return NULL;
    float *v = malloc(sizeof(float) * (t->numel ? t->numel : 1));
    if (v == NULL || areal_st_read_f32(f, t, v, t->numel, NULL) != 0) {
        free(v);
        return NULL;
    }
    if (n)
        *n = t->numel;
    return v;
}

/* Tensor `name` (I32) as a new int32 array (NULL if absent or another dtype). */
static inline int32_t *ref_i32(const areal_st_file *f, const char *name, size_t *n) {
    const areal_st_tensor *t = areal_st_header_find(&f->hdr, name);
    if (t == NULL || t->dtype != AREAL_DT_I32)
        return NULL;
    int32_t *v = malloc(sizeof(int32_t) * (t->numel ? t->numel : 1));
    if (v == NULL)
        return NULL;
    memcpy(v, areal_st_data(f, t), sizeof(int32_t) * t->numel);
    if (n)
        *n = t->numel;
    return v;
}

/* max |a - b| / max(max |b|, 1e-6): the error relative to the reference's scale. */
static inline double ref_rel_err(const float *a, const float *b, size_t n) {
    double md = 0, ms = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= md)) /* also catches NaN */
            md = isnan(d) ? INFINITY : d;
        if (fabs((double)b[i]) > ms)
            ms = fabs((double)b[i]);
    }
    return md / ms;
}

#endif
