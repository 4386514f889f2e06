/*
 * ckpt_layout.c - the whole-model HF checkpoint of a sharded layout, and a
 * shard's slices of its optimizer state (see ckpt_layout.h).
 */
#include "areal/parallel/ckpt_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/checkpoint.h"
#include "areal/model/safetensors.h"
#include "areal/model/shard.h"
#include "areal/parallel/reduce.h"

static size_t numel(const areal_tensor_spec *t) {
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}

/* The inverse of areal_tensor_slice_copy: local slice `src` into the HF tensor `full`. */
static void slice_put(float *full, const float *src, const areal_tensor_spec *hf,
                      const areal_tensor_slice *sl) {
    size_t rows = (size_t)hf->shape[0], cols = hf->ndim == 2 ? (size_t)hf->shape[1] : 1;
    if (sl->dim < 0)
        memcpy(full, src, sizeof(float) * rows * cols);
    else if (sl->dim == 0)
        memcpy(full + (size_t)sl->start * cols, src, sizeof(float) * (size_t)sl->len * cols);
    else
        for (size_t r = 0; r < rows; r++)
            memcpy(full + r * cols + (size_t)sl->start, src + r * (size_t)sl->len,
                   sizeof(float) * (size_t)sl->len);
}

static int write_text(const char *dir, const char *name, const char *text, areal_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return areal_error_set(err, AREAL_EIO, -1, "checkpoint: cannot write %s", path);
    int ok = fputs(text, f) >= 0;
    ok = fclose(f) == 0 && ok;
    return ok ? AREAL_OK : areal_error_set(err, AREAL_EIO, -1, "checkpoint: cannot write %s", path);
}

/* Rank 0's files from the whole buffers (params, m, v: [n] each, in `all` order). */
static int write_files(const char *dir, const char *config_json, const char *layout,
                       const areal_tensor_spec *all, size_t na, const size_t *off, const float *p,
                       const float *mo, const float *vo, long step, areal_error *err) {
    int rc = write_text(dir, "config.json", config_json, err);
    areal_st_out *t = calloc(2 * na + 1, sizeof *t);
    int64_t *shapes = calloc(2 * na + 1, 2 * sizeof(int64_t));
    char *names = calloc(2 * na, 256);
    int *shard = calloc(na > 0 ? na : 1, sizeof(int));
    if (rc == AREAL_OK && (t == NULL || shapes == NULL || names == NULL || shard == NULL))
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "checkpoint: out of memory");
    for (size_t i = 0; rc == AREAL_OK && i < na; i++) {
        shapes[2 * i] = all[i].shape[0], shapes[2 * i + 1] = all[i].ndim == 2 ? all[i].shape[1] : 0;
        t[i] = (areal_st_out){all[i].name, AREAL_DT_F32, all[i].ndim, &shapes[2 * i], p + off[i]};
    }
    if (rc == AREAL_OK)
        rc = areal_checkpoint_write(dir, t, na, shard, 1, err);
    /* the optimizer: exp_avg, exp_avg_sq of every tensor, and the step */
    float stepf = (float)step;
    int64_t one = 1;
    for (size_t i = 0; rc == AREAL_OK && i < na; i++) {
        char *a = names + 2 * i * 256, *b = a + 256;
        snprintf(a, 256, "%s.exp_avg", all[i].name);
        snprintf(b, 256, "%s.exp_avg_sq", all[i].name);
        t[2 * i] = (areal_st_out){a, AREAL_DT_F32, all[i].ndim, &shapes[2 * i], mo + off[i]};
        t[2 * i + 1] = (areal_st_out){b, AREAL_DT_F32, all[i].ndim, &shapes[2 * i], vo + off[i]};
    }
    if (rc == AREAL_OK) {
        t[2 * na] = (areal_st_out){"optimizer.step", AREAL_DT_F32, 1, &one, &stepf};
        const char *meta[] = {"format", "pt", "layout", layout};
        char path[4096];
        snprintf(path, sizeof path, "%s/optim.safetensors", dir);
        rc = areal_st_write(path, t, 2 * na + 1, meta, 2, err);
    }
    free(t), free(shapes), free(names), free(shard);
    return rc;
}

int areal_par_ckpt_save(const char *dir, const char *config_json, const char *layout,
                        const areal_model *m, const areal_adamw *adam, areal_coll *world,
                        int dp_rank, int edp_rank, areal_error *err) {
    areal_tensor_spec *all = NULL;
    size_t na = 0;
    int rc = areal_model_expected_tensors(&m->cfg, &all, &na, err);
    if (rc != AREAL_OK)
        return rc;
    size_t *off = calloc(na + 1, sizeof *off);
    for (size_t i = 0; off != NULL && i < na; i++)
        off[i + 1] = off[i] + numel(&all[i]);
    size_t n = off != NULL ? off[na] : 0;
    float *buf = off != NULL ? calloc(3 * n + 1, sizeof(float)) : NULL;
    if (buf == NULL) {
        free(all), free(off);
        return areal_error_set(err, AREAL_ENOMEM, -1, "checkpoint: out of memory for %zu floats",
                               3 * n);
    }
    float *p = buf, *mo = buf + n, *vo = buf + 2 * n;
    for (size_t i = 0; i < m->n_specs; i++) {
        int expert = strstr(m->specs[i].name, "mlp.experts.") != NULL;
        if (!areal_par_counts(m, i) || (expert ? edp_rank : dp_rank) != 0)
            continue; /* another rank owns these elements */
        size_t j = 0;
        while (j < na && strcmp(all[j].name, m->specs[i].name) != 0)
            j++;
        if (j == na) {
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "checkpoint: %s is not a tensor of the model", m->specs[i].name);
            break;
        }
        const float *src[3] = {m->params, adam->m, adam->v};
        float *dst[3] = {p, mo, vo};
        for (int k = 0; k < 3; k++)
            slice_put(dst[k] + off[j], src[k] + m->offset[i], &all[j], &m->slices[i]);
    }
    if (rc == AREAL_OK && world != NULL && areal_coll_size(world) > 1)
        rc = areal_coll_all_reduce(world, buf, 3 * n, AREAL_DT_F32, AREAL_SUM, err);
    if (rc == AREAL_OK && (world == NULL || areal_coll_rank(world) == 0))
        rc = write_files(dir, config_json, layout, all, na, off, p, mo, vo, adam->step, err);
    if (rc == AREAL_OK && world != NULL && areal_coll_size(world) > 1)
        rc = areal_coll_barrier(world, err); /* the files exist when any rank returns */
    free(buf), free(off), free(all);
    return rc;
}

int areal_par_ckpt_load_optim(const char *dir, const areal_model *m, areal_adamw *adam,
                              areal_error *err) {
    memset(adam, 0, sizeof *adam);
    char path[4096];
    snprintf(path, sizeof path, "%s/optim.safetensors", dir);
    areal_st_file f;
    int rc = areal_st_open(path, &f, err);
    if (rc != AREAL_OK)
        return rc;
    rc = areal_adamw_init(adam, m->n_params, err);
    areal_tensor_spec *all = NULL;
    size_t na = 0;
    if (rc == AREAL_OK)
        rc = areal_model_expected_tensors(&m->cfg, &all, &na, err);
    float *whole = NULL;
    for (size_t i = 0; rc == AREAL_OK && i < m->n_specs; i++) {
        const areal_tensor_spec *hf = NULL;
        for (size_t j = 0; j < na && hf == NULL; j++)
            if (strcmp(all[j].name, m->specs[i].name) == 0)
                hf = &all[j];
        size_t nw = hf != NULL ? numel(hf) : 0;
        float *w2 = hf != NULL ? realloc(whole, sizeof(float) * (nw ? nw : 1)) : NULL;
        if (w2 == NULL) {
            rc = hf == NULL ? areal_error_set(err, AREAL_EINVAL, -1, "checkpoint: no tensor %s",
                                              m->specs[i].name)
                            : areal_error_set(err, AREAL_ENOMEM, -1, "checkpoint: out of memory");
            break;
        }
        whole = w2;
        float *dst[2] = {adam->m, adam->v};
        for (int k = 0; rc == AREAL_OK && k < 2; k++) {
            char name[300];
            snprintf(name, sizeof name, "%s.%s", m->specs[i].name, k ? "exp_avg_sq" : "exp_avg");
            const areal_st_tensor *t = areal_st_header_find(&f.hdr, name);
            rc = t == NULL || t->numel != nw
                     ? areal_error_set(err, AREAL_EINVAL, -1,
                                       "checkpoint %s: %s is missing or not of %zu elements "
                                       "(written for another model?)",
                                       path, name, nw)
                     : areal_st_read_f32(&f, t, whole, nw, err);
            if (rc == AREAL_OK)
                areal_tensor_slice_copy(dst[k] + m->offset[i], whole, hf, &m->slices[i]);
        }
    }
    const areal_st_tensor *st =
        rc == AREAL_OK ? areal_st_header_find(&f.hdr, "optimizer.step") : NULL;
    float stepf = 0;
    if (rc == AREAL_OK)
        rc = st == NULL
                 ? areal_error_set(err, AREAL_EINVAL, -1, "checkpoint %s: no optimizer.step", path)
                 : areal_st_read_f32(&f, st, &stepf, 1, err);
    if (rc == AREAL_OK)
        adam->step = (long)stepf;
    else
        areal_adamw_free(adam);
    free(whole), free(all);
    areal_st_close(&f);
    return rc;
}
