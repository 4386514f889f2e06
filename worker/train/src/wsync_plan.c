/*
 * wsync_plan.c - see areal/train/wsync_shard.h: which trainer rank sends
 * which slice of which HF tensor, in which bucket, and the control message
 * of each bucket. Pure computation on the config and the shards (no
 * communication), so every rank derives the same plan.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/train/wsync_shard.h"
#include "wsync_internal.h"

typedef struct cand {
    size_t k; /* HF tensor */
    int owner;
    size_t local_index;
    int dim;
    int64_t start, len, local[2];
} cand;

static size_t piece_bytes(const areal_wsync_piece *p, areal_dtype dt) {
    size_t n = 1;
    for (int d = 0; d < p->ndim; d++)
        n *= (size_t)p->local[d];
    return n * areal_dtype_size(dt);
}

static int cmp_cand(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->k != y->k)
        return x->k < y->k ? -1 : 1;
    return x->owner - y->owner; /* stable enough: one slice per (tensor, rank) */
}

/* Overlap of two candidates of one tensor (different dims count as overlapping). */
static bool overlaps(const cand *a, const cand *b) {
    if (a->dim < 0 || b->dim < 0 || a->dim != b->dim)
        return true;
    return a->start < b->start + b->len && b->start < a->start + a->len;
}

/* Orders the taken pieces into buckets, one owner per bucket. */
static int bucketize(areal_wsync_plan *p, areal_wsync_piece *taken, size_t n, size_t limit,
                     areal_error *err) {
    int S = p->n_senders;
    size_t **open = calloc((size_t)S, sizeof *open);
    size_t *open_n = calloc((size_t)S, sizeof *open_n), *open_b = calloc((size_t)S, sizeof *open_b);
    p->pieces = calloc(n ? n : 1, sizeof *p->pieces);
    p->buckets = calloc(n ? n : 1, sizeof *p->buckets);
    bool ok = open && open_n && open_b && p->pieces && p->buckets;
    for (int r = 0; ok && r < S; r++)
        ok = (open[r] = malloc(sizeof **open * (n ? n : 1))) != NULL;
    if (!ok) {
        for (int r = 0; open && r < S; r++)
            free(open[r]);
        free(open);
        free(open_n);
        free(open_b);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for the weight-sync plan");
    }
#define CLOSE(r)                                                                                   \
    do {                                                                                           \
        areal_wsync_bucket *bk = &p->buckets[p->n_buckets++];                                      \
        bk->root = (r);                                                                            \
        bk->first = p->n_pieces;                                                                   \
        bk->n = open_n[r];                                                                         \
        bk->bytes = open_b[r];                                                                     \
        for (size_t j = 0; j < open_n[r]; j++)                                                     \
            p->pieces[p->n_pieces++] = taken[open[r][j]];                                          \
        open_n[r] = open_b[r] = 0;                                                                 \
    } while (0)
    for (size_t i = 0; i < n; i++) {
        int r = taken[i].owner;
        size_t b = piece_bytes(&taken[i], p->dtype);
        if (open_n[r] > 0 && open_b[r] + b > limit)
            CLOSE(r);
        open[r][open_n[r]++] = i;
        open_b[r] += b;
        p->bytes += b;
    }
    for (int r = 0; r < S; r++)
        if (open_n[r] > 0)
            CLOSE(r);
#undef CLOSE
    for (int r = 0; r < S; r++)
        free(open[r]);
    free(open);
    free(open_n);
    free(open_b);
    return AREAL_OK;
}

static int plan_new(const areal_model_config *cfg, int n_senders, areal_dtype dtype,
                    areal_wsync_plan **out, areal_error *err) {
    *out = NULL;
    if (n_senders < 1 || n_senders > 256)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "n_senders = %d: a weight-sync plan needs 1..256 trainer ranks",
                               n_senders);
    if (dtype != AREAL_DT_F32 && dtype != AREAL_DT_BF16 && dtype != AREAL_DT_F16)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "dtype: the weight-sync wire carries F32, BF16 or F16");
    areal_wsync_plan *p = calloc(1, sizeof *p);
    if (p == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    p->n_senders = n_senders;
    p->dtype = dtype;
    int rc = areal_model_expected_tensors(cfg, &p->specs, &p->n_specs, err);
    if (rc != AREAL_OK) {
        free(p);
        return rc;
    }
    *out = p;
    return AREAL_OK;
}

int areal_wsync_plan_whole(const areal_model_config *cfg, int n_senders, areal_dtype dtype,
                           size_t bucket_bytes, areal_wsync_plan **out, areal_error *err) {
    areal_wsync_plan *p;
    int rc = plan_new(cfg, n_senders, dtype, &p, err);
    if (rc != AREAL_OK)
        return rc;
    areal_wsync_piece *taken = calloc(p->n_specs ? p->n_specs : 1, sizeof *taken);
    if (taken == NULL) {
        areal_wsync_plan_free(p);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    }
    for (size_t k = 0; k < p->n_specs; k++) {
        const areal_tensor_spec *s = &p->specs[k];
        taken[k] = (areal_wsync_piece){
            .name = s->name, .ndim = s->ndim, .dim = -1, .owner = 0, .local_index = k};
        for (int d = 0; d < s->ndim; d++)
            taken[k].full[d] = taken[k].local[d] = s->shape[d];
    }
    rc = bucketize(p, taken, p->n_specs, bucket_bytes ? bucket_bytes : (size_t)1 << 30, err);
    free(taken);
    if (rc != AREAL_OK) {
        areal_wsync_plan_free(p);
        return rc;
    }
    *out = p;
    return AREAL_OK;
}

/* Every rank's slices as candidates, sorted by HF tensor then rank. */
static int candidates(const areal_model_config *cfg, const areal_wsync_plan *p,
                      const areal_model_shard *shards, cand **out, size_t *n_out,
                      areal_error *err) {
    size_t cap = 0, n = 0;
    cand *c = NULL;
    for (int r = 0; r < p->n_senders; r++) {
        areal_tensor_spec *sp = NULL;
        areal_tensor_slice *sl = NULL;
        size_t ns = 0;
        int rc = areal_model_shard_tensors(cfg, &shards[r], &sp, &sl, &ns, err);
        if (rc != AREAL_OK) {
            free(c);
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            return areal_error_set(err, rc, -1, "shards[%d]: %s", r, why);
        }
        size_t k = 0; /* the shard's list is a subset of the HF list in its order */
        for (size_t i = 0; i < ns; i++) {
            while (k < p->n_specs && strcmp(p->specs[k].name, sp[i].name) != 0)
                k++;
            if (k == p->n_specs) {
                free(sp);
                free(sl);
                free(c);
                return areal_error_set(err, AREAL_EINVAL, -1,
                                       "shards[%d]: tensor %s is not in the model's HF list", r,
                                       sp[i].name);
            }
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                cand *g = realloc(c, cap * sizeof *c);
                if (g == NULL) {
                    free(sp);
                    free(sl);
                    free(c);
                    return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
                }
                c = g;
            }
            c[n++] = (cand){.k = k,
                            .owner = r,
                            .local_index = i,
                            .dim = sl[i].dim,
                            .start = sl[i].dim < 0 ? 0 : sl[i].start,
                            .len = sl[i].dim < 0 ? 0 : sl[i].len,
                            .local = {sp[i].shape[0], sp[i].ndim > 1 ? sp[i].shape[1] : 0}};
        }
        free(sp);
        free(sl);
    }
    qsort(c, n, sizeof *c, cmp_cand);
    *out = c;
    *n_out = n;
    return AREAL_OK;
}

int areal_wsync_plan_build(const areal_model_config *cfg, const areal_model_shard *shards,
                           int n_senders, areal_dtype dtype, size_t bucket_bytes,
                           areal_wsync_plan **out, areal_error *err) {
    areal_wsync_plan *p;
    int rc = plan_new(cfg, n_senders, dtype, &p, err);
    if (rc != AREAL_OK)
        return rc;
    cand *c = NULL;
    size_t nc = 0;
    rc = candidates(cfg, p, shards, &c, &nc, err);
    areal_wsync_piece *taken = rc == AREAL_OK ? calloc(nc ? nc : 1, sizeof *taken) : NULL;
    if (rc == AREAL_OK && taken == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    size_t nt = 0;
    for (size_t i = 0, k = 0; rc == AREAL_OK && k < p->n_specs; k++) {
        /* the candidates of tensor k: keep the ones that overlap nothing kept (the first
         * holder, the lowest rank, wins: replicas are sent once), then check coverage */
        size_t from = nt;
        const areal_tensor_spec *s = &p->specs[k];
        bool whole = false;
        int64_t covered = 0;
        for (; i < nc && c[i].k == k; i++) {
            bool clash = false;
            for (size_t j = from; j < nt && !clash; j++) {
                cand kept = {.dim = taken[j].dim,
                             .start = taken[j].offset,
                             .len = taken[j].dim < 0 ? 0 : taken[j].local[taken[j].dim]};
                clash = overlaps(&kept, &c[i]);
            }
            if (clash)
                continue;
            areal_wsync_piece *t = &taken[nt++];
            *t = (areal_wsync_piece){.name = s->name,
                                     .ndim = s->ndim,
                                     .full = {s->shape[0], s->ndim > 1 ? s->shape[1] : 0},
                                     .local = {c[i].local[0], c[i].local[1]},
                                     .dim = c[i].dim,
                                     .offset = c[i].start,
                                     .owner = c[i].owner,
                                     .local_index = c[i].local_index};
            whole = whole || c[i].dim < 0;
            covered += c[i].len;
        }
        int d = nt > from && taken[from].dim > 0 ? 1 : 0;
        if (nt == from || (!whole && covered != s->shape[d]))
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "the shards do not cover tensor %s: %s %lld of %lld are held; "
                                 "every part of the policy needs a trainer rank holding it",
                                 s->name, d == 1 ? "columns" : "rows", (long long)covered,
                                 (long long)s->shape[d]);
    }
    if (rc == AREAL_OK)
        rc = bucketize(p, taken, nt, bucket_bytes ? bucket_bytes : (size_t)1 << 30, err);
    free(taken);
    free(c);
    if (rc != AREAL_OK) {
        areal_wsync_plan_free(p);
        return rc;
    }
    *out = p;
    return AREAL_OK;
}

void areal_wsync_plan_free(areal_wsync_plan *p) {
    if (p == NULL)
        return;
    free(p->specs);
    free(p->pieces);
    free(p->buckets);
    free(p);
}

static const char *torch_name(areal_dtype dt) {
    return dt == AREAL_DT_BF16 ? "bfloat16" : dt == AREAL_DT_F16 ? "float16" : "float32";
}

static json_t *dims_json(const int64_t *v, int n) {
    json_t *a = json_array();
    for (int d = 0; d < n; d++)
        json_array_append_new(a, json_integer(v[d]));
    return a;
}

json_t *wsync_plan_bucket_obj(const areal_wsync_plan *p, size_t b, const char *group,
                              bool abort_all, const char *version) {
    const areal_wsync_bucket *bk = &p->buckets[b];
    json_t *names = json_array(), *dtypes = json_array(), *shapes = json_array(),
           *dims = json_array(), *offs = json_array(), *full = json_array();
    for (size_t i = bk->first; i < bk->first + bk->n; i++) {
        const areal_wsync_piece *t = &p->pieces[i];
        json_array_append_new(names, json_string(t->name));
        json_array_append_new(dtypes, json_string(torch_name(p->dtype)));
        json_array_append_new(shapes, dims_json(t->local, t->ndim));
        json_array_append_new(dims, json_integer(t->dim));
        json_array_append_new(offs, json_integer(t->offset));
        json_array_append_new(full, dims_json(t->full, t->ndim));
    }
    json_t *j =
        json_pack("{s:o,s:o,s:o,s:s,s:b,s:b,s:i,s:i,s:o,s:o,s:o}", "names", names, "dtypes", dtypes,
                  "shapes", shapes, "group_name", group, "flush_cache", 1, "abort_all_requests",
                  abort_all, "src_rank", bk->root, "n_senders", p->n_senders, "slice_dims", dims,
                  "slice_offsets", offs, "full_shapes", full);
    if (j && version)
        json_object_set_new(j, "weight_version", json_string(version));
    return j;
}

int areal_wsync_plan_bucket_json(const areal_wsync_plan *p, size_t b, const char *group,
                                 bool abort_all, const char *version, char **json,
                                 areal_error *err) {
    *json = NULL;
    if (b >= p->n_buckets)
        return areal_error_set(err, AREAL_EINVAL, -1, "bucket %zu: the plan has %zu", b,
                               p->n_buckets);
    json_t *j = wsync_plan_bucket_obj(p, b, group, abort_all, version);
    *json = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return *json ? AREAL_OK : areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
}
