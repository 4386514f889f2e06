/*
 * paged_plan.c - the sub-steps of an engine step on the GPU decode step
 * (areal/gpumodel/paged.h): plain C, no CUDA.
 */
#include <stdlib.h>
#include <string.h>

#include "areal/gpumodel/paged.h"

void areal_gpu_paged_plan_free(areal_gpu_paged_plan *p) {
    free(p->sub_off);
    free(p->tok);
    free(p->pos);
    free(p->seq);
    free(p->slot);
    free(p->table);
    memset(p, 0, sizeof *p);
}

static int check(const int32_t *cu, const areal_paged_seq *seqs, int n_seqs,
                 const int32_t *out_rows, int n_out, const areal_gpu_kv_cfg *kv, int *longest,
                 areal_error *err) {
    if (n_seqs < 1 || n_seqs > kv->max_batch)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU paged step: %d sequences; the cache was made for 1..%d "
                               "(max_batch)",
                               n_seqs, kv->max_batch);
    if (cu[0] != 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "GPU paged step: cu[0] must be 0");
    *longest = 0;
    for (int s = 0; s < n_seqs; s++) {
        int len = cu[s + 1] - cu[s], last = seqs[s].start + len - 1;
        if (len < 1)
            return areal_error_set(err, AREAL_EINVAL, s,
                                   "GPU paged step: sequence %d has no new token", s);
        if (seqs[s].start < 0 || seqs[s].n_table > kv->max_blocks ||
            (long)seqs[s].n_table * kv->block_size <= last)
            return areal_error_set(err, AREAL_EINVAL, s,
                                   "GPU paged step: sequence %d: a table of %d blocks of %d "
                                   "(at most %d blocks) must cover position %d",
                                   s, seqs[s].n_table, kv->block_size, kv->max_blocks, last);
        *longest = len > *longest ? len : *longest;
    }
    int rows = cu[n_seqs];
    for (int k = 0; k < n_out; k++)
        if (out_rows[k] < 0 || out_rows[k] >= rows)
            return areal_error_set(err, AREAL_EINVAL, k,
                                   "GPU paged step: out_rows[%d] = %d is not a row (0..%d)", k,
                                   out_rows[k], rows - 1);
    return AREAL_OK;
}

int areal_gpu_paged_plan_make(const int32_t *tokens, const int32_t *cu, const areal_paged_seq *seqs,
                              int n_seqs, const int32_t *out_rows, int n_out,
                              const areal_gpu_kv_cfg *kv, areal_gpu_paged_plan *p,
                              areal_error *err) {
    memset(p, 0, sizeof *p);
    if (tokens == NULL || cu == NULL || seqs == NULL || kv == NULL || (n_out > 0 && !out_rows))
        return areal_error_set(err, AREAL_EINVAL, -1, "GPU paged step: a NULL argument");
    int longest = 0;
    int rc = check(cu, seqs, n_seqs, out_rows, n_out, kv, &longest, err);
    if (rc != AREAL_OK)
        return rc;
    int rows = cu[n_seqs];
    size_t R = (size_t)rows, mb = (size_t)kv->max_blocks;
    int32_t *slot_of_row = malloc(sizeof(int32_t) * R); /* by the step's row index */
    p->sub_off = calloc((size_t)longest + 1, sizeof *p->sub_off);
    p->tok = malloc(sizeof(int32_t) * R);
    p->pos = malloc(sizeof(int32_t) * R);
    p->seq = malloc(sizeof(int32_t) * R);
    p->slot = malloc(sizeof(int32_t) * R);
    p->table = malloc(sizeof(int32_t) * R * mb);
    if (!slot_of_row || !p->sub_off || !p->tok || !p->pos || !p->seq || !p->slot || !p->table) {
        free(slot_of_row);
        areal_gpu_paged_plan_free(p);
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a plan of %d rows", rows);
    }
    for (size_t r = 0; r < R; r++)
        slot_of_row[r] = -1;
    for (int k = 0; k < n_out; k++) {
        if (slot_of_row[out_rows[k]] >= 0) {
            free(slot_of_row);
            areal_gpu_paged_plan_free(p);
            return areal_error_set(err, AREAL_EINVAL, k,
                                   "GPU paged step: out_rows[%d] = %d repeats an earlier row", k,
                                   out_rows[k]);
        }
        slot_of_row[out_rows[k]] = k;
    }
    p->n_sub = longest;
    p->rows = rows;
    int at = 0;
    for (int j = 0; j < longest; j++) {
        p->sub_off[j] = at;
        for (int s = 0; s < n_seqs; s++) {
            if (cu[s + 1] - cu[s] <= j)
                continue;
            int row = cu[s] + j;
            p->tok[at] = tokens[row];
            p->pos[at] = seqs[s].start + j;
            p->seq[at] = s;
            p->slot[at] = slot_of_row[row];
            int32_t *t = p->table + (size_t)at * mb;
            for (size_t b = 0; b < mb; b++) /* entries past the table: never read (pos < its end) */
                t[b] = b < (size_t)seqs[s].n_table ? seqs[s].table[b] : seqs[s].table[0];
            at++;
        }
    }
    p->sub_off[longest] = at;
    free(slot_of_row);
    return AREAL_OK;
}
