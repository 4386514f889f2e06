/*
 * trainer_par_ckpt.c - a trainer layout's per-rank checkpoint through
 * ckpt_shard.h, and the gathered form read tensor by tensor (see
 * trainer_par_ckpt.h).
 */
#include "areal/train/trainer_par_ckpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "areal/model/checkpoint.h"
#include "areal/model/safetensors.h"
#include "areal/parallel/ckpt_shard.h"
#include "areal/train/hf_save.h"
#include "trainer_par_internal.h"

static size_t numel(const areal_tensor_spec *t) {
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}

/* The initial model's config.json, verbatim (caller frees). */
static char *config_text(const char *model_dir, areal_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", model_dir);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        areal_error_set(err, AREAL_EIO, -1, "%s: cannot read", path);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *t = malloc(cap);
    while (t != NULL) {
        n += fread(t + n, 1, cap - 1 - n, f);
        if (n < cap - 1)
            break;
        char *u = realloc(t, cap * 2);
        if (u == NULL)
            free(t);
        t = u, cap *= 2;
    }
    fclose(f);
    if (t == NULL)
        areal_error_set(err, AREAL_ENOMEM, -1, "no memory for %s", path);
    else
        t[n] = '\0';
    return t;
}

/* "megatron:d2t1p1": the layout index.json records. */
static void layout_name(const areal_train_layout *l, char *out, size_t cap) {
    if (l->backend == AREAL_BACKEND_FSDP)
        snprintf(out, cap, "fsdp:d%d", l->s.dp);
    else if (l->vpp > 1)
        snprintf(out, cap, "megatron:d%dt%dp%d vpp%d", l->s.dp, l->s.tp, l->s.pp, l->vpp);
    else
        snprintf(out, cap, "megatron:d%dt%dp%d", l->s.dp, l->s.tp, l->s.pp);
}

int areal_train_par_save(areal_train_par *p, const char *dir, areal_error *err) {
    areal_train_par_parts v = areal_train_par_parts_of(p);
    char *cfg = config_text(v.model_dir, err), name[96];
    if (cfg == NULL)
        return err != NULL ? err->code : AREAL_EIO;
    layout_name(v.l, name, sizeof name);
    areal_par_step *s = v.step;
    /* the parameters' owner: rank 0 of the group they are replicated over - the step's data
     * group (dp, or dp x cp) - or of edp for experts (ckpt_shard.h) */
    areal_coll *data = s->data != NULL ? s->data : v.dp;
    int rc, dp = areal_par_rank(data), edp = v.edp != NULL ? areal_par_rank(v.edp) : dp;
    if (s->kind == AREAL_PAR_FSDP) {
        rc = areal_par_ckpt_save_shards_fsdp(dir, cfg, name, v.fsdp, v.world, err);
    } else if (s->chunks != NULL) { /* vpp: every chunk's pieces in the rank's one file */
        const areal_adamw *ad[64];
        for (int c = 0; c < s->vpp; c++)
            ad[c] = areal_par_step_chunk_adam(s, c);
        rc = areal_par_ckpt_save_shards_chunks(
            dir, cfg, name, (const areal_model *const *)s->chunks, ad, s->vpp, v.world, dp, err);
    } else if (s->kind == AREAL_PAR_ZERO1 && s->overlap != NULL) {
        rc = areal_par_ckpt_save_shards_overlap(dir, cfg, name, s->overlap, v.world, dp, edp, err);
    } else {
        rc = areal_par_ckpt_save_shards(
            dir, cfg, name, v.shard, s->kind == AREAL_PAR_ADAMW ? &s->adam : NULL,
            s->kind == AREAL_PAR_ZERO1 ? &s->z : NULL, v.world, dp, edp, err);
    }
    free(cfg);
    return rc;
}

int areal_train_par_load(areal_train_par *p, const char *dir, areal_error *err) {
    areal_train_par_parts v = areal_train_par_parts_of(p);
    areal_par_step *s = v.step;
    if (s->kind == AREAL_PAR_FSDP)
        return areal_par_ckpt_load_shards_fsdp(dir, v.fsdp, err);
    for (int c = 1; s->chunks != NULL && c < s->vpp; c++) { /* vpp: chunks 1..; 0 below */
        areal_adamw full;
        int rc = areal_par_ckpt_load_shards(dir, s->chunks[c], &full, err);
        if (rc != AREAL_OK)
            return rc;
        areal_adamw_free(&s->cadam[c]);
        s->cadam[c] = full;
    }
    /* the moments of the whole local shard for a moment (2x the shard: never the model's) */
    areal_adamw full;
    int rc = areal_par_ckpt_load_shards(dir, v.shard, &full, err);
    if (rc != AREAL_OK)
        return rc;
    if (s->kind == AREAL_PAR_ADAMW) {
        areal_adamw_free(&s->adam);
        s->adam = full; /* the same shape: m's local parameters */
        return AREAL_OK;
    }
    rc = s->overlap != NULL ? areal_par_overlap_load(s->overlap, &full, err)
                            : areal_par_zero1_load(&s->z, &full, err);
    areal_adamw_free(&full);
    return rc;
}

/* Floats [off, off + n) of the F32 tensor `name` of f into dst. */
static int read_range(const areal_st_file *f, const char *name, size_t off, size_t n, float *dst,
                      areal_error *err) {
    const areal_st_tensor *t = areal_st_header_find(&f->hdr, name);
    if (t == NULL || t->dtype != AREAL_DT_F32 || t->numel < off + n)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: needs F32 %s of at least %zu floats (written for another "
                               "model?)",
                               f->path, name, off + n);
    memcpy(dst, (const float *)areal_st_data(f, t) + off, sizeof(float) * n);
    return AREAL_OK;
}

int areal_train_par_load_gathered(areal_train_par *p, const char *dir, long adam_step,
                                  areal_error *err) {
    areal_train_par_parts v = areal_train_par_parts_of(p);
    char path[4200];
    snprintf(path, sizeof path, "%s/model", dir);
    areal_checkpoint ck;
    int rc = areal_checkpoint_open(path, &ck, err);
    if (rc != AREAL_OK)
        return rc;
    areal_st_file f;
    snprintf(path, sizeof path, "%s/optim.safetensors", dir);
    if ((rc = areal_st_open(path, &f, err)) != AREAL_OK) {
        areal_checkpoint_close(&ck);
        return rc;
    }
    size_t most = 1, total = 0;
    for (size_t i = 0; i < v.n_hf; i++) {
        most = numel(&v.hf[i]) > most ? numel(&v.hf[i]) : most;
        total += numel(&v.hf[i]);
    }
    const areal_st_tensor *a = areal_st_header_find(&f.hdr, "exp_avg");
    if (a == NULL || a->numel != total)
        rc = areal_error_set(err, AREAL_EINVAL, -1,
                             "%s: exp_avg must hold the model's %zu floats (written for another "
                             "model?)",
                             path, total);
    float *buf = rc == AREAL_OK ? malloc(sizeof(float) * most) : NULL;
    if (rc == AREAL_OK && buf == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a tensor of %zu floats", most);
    size_t off = 0;
    for (size_t i = 0; rc == AREAL_OK && i < v.n_hf; i++) {
        const areal_tensor_spec *hf = &v.hf[i];
        size_t n = numel(hf);
        rc = areal_checkpoint_load_f32(&ck, hf->name, buf, most, err);
        if (rc == AREAL_OK)
            rc = areal_par_step_set_tensor(v.step, hf, AREAL_PAR_PARAMS, buf, err);
        if (rc == AREAL_OK)
            rc = read_range(&f, "exp_avg", off, n, buf, err);
        if (rc == AREAL_OK)
            rc = areal_par_step_set_tensor(v.step, hf, AREAL_PAR_EXP_AVG, buf, err);
        if (rc == AREAL_OK)
            rc = read_range(&f, "exp_avg_sq", off, n, buf, err);
        if (rc == AREAL_OK)
            rc = areal_par_step_set_tensor(v.step, hf, AREAL_PAR_EXP_AVG_SQ, buf, err);
        off += n;
    }
    if (rc == AREAL_OK)
        areal_par_step_adam(v.step)->step = adam_step;
    for (int c = 1; rc == AREAL_OK && c < areal_par_step_n_chunks(v.step); c++)
        areal_par_step_chunk_adam(v.step, c)->step = adam_step;
    free(buf);
    areal_st_close(&f);
    areal_checkpoint_close(&ck);
    return rc;
}

bool areal_train_par_overlapped(const areal_train_par *p) {
    areal_train_par_parts v = areal_train_par_parts_of((areal_train_par *)p);
    return v.step->overlap != NULL;
}

long long areal_train_par_shard_bytes(const areal_train_par *p, const char *dir) {
    areal_train_par_parts v = areal_train_par_parts_of((areal_train_par *)p);
    char path[4200];
    int r = v.world != NULL ? areal_coll_rank(v.world) : 0,
        w = v.world != NULL ? areal_coll_size(v.world) : 1;
    snprintf(path, sizeof path, "%s/shard-%05d-of-%05d.safetensors", dir, r, w);
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

/* ---- the HF export, streamed */

typedef struct hf_stream {
    areal_train_par_parts v;
    const size_t *order; /* the tensors in the file's layout order (by name) */
    size_t done;         /* tensors gathered so far */
    float *buf;          /* one tensor */
} hf_stream;

/* qsort_r's order of tensor indices by name (ctx: the tensor list). */
static int by_name(const void *a, const void *b, void *ctx) {
    const areal_tensor_spec *hf = ctx;
    return strcmp(hf[*(const size_t *)a].name, hf[*(const size_t *)b].name);
}

/* The next tensor in order, gathered (a collective every rank makes alike). */
static int gather_next(hf_stream *h, areal_error *err) {
    const areal_tensor_spec *hf = &h->v.hf[h->order[h->done]];
    int rc = areal_par_step_get_tensor(h->v.step, h->v.world, hf, AREAL_PAR_PARAMS, h->buf, err);
    h->done++;
    return rc;
}

/* Rank 0's fill: the writer asks in layout order, which is h->order. */
static int fill(void *ctx, size_t i, const void **data, areal_error *err) {
    hf_stream *h = ctx;
    if (h->done >= h->v.n_hf || h->order[h->done] != i)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "HF export: the writer asked for %s out of the gather's order",
                               h->v.hf[i].name);
    int rc = gather_next(h, err);
    *data = h->buf;
    return rc;
}

int areal_train_par_hf_save(areal_train_par *p, const char *dst, areal_error *err) {
    hf_stream h = {areal_train_par_parts_of(p), NULL, 0, NULL};
    bool root = h.v.world == NULL || areal_coll_rank(h.v.world) == 0;
    size_t most = 1, *order = calloc(h.v.n_hf ? h.v.n_hf : 1, sizeof *order);
    for (size_t i = 0; i < h.v.n_hf; i++) {
        most = numel(&h.v.hf[i]) > most ? numel(&h.v.hf[i]) : most;
        if (order != NULL)
            order[i] = i;
    }
    h.buf = malloc(sizeof(float) * most);
    /* every rank fails alike here (the same sizes), so none starts a gather alone */
    if (order == NULL || h.buf == NULL) {
        free(order), free(h.buf);
        return areal_error_set(err, AREAL_ENOMEM, -1, "HF export: no memory for %zu floats", most);
    }
    qsort_r(order, h.v.n_hf, sizeof *order, by_name, (void *)h.v.hf);
    h.order = order;
    int rc =
        root ? areal_hf_save_stream(h.v.hf, h.v.n_hf, fill, &h, h.v.model_dir, dst, err) : AREAL_OK;
    /* the rest of the gathers (all of them off rank 0; after a failed write on it), so every
     * rank leaves having made the same collectives */
    while (h.done < h.v.n_hf) {
        areal_error e2;
        int r = gather_next(&h, rc == AREAL_OK ? err : &e2);
        if (rc == AREAL_OK)
            rc = r;
    }
    free(order), free(h.buf);
    return rc;
}

size_t areal_train_par_numel(const areal_train_par *p) {
    areal_train_par_parts v = areal_train_par_parts_of((areal_train_par *)p);
    size_t n = 0;
    for (size_t i = 0; i < v.n_hf; i++)
        n += numel(&v.hf[i]);
    return n;
}
