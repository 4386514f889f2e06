/*
 * server_wslice.c - see server_wslice.h: slices of a sharded sender landing
 * in the staging copy.
 *
 * Each spec being assembled keeps one mark per row (or column) of its split
 * dimension, so a slice that overlaps one already received is refused (a
 * sender bug would otherwise be counted as progress) and the spec counts as
 * seen exactly when every row has arrived. Road not taken: a per-spec count
 * of received elements (a gap and an overlap of equal size would pass).
 */
#include "server_wslice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct wslice_spec {
    int dim;             /* the split dimension of the slices received, -2: none yet */
    int64_t got, need;   /* rows / columns received of need */
    unsigned char *mark; /* [need] */
} wslice_spec;

struct wslice_state {
    size_t n;
    wslice_spec *t;
};

void wslice_req_free(wslice_req *q) {
    free(q->dims);
    free(q->offs);
    free(q->full);
    free(q->full_ndim);
    memset(q, 0, sizeof *q);
}

int wslice_parse(json_t *j, size_t n, wslice_req *q, char *msg, size_t cap) {
    memset(q, 0, sizeof *q);
    q->n_senders = 1;
    static const char *const f[] = {"src_rank", "n_senders", "slice_dims", "slice_offsets",
                                    "full_shapes"};
    json_t *v[5];
    int present = 0;
    for (int i = 0; i < 5; i++)
        present += (v[i] = json_object_get(j, f[i])) != NULL && !json_is_null(v[i]);
    if (present == 0)
        return 0;
    for (int i = 0; i < 5; i++)
        if (v[i] == NULL || json_is_null(v[i])) {
            snprintf(msg, cap,
                     "%s is missing: a sharded bucket names src_rank, n_senders, slice_dims, "
                     "slice_offsets and full_shapes together (or none of them for full tensors "
                     "from rank 0)",
                     f[i]);
            return -1;
        }
    if (!json_is_integer(v[1]) || json_integer_value(v[1]) < 1 ||
        json_integer_value(v[1]) > AREAL_COMM_MAX_WORLD) {
        snprintf(msg, cap, "n_senders must be the number of trainer ranks (>= 1)");
        return -1;
    }
    q->n_senders = (int)json_integer_value(v[1]);
    if (!json_is_integer(v[0]) || json_integer_value(v[0]) < 0 ||
        json_integer_value(v[0]) >= q->n_senders) {
        snprintf(msg, cap, "src_rank must be a trainer rank, 0..n_senders-1 = 0..%d",
                 q->n_senders - 1);
        return -1;
    }
    q->src_rank = (int)json_integer_value(v[0]);
    for (int i = 2; i < 5; i++)
        if (!json_is_array(v[i]) || json_array_size(v[i]) != n) {
            snprintf(msg, cap, "%s must be an array with one entry per name (%zu)", f[i], n);
            return -1;
        }
    q->sharded = true;
    q->dims = calloc(n, sizeof *q->dims);
    q->offs = calloc(n, sizeof *q->offs);
    q->full = calloc(n, sizeof *q->full);
    q->full_ndim = calloc(n, sizeof *q->full_ndim);
    if (!q->dims || !q->offs || !q->full || !q->full_ndim) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(v[2], i), *o = json_array_get(v[3], i),
               *fs = json_array_get(v[4], i);
        if (!json_is_integer(d) || json_integer_value(d) < -1 || json_integer_value(d) > 1) {
            snprintf(msg, cap, "slice_dims[%zu] must be -1 (whole), 0 (rows) or 1 (columns)", i);
            return -1;
        }
        if (!json_is_integer(o) || json_integer_value(o) < 0) {
            snprintf(msg, cap, "slice_offsets[%zu] must be an integer >= 0", i);
            return -1;
        }
        if (!json_is_array(fs) || json_array_size(fs) < 1 || json_array_size(fs) > 2) {
            snprintf(msg, cap, "full_shapes[%zu] must be the HF tensor's shape (1 or 2 sizes)", i);
            return -1;
        }
        q->dims[i] = (int)json_integer_value(d);
        q->offs[i] = json_integer_value(o);
        q->full_ndim[i] = (int)json_array_size(fs);
        for (int k = 0; k < q->full_ndim[i]; k++) {
            json_t *x = json_array_get(fs, (size_t)k);
            if (!json_is_integer(x) || json_integer_value(x) < 0) {
                snprintf(msg, cap, "full_shapes[%zu] must hold sizes >= 0", i);
                return -1;
            }
            q->full[i][k] = json_integer_value(x);
        }
        if (q->dims[i] >= q->full_ndim[i]) {
            snprintf(msg, cap, "slice_dims[%zu] = %d but full_shapes[%zu] has %d dims", i,
                     q->dims[i], i, q->full_ndim[i]);
            return -1;
        }
    }
    return 0;
}

void wslice_group_free(wgroup *g) {
    for (int i = 0; i < g->n_src; i++)
        areal_pg_destroy(g->src[i]);
    free(g->src);
    g->src = NULL;
    g->n_src = 0;
}

areal_pg *wslice_group(areal_rollout_server *s, wgroup *g, const wslice_req *q, char *msg,
                       size_t cap) {
    (void)s;
    if (!q->sharded || (q->src_rank == 0 && q->n_senders == 1))
        return g->pg;
    int world = areal_comm_world(g->comm);
    if (q->n_senders >= world) {
        snprintf(msg, cap,
                 "n_senders = %d but the group has %d ranks: the servers are ranks n_senders.. "
                 "of it",
                 q->n_senders, world);
        return NULL;
    }
    if (g->n_src < q->n_senders) {
        areal_pg **a = realloc(g->src, sizeof *a * (size_t)q->n_senders);
        if (a == NULL) {
            snprintf(msg, cap, "out of memory");
            return NULL;
        }
        memset(a + g->n_src, 0, sizeof *a * (size_t)(q->n_senders - g->n_src));
        g->src = a;
        g->n_src = q->n_senders;
    }
    if (g->src[q->src_rank] != NULL)
        return g->src[q->src_rank];
    int n = 1 + world - q->n_senders;
    int *ranks = malloc(sizeof *ranks * (size_t)n);
    if (ranks == NULL) {
        snprintf(msg, cap, "out of memory");
        return NULL;
    }
    ranks[0] = q->src_rank;
    for (int i = 1; i < n; i++)
        ranks[i] = q->n_senders + i - 1;
    char name[AREAL_COMM_GROUP_NAME_MAX];
    snprintf(name, sizeof name, "%.50s.src%d", g->name, q->src_rank);
    areal_error e;
    int rc = areal_comm_group(g->comm, name, ranks, n, &g->src[q->src_rank], &e);
    free(ranks);
    if (rc != AREAL_OK) {
        g->src[q->src_rank] = NULL;
        snprintf(msg, cap, "cannot build group %s with sender rank %d: %s", name, q->src_rank,
                 e.msg);
        return NULL;
    }
    return g->src[q->src_rank];
}

void wslice_drop(areal_rollout_server *s) {
    if (s->wslice == NULL)
        return;
    for (size_t k = 0; k < s->wslice->n; k++)
        free(s->wslice->t[k].mark);
    free(s->wslice->t);
    free(s->wslice);
    s->wslice = NULL;
}

static wslice_spec *spec_state(areal_rollout_server *s, int k) {
    if (s->wslice == NULL) {
        s->wslice = calloc(1, sizeof *s->wslice);
        if (s->wslice == NULL)
            return NULL;
        s->wslice->n = s->staging.n_specs;
        s->wslice->t = calloc(s->wslice->n, sizeof *s->wslice->t);
        if (s->wslice->t == NULL) {
            free(s->wslice);
            s->wslice = NULL;
            return NULL;
        }
        for (size_t i = 0; i < s->wslice->n; i++)
            s->wslice->t[i].dim = -2;
    }
    return &s->wslice->t[k];
}

int wslice_land(areal_rollout_server *s, int k, const wslice_req *q, size_t i, areal_dtype dt,
                const int64_t *shape, int ndim, const void *src, char *msg, size_t cap) {
    const areal_tensor_spec *sp = &s->staging.specs[k];
    const char *nm = sp->name;
    bool full_ok = q->full_ndim[i] == sp->ndim;
    for (int d = 0; full_ok && d < sp->ndim; d++)
        full_ok = q->full[i][d] == sp->shape[d];
    if (!full_ok) {
        snprintf(msg, cap,
                 "full_shapes[%zu] of tensor %.100s is [%lld, %lld] but the model's is [%lld, "
                 "%lld]",
                 i, nm, (long long)q->full[i][0],
                 (long long)(q->full_ndim[i] > 1 ? q->full[i][1] : 0), (long long)sp->shape[0],
                 (long long)(sp->ndim > 1 ? sp->shape[1] : 0));
        return -1;
    }
    int dim = q->dims[i];
    bool local_ok = ndim == sp->ndim;
    for (int d = 0; local_ok && d < ndim; d++)
        local_ok = d == dim ? q->offs[i] + shape[d] <= sp->shape[d] : shape[d] == sp->shape[d];
    if (!local_ok || (dim < 0 && q->offs[i] != 0)) {
        snprintf(msg, cap,
                 "tensor %.100s: shapes[%zu] with slice_dims %d and slice_offsets %lld does not "
                 "fit inside full shape [%lld, %lld]",
                 nm, i, dim, (long long)q->offs[i], (long long)sp->shape[0],
                 (long long)(sp->ndim > 1 ? sp->shape[1] : 0));
        return -1;
    }
    wslice_spec *st = spec_state(s, k);
    if (st == NULL) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    int sd = dim < 0 ? 0 : dim; /* a whole tensor marks every row */
    int64_t lo = dim < 0 ? 0 : q->offs[i], len = dim < 0 ? sp->shape[0] : shape[dim];
    if (st->dim == -2) {
        st->dim = sd;
        st->need = sp->shape[sd];
        st->mark = calloc((size_t)(st->need ? st->need : 1), 1);
        if (st->mark == NULL) {
            st->dim = -2;
            snprintf(msg, cap, "out of memory");
            return -1;
        }
    } else if (st->dim != sd) {
        snprintf(msg, cap,
                 "slice_dims[%zu] = %d for tensor %.100s, whose earlier slices split dim %d", i,
                 dim, nm, st->dim);
        return -1;
    }
    for (int64_t r = lo; r < lo + len; r++)
        if (st->mark[r]) {
            snprintf(msg, cap,
                     "tensor %.100s: the slice at slice_offsets[%zu] = %lld overlaps one already "
                     "received (index %lld of dim %d)",
                     nm, i, (long long)q->offs[i], (long long)r, sd);
            return -1;
        }
    float *dst = s->staging.params + s->staging.offset[k];
    size_t esz = areal_dtype_size(dt);
    if (sd == 0 || sp->ndim == 1) { /* rows: one contiguous block */
        int64_t row = sp->ndim > 1 ? sp->shape[1] : 1;
        areal_dtype_to_f32(dt, src, dst + lo * row, (size_t)(len * row));
    } else { /* columns: one run per row */
        for (int64_t r = 0; r < sp->shape[0]; r++)
            areal_dtype_to_f32(dt, (const char *)src + (size_t)(r * len) * esz,
                               dst + r * sp->shape[1] + lo, (size_t)len);
    }
    for (int64_t r = lo; r < lo + len; r++)
        st->mark[r] = 1;
    st->got += len;
    if (st->got == st->need)
        s->staging_seen[k] = 1;
    return 0;
}
