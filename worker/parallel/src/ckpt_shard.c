/*
 * ckpt_shard.c - sharded checkpoints: each rank's pieces into its own
 * safetensors file, the index written last, and the reader that rebuilds
 * one whole tensor at a time from every shard (see ckpt_shard.h).
 */
#include "areal/parallel/ckpt_shard.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/safetensors.h"
#include "areal/model/shard.h"
#include "areal/parallel/reduce.h"

#define FORMAT "areal-sharded-v1"

/* One piece: elements [a, b) of the writer's local slice (dim, start, len) of HF tensor name. */
typedef struct piece {
    char name[AREAL_TENSOR_NAME_MAX];
    int kind, dim; /* kind 0 params, 1 exp_avg, 2 exp_avg_sq */
    int64_t start, len;
    size_t a, b;
    const float *data;         /* writer: borrowed, b - a floats */
    int file;                  /* reader: the shard holding it */
    const areal_st_tensor *st; /* reader: its tensor there */
} piece;

typedef struct plist {
    piece *v;
    size_t n, cap;
    int oom;
} plist;

static size_t numel(const areal_tensor_spec *t) {
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}

static piece *add(plist *l) {
    if (l->oom)
        return NULL;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        piece *v = realloc(l->v, cap * sizeof *v);
        if (v == NULL) {
            l->oom = 1;
            return NULL;
        }
        l->v = v, l->cap = cap;
    }
    piece *p = &l->v[l->n++];
    memset(p, 0, sizeof *p);
    return p;
}

static void add_piece(plist *l, const char *name, int kind, const areal_tensor_slice *sl, size_t a,
                      size_t b, const float *data) {
    if (b <= a)
        return;
    piece *p = add(l);
    if (p == NULL)
        return;
    snprintf(p->name, sizeof p->name, "%s", name);
    p->kind = kind, p->a = a, p->b = b, p->data = data;
    p->dim = sl != NULL ? sl->dim : -1;
    p->start = sl != NULL && sl->dim >= 0 ? sl->start : 0;
    p->len = sl != NULL && sl->dim >= 0 ? sl->len : 0;
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

/* This rank's file: the pieces as tensors t0, t1, ... each described by its metadata entry. */
static int write_shard(const char *dir, int rank, int world, const char *layout, const plist *l,
                       areal_error *err) {
    size_t n = l->n;
    areal_st_out *t = calloc(n + 1, sizeof *t);
    int64_t *shape = calloc(n + 1, sizeof *shape);
    char *keys = calloc(n + 1, 24), *vals = calloc(n + 1, AREAL_TENSOR_NAME_MAX + 96);
    const char **kv = calloc(2 * n + 4, sizeof *kv);
    int rc = AREAL_OK;
    if (t == NULL || shape == NULL || keys == NULL || vals == NULL || kv == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "checkpoint: out of memory for %zu pieces", n);
    for (size_t i = 0; rc == AREAL_OK && i < n; i++) {
        const piece *p = &l->v[i];
        char *k = keys + 24 * i, *v = vals + (AREAL_TENSOR_NAME_MAX + 96) * i;
        snprintf(k, 24, "t%zu", i);
        snprintf(v, AREAL_TENSOR_NAME_MAX + 96, "%d %d %lld %lld %zu %zu %s", p->kind, p->dim,
                 (long long)p->start, (long long)p->len, p->a, p->b, p->name);
        shape[i] = (int64_t)(p->b - p->a);
        t[i] = (areal_st_out){k, AREAL_DT_F32, 1, &shape[i], p->data};
        kv[4 + 2 * i] = k, kv[5 + 2 * i] = v;
    }
    if (rc == AREAL_OK) {
        kv[0] = "format", kv[1] = FORMAT, kv[2] = "layout", kv[3] = layout;
        char path[4096];
        snprintf(path, sizeof path, "%s/shard-%05d-of-%05d.safetensors", dir, rank, world);
        rc = areal_st_write(path, t, n, kv, 2 + n, err);
    }
    free(t), free(shape), free(keys), free(vals), free(kv);
    return rc;
}

/*
 * Every rank's shard written (or one failed: every rank then fails), rank
 * 0 writes config.json and index.json, and all return once they exist.
 */
static int finish(const char *dir, const char *config_json, const char *layout, long step,
                  areal_coll *world, int rc, areal_error *err) {
    int many = world != NULL && areal_coll_size(world) > 1;
    int32_t bad = rc != AREAL_OK;
    if (many) {
        areal_error e2;
        int r = areal_coll_all_reduce(world, &bad, 1, AREAL_DT_I32, AREAL_SUM,
                                      rc == AREAL_OK ? err : &e2);
        if (rc == AREAL_OK && r != AREAL_OK)
            return r;
    }
    if (rc == AREAL_OK && bad > 0)
        rc =
            areal_error_set(err, AREAL_EIO, -1,
                            "checkpoint %s: %d rank(s) could not write their shard", dir, (int)bad);
    if (rc == AREAL_OK && (!many || areal_coll_rank(world) == 0)) {
        char idx[512];
        snprintf(idx, sizeof idx,
                 "{\"format\": \"" FORMAT "\", \"world\": %d, \"layout\": \"%s\", \"step\": %ld}\n",
                 many ? areal_coll_size(world) : 1, layout, step);
        rc = write_text(dir, "config.json", config_json, err);
        if (rc == AREAL_OK)
            rc = write_text(dir, "index.json", idx, err);
    }
    if (many && bad == 0) {
        areal_error e2;
        int r = areal_coll_barrier(world, rc == AREAL_OK ? err : &e2);
        if (rc == AREAL_OK)
            rc = r;
    }
    return rc;
}

/*
 * The moments of flat range [lo, hi) of m's buffer (mv, vv: its first
 * element's) where it meets tensor i, as pieces of that tensor.
 */
static void add_range(plist *l, const areal_model *m, size_t i, size_t lo, size_t hi,
                      const float *mv, const float *vv) {
    size_t off = m->offset[i], n = numel(&m->specs[i]);
    size_t a = off > lo ? off : lo, b = off + n < hi ? off + n : hi;
    if (b <= a)
        return;
    add_piece(l, m->specs[i].name, 1, &m->slices[i], a - off, b - off, mv + (a - lo));
    add_piece(l, m->specs[i].name, 2, &m->slices[i], a - off, b - off, vv + (a - lo));
}

/* m's parameters (the owners') and one optimizer state (adam, z or o's pieces) onto l. */
static void add_model(plist *lp, const areal_model *m, const areal_adamw *adam,
                      const areal_par_zero1 *z, const areal_par_overlap *o, int dp_rank,
                      int edp_rank) {
    plist l = *lp;
    for (size_t i = 0; i < m->n_specs; i++) {
        const char *name = m->specs[i].name;
        int expert = strstr(name, "mlp.experts.") != NULL, counts = areal_par_counts(m, i);
        int owner = counts && (expert ? edp_rank : dp_rank) == 0;
        size_t n = numel(&m->specs[i]), off = m->offset[i];
        const areal_tensor_slice *sl = &m->slices[i];
        if (owner)
            add_piece(&l, name, 0, sl, 0, n, m->params + off);
        if (adam != NULL && owner) {
            add_piece(&l, name, 1, sl, 0, n, adam->m + off);
            add_piece(&l, name, 2, sl, 0, n, adam->v + off);
        }
        if (z != NULL && counts) /* this rank's flat range, where it meets tensor i */
            add_range(&l, m, i, z->lo, z->hi, z->adam.m, z->adam.v);
        for (size_t k = 0; o != NULL && counts && k < o->nb; k++) { /* its piece of each bucket */
            size_t lo, hi;
            areal_par_overlap_piece(o, k, &lo, &hi);
            add_range(&l, m, i, lo, hi, o->adam.m + o->b[k].goff, o->adam.v + o->b[k].goff);
        }
    }
    *lp = l;
}

/* This rank's pieces in l written, then finish (l freed). */
static int save_list(const char *dir, const char *config_json, const char *layout, plist *lp,
                     long step, areal_coll *world, areal_error *err) {
    plist l = *lp;
    int rank = world != NULL ? areal_coll_rank(world) : 0;
    int size = world != NULL ? areal_coll_size(world) : 1;
    int rc = l.oom ? areal_error_set(err, AREAL_ENOMEM, -1, "checkpoint: out of memory")
                   : write_shard(dir, rank, size, layout, &l, err);
    free(l.v);
    return finish(dir, config_json, layout, step, world, rc, err);
}

/* m's parameters (the owners') and one optimizer state: adam, z or o's pieces. */
static int save_model(const char *dir, const char *config_json, const char *layout,
                      const areal_model *m, const areal_adamw *adam, const areal_par_zero1 *z,
                      const areal_par_overlap *o, areal_coll *world, int dp_rank, int edp_rank,
                      areal_error *err) {
    plist l = {0};
    add_model(&l, m, adam, z, o, dp_rank, edp_rank);
    long step = adam != NULL ? adam->step : z != NULL ? z->adam.step : o->adam.step;
    return save_list(dir, config_json, layout, &l, step, world, err);
}

int areal_par_ckpt_save_shards_chunks(const char *dir, const char *config_json, const char *layout,
                                      const areal_model *const *ms, const areal_adamw *const *adams,
                                      int n, areal_coll *world, int dp_rank, areal_error *err) {
    if (n < 1)
        return areal_error_set(err, AREAL_EINVAL, -1, "checkpoint: %d model chunks", n);
    plist l = {0};
    for (int c = 0; c < n; c++)
        add_model(&l, ms[c], adams[c], NULL, NULL, dp_rank, dp_rank);
    return save_list(dir, config_json, layout, &l, adams[0]->step, world, err);
}

int areal_par_ckpt_save_shards(const char *dir, const char *config_json, const char *layout,
                               const areal_model *m, const areal_adamw *adam,
                               const areal_par_zero1 *z, areal_coll *world, int dp_rank,
                               int edp_rank, areal_error *err) {
    if ((adam == NULL) == (z == NULL))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "checkpoint: give exactly one optimizer state (AdamW or ZeRO-1)");
    return save_model(dir, config_json, layout, m, adam, z, NULL, world, dp_rank, edp_rank, err);
}

int areal_par_ckpt_save_shards_overlap(const char *dir, const char *config_json, const char *layout,
                                       const areal_par_overlap *o, areal_coll *world, int dp_rank,
                                       int edp_rank, areal_error *err) {
    if (!o->zero1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "checkpoint: the overlapped reducer is plain DP (its moments are "
                               "the step's AdamW: save that with areal_par_ckpt_save_shards)");
    return save_model(dir, config_json, layout, o->m, NULL, NULL, o, world, dp_rank, edp_rank, err);
}

int areal_par_ckpt_save_shards_fsdp(const char *dir, const char *config_json, const char *layout,
                                    areal_par_fsdp *f, areal_coll *world, areal_error *err) {
    size_t nt = 0;
    const areal_tensor_spec *ts = areal_par_fsdp_tensors(f, &nt);
    areal_par_fsdp_view v = areal_par_fsdp_state(f);
    plist l = {0};
    int rc = AREAL_OK;
    for (size_t i = 0; rc == AREAL_OK && i < nt; i++) {
        size_t a, b, at;
        rc = areal_par_fsdp_locate(f, ts[i].name, &a, &b, &at, err);
        if (rc != AREAL_OK)
            break;
        add_piece(&l, ts[i].name, 0, NULL, a, b, v.params + at);
        add_piece(&l, ts[i].name, 1, NULL, a, b, v.adam->m + at);
        add_piece(&l, ts[i].name, 2, NULL, a, b, v.adam->v + at);
    }
    int rank = world != NULL ? areal_coll_rank(world) : 0;
    int size = world != NULL ? areal_coll_size(world) : 1;
    if (rc == AREAL_OK)
        rc = l.oom ? areal_error_set(err, AREAL_ENOMEM, -1, "checkpoint: out of memory")
                   : write_shard(dir, rank, size, layout, &l, err);
    free(l.v);
    return finish(dir, config_json, layout, v.adam->step, world, rc, err);
}

/* ---- reading */

typedef struct reader {
    const char *dir;
    int world;
    long step;
    areal_st_file *files; /* [world] */
    int opened;
    plist pieces;
    float *tmp; /* one piece's data */
    size_t tmp_cap;
} reader;

static void reader_close(reader *r) {
    for (int i = 0; i < r->opened; i++)
        areal_st_close(&r->files[i]);
    free(r->files);
    free(r->pieces.v);
    free(r->tmp);
}

/* index.json's world and step (the one writer's fixed form, read by key). */
static int read_index(reader *r, areal_error *err) {
    char path[4096], text[1024] = {0};
    snprintf(path, sizeof path, "%s/index.json", r->dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return areal_error_set(err, AREAL_EIO, -1,
                               "checkpoint %s: no index.json (not a sharded checkpoint, or its "
                               "writing did not finish)",
                               r->dir);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    const char *w = strstr(text, "\"world\":"), *s = strstr(text, "\"step\":");
    if (strstr(text, "\"" FORMAT "\"") == NULL || w == NULL || s == NULL)
        return areal_error_set(err, AREAL_EIO, -1,
                               "checkpoint %s: index.json is not of format %s (world, step)", path,
                               FORMAT);
    r->world = (int)strtol(w + 8, NULL, 10);
    r->step = strtol(s + 7, NULL, 10);
    if (r->world < 1 || r->world > 1 << 20 || r->step < 0)
        return areal_error_set(err, AREAL_EIO, -1, "checkpoint %s: world %d or step %ld is invalid",
                               path, r->world, r->step);
    return AREAL_OK;
}

static int reader_open(reader *r, const char *dir, areal_error *err) {
    memset(r, 0, sizeof *r);
    r->dir = dir;
    int rc = read_index(r, err);
    if (rc == AREAL_OK && (r->files = calloc((size_t)r->world, sizeof *r->files)) == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "checkpoint: out of memory");
    for (int i = 0; rc == AREAL_OK && i < r->world; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/shard-%05d-of-%05d.safetensors", dir, i, r->world);
        rc = areal_st_open(path, &r->files[i], err);
        if (rc != AREAL_OK)
            break;
        r->opened = i + 1;
        const areal_st_header *h = &r->files[i].hdr;
        for (size_t k = 0; rc == AREAL_OK && k < h->n_meta; k++) {
            if (h->meta_keys[k][0] != 't')
                continue;
            piece *p = add(&r->pieces);
            long long start = 0, len = 0;
            if (p == NULL) {
                rc = areal_error_set(err, AREAL_ENOMEM, -1, "checkpoint: out of memory");
                break;
            }
            int got = sscanf(h->meta_values[k], "%d %d %lld %lld %zu %zu %95s", &p->kind, &p->dim,
                             &start, &len, &p->a, &p->b, p->name);
            p->start = start, p->len = len, p->file = i;
            p->st = areal_st_header_find(h, h->meta_keys[k]);
            if (got != 7 || p->st == NULL || p->st->numel != p->b - p->a || p->kind < 0 ||
                p->kind > 2 || p->dim < -1 || p->dim > 1)
                rc = areal_error_set(err, AREAL_EIO, -1,
                                     "checkpoint %s: piece %s is malformed ('%s')", path,
                                     h->meta_keys[k], h->meta_values[k]);
        }
    }
    if (rc != AREAL_OK)
        reader_close(r);
    return rc;
}

/*
 * The whole HF tensor hf's `kind` into whole (numel floats) from every
 * piece of it; mask: numel bytes of scratch. Every element must be covered.
 */
static int assemble(reader *r, const areal_tensor_spec *hf, int kind, float *whole, uint8_t *mask,
                    areal_error *err) {
    static const char *kinds[] = {"parameters", "exp_avg", "exp_avg_sq"};
    size_t N = numel(hf), cols = hf->ndim == 2 ? (size_t)hf->shape[1] : 1, covered = 0;
    memset(mask, 0, N);
    for (size_t i = 0; i < r->pieces.n; i++) {
        const piece *p = &r->pieces.v[i];
        if (p->kind != kind || strcmp(p->name, hf->name) != 0)
            continue;
        size_t n = p->b - p->a;
        if (n > r->tmp_cap) {
            float *t = realloc(r->tmp, sizeof(float) * n);
            if (t == NULL)
                return areal_error_set(err, AREAL_ENOMEM, -1, "checkpoint: out of memory");
            r->tmp = t, r->tmp_cap = n;
        }
        int rc = areal_st_read_f32(&r->files[p->file], p->st, r->tmp, r->tmp_cap, err);
        if (rc != AREAL_OK)
            return rc;
        for (size_t k = p->a; k < p->b; k++) {
            size_t at = k; /* the local slice's element k in the HF tensor */
            if (p->dim == 0)
                at = (k / cols + (size_t)p->start) * cols + k % cols;
            else if (p->dim == 1 && p->len > 0)
                at = (k / (size_t)p->len) * cols + (size_t)p->start + k % (size_t)p->len;
            if (at >= N)
                return areal_error_set(err, AREAL_EIO, -1,
                                       "checkpoint %s: a piece of %s reaches element %zu of %zu "
                                       "(written for another model?)",
                                       r->dir, hf->name, at, N);
            whole[at] = r->tmp[k - p->a];
            covered += !mask[at];
            mask[at] = 1;
        }
    }
    if (covered != N)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "checkpoint %s: %s of %s: %zu of %zu elements in the shards (a "
                               "shard missing, or written for another model?)",
                               r->dir, kinds[kind], hf->name, covered, N);
    return AREAL_OK;
}

/* Scratch for the largest tensor of the list. */
static int scratch(const areal_tensor_spec *ts, size_t n, float **whole, uint8_t **mask,
                   areal_error *err) {
    size_t most = 1;
    for (size_t i = 0; i < n; i++)
        if (numel(&ts[i]) > most)
            most = numel(&ts[i]);
    *whole = malloc(sizeof(float) * most);
    *mask = malloc(most);
    if (*whole == NULL || *mask == NULL) {
        free(*whole), free(*mask);
        *whole = NULL, *mask = NULL;
        return areal_error_set(err, AREAL_ENOMEM, -1, "checkpoint: out of memory");
    }
    return AREAL_OK;
}

int areal_par_ckpt_load_shards(const char *dir, areal_model *m, areal_adamw *adam,
                               areal_error *err) {
    if (adam != NULL)
        memset(adam, 0, sizeof *adam);
    reader r;
    int rc = reader_open(&r, dir, err);
    if (rc != AREAL_OK)
        return rc;
    areal_tensor_spec *all = NULL;
    size_t na = 0;
    float *whole = NULL;
    uint8_t *mask = NULL;
    rc = areal_model_expected_tensors(&m->cfg, &all, &na, err);
    if (rc == AREAL_OK)
        rc = scratch(all, na, &whole, &mask, err);
    if (rc == AREAL_OK && adam != NULL)
        rc = areal_adamw_init(adam, m->n_params, err);
    for (size_t i = 0; rc == AREAL_OK && i < m->n_specs; i++) {
        const areal_tensor_spec *hf = NULL;
        for (size_t j = 0; j < na && hf == NULL; j++)
            if (strcmp(all[j].name, m->specs[i].name) == 0)
                hf = &all[j];
        if (hf == NULL) {
            rc = areal_error_set(err, AREAL_EINVAL, -1, "checkpoint: no tensor %s in the model",
                                 m->specs[i].name);
            break;
        }
        float *dst[3] = {m->params, adam != NULL ? adam->m : NULL, adam != NULL ? adam->v : NULL};
        for (int k = 0; rc == AREAL_OK && k < (adam != NULL ? 3 : 1); k++) {
            rc = assemble(&r, hf, k, whole, mask, err);
            if (rc == AREAL_OK)
                areal_tensor_slice_copy(dst[k] + m->offset[i], whole, hf, &m->slices[i]);
        }
    }
    if (rc == AREAL_OK && adam != NULL)
        adam->step = r.step;
    else if (adam != NULL)
        areal_adamw_free(adam);
    free(whole), free(mask), free(all);
    reader_close(&r);
    return rc;
}

int areal_par_ckpt_load_shards_fsdp(const char *dir, areal_par_fsdp *f, areal_error *err) {
    reader r;
    int rc = reader_open(&r, dir, err);
    if (rc != AREAL_OK)
        return rc;
    size_t nt = 0;
    const areal_tensor_spec *ts = areal_par_fsdp_tensors(f, &nt);
    float *whole = NULL;
    uint8_t *mask = NULL;
    rc = scratch(ts, nt, &whole, &mask, err);
    for (size_t i = 0; rc == AREAL_OK && i < nt; i++)
        for (int k = 0; rc == AREAL_OK && k < 3; k++) {
            rc = assemble(&r, &ts[i], k, whole, mask, err);
            if (rc == AREAL_OK) /* fsdp's which: 0 params, 2 m, 3 v */
                rc = areal_par_fsdp_set_tensor(f, ts[i].name, k == 0 ? 0 : k + 1, whole, err);
        }
    if (rc == AREAL_OK)
        areal_par_fsdp_state(f).adam->step = r.step;
    free(whole), free(mask);
    reader_close(&r);
    return rc;
}
