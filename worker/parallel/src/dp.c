/*
 * dp.c - data parallelism's gradient sum over the dp group in buckets, and
 * the global token count the loss divides by (see dp.h).
 */
#include "areal/parallel/dp.h"

#include <stdint.h>
#include <stdlib.h>

int areal_par_global_count(areal_coll *dp, long local, long *out, areal_error *err) {
    int64_t v = local;
    int rc = AREAL_OK;
    if (dp != NULL && areal_coll_size(dp) > 1)
        rc = areal_coll_all_reduce(dp, &v, 1, AREAL_DT_I64, AREAL_SUM, err);
    *out = (long)v;
    return rc;
}

int areal_par_dp_reduce_grads(areal_model *m, areal_coll *dp, size_t bucket, areal_error *err) {
    if (dp == NULL || areal_coll_size(dp) < 2 || m->n_params == 0)
        return AREAL_OK;
    if (bucket == 0)
        bucket = AREAL_PAR_BUCKET_FLOATS;
    size_t nb = (m->n_params + bucket - 1) / bucket;
    areal_coll_work **w = calloc(nb, sizeof *w);
    if (w == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "dp gradient reduction: out of memory");
    int rc = AREAL_OK;
    size_t issued = 0;
    for (; issued < nb; issued++) {
        size_t lo = issued * bucket, n = m->n_params - lo < bucket ? m->n_params - lo : bucket;
        rc = areal_coll_all_reduce_async(dp, m->grads + lo, n, AREAL_DT_F32, AREAL_SUM, &w[issued],
                                         err);
        if (rc != AREAL_OK)
            break;
    }
    /* Every issued handle is waited on, also after a failure; the first error is kept. */
    for (size_t b = 0; b < issued; b++) {
        areal_error e2;
        int r = areal_coll_work_wait(w[b], rc == AREAL_OK ? err : &e2);
        if (rc == AREAL_OK)
            rc = r;
    }
    free(w);
    return rc;
}
