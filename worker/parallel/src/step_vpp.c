/*
 * step_vpp.c - a parallel step's interleaved-pipeline form (see step.h's
 * areal_par_step_vpp): the rank's model chunks and their moments. The
 * schedule itself is vpp.c; step.c and step_hf.c loop over the chunks.
 */
#include <stdlib.h>
#include <string.h>

#include "areal/parallel/reduce.h"
#include "step_vpp.h"

int areal_par_step_vpp(areal_par_step *s, areal_model *const *chunks, int vpp, areal_error *err) {
    if (vpp < 2)
        return AREAL_OK;
    const char *why = s->kind != AREAL_PAR_ADAMW ? "ZeRO-1 or FSDP (their ranges are over one "
                                                   "shard's buffer; use plain AdamW)"
                      : s->overlap != NULL       ? "the overlapped dp gradient sum"
                      : s->cp.cp != NULL         ? "context parallelism"
                      : s->ep != NULL            ? "expert parallelism"
                      : s->chunks != NULL        ? "a second areal_par_step_vpp"
                      : chunks == NULL || chunks[0] != s->m
                          ? "chunks whose first is not the step's shard"
                          : NULL;
    if (why != NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "parallel step: the interleaved pipeline (vpp %d) is built for "
                               "plain AdamW on megatron's tp / pp / dp shards, not %s",
                               vpp, why);
    s->chunks = calloc((size_t)vpp, sizeof *s->chunks);
    s->cadam = calloc((size_t)vpp, sizeof *s->cadam);
    if (s->chunks == NULL || s->cadam == NULL) {
        free(s->chunks), free(s->cadam);
        s->chunks = NULL, s->cadam = NULL;
        return areal_error_set(err, AREAL_ENOMEM, -1, "parallel step: no memory for %d chunks",
                               vpp);
    }
    int rc = AREAL_OK;
    for (int c = 0; c < vpp; c++) {
        s->chunks[c] = chunks[c];
        areal_par_bind(chunks[c], &s->g);
        if (c > 0 && rc == AREAL_OK)
            rc = areal_adamw_init(&s->cadam[c], chunks[c]->n_params, err);
    }
    s->vpp = vpp;
    if (rc != AREAL_OK)
        areal_par_step_vpp_free(s);
    return rc;
}

void areal_par_step_vpp_free(areal_par_step *s) {
    for (int c = 1; s->cadam != NULL && c < s->vpp; c++)
        areal_adamw_free(&s->cadam[c]);
    free(s->cadam);
    free(s->chunks);
    s->cadam = NULL, s->chunks = NULL, s->vpp = 0;
}

int areal_par_step_n_chunks(const areal_par_step *s) {
    return s->chunks != NULL ? s->vpp : 1;
}

areal_model *areal_par_step_chunk(const areal_par_step *s, int c) {
    return s->chunks != NULL ? s->chunks[c] : s->m;
}

areal_adamw *areal_par_step_chunk_adam(areal_par_step *s, int c) {
    return c > 0 && s->cadam != NULL ? &s->cadam[c] : &s->adam;
}
