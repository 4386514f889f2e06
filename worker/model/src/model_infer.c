/*
 * model_infer.c - the KV cache with one slot per sequence and the
 * incremental (inference) forward over it (generate.h).
 *
 * One call handles any mix of prefill and decode. The slot cache is run as
 * a paged cache whose blocks are whole slots (block_tokens = cap, each row's
 * table the one entry {slot}), through infer_step.c, the layer body the
 * paged cache (model_paged.c) uses too; only each sequence's last row goes
 * through the final norm and the LM head. Nothing is saved for a backward.
 * Sharing layer_fwd of model_fwd.c was rejected: it writes the training
 * activation record, which inference must not allocate.
 */
#include <stdlib.h>
#include <string.h>

#include "areal/model/generate.h"
#include "infer_step.h"

int areal_kv_cache_init(areal_kv_cache *c, const areal_model_config *cfg, int n_slots, int cap,
                        areal_error *err) {
    memset(c, 0, sizeof *c);
    if (n_slots < 1 || cap < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "kv cache: %d slots of %d tokens; both must be >= 1", n_slots, cap);
    c->n_layers = cfg->num_layers;
    c->n_slots = n_slots;
    c->cap = cap;
    c->kv_dim = cfg->num_kv_heads * cfg->head_dim;
    size_t n = (size_t)c->n_layers * n_slots * cap * c->kv_dim;
    c->k = malloc(sizeof(float) * (n ? n : 1));
    c->v = malloc(sizeof(float) * (n ? n : 1));
    c->len = calloc((size_t)n_slots, sizeof(int));
    if (c->k == NULL || c->v == NULL || c->len == NULL) {
        areal_kv_cache_free(c);
        return areal_error_set(err, AREAL_ENOMEM, -1,
                               "kv cache: no memory for %d slots of %d tokens (%zu MiB)", n_slots,
                               cap, 2 * n * sizeof(float) >> 20);
    }
    return AREAL_OK;
}

void areal_kv_cache_free(areal_kv_cache *c) {
    free(c->k);
    free(c->v);
    free(c->len);
    memset(c, 0, sizeof *c);
}

static int check_step(const areal_model *m, const areal_kv_cache *c, const int32_t *tokens,
                      const int32_t *cu, const int *slots, int n_seqs, areal_error *err) {
    if (!areal_model_shard_is_whole(&m->cfg, &m->shard)) /* this path runs full-size layers */
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "step: the KV-cache path runs the whole model only; load it "
                               "without a shard (tp, pp and ep 1)");
    if (n_seqs < 1 || n_seqs > c->n_slots || cu[0] != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "step: %d sequences for a cache of %d slots (cu[0] must be 0)",
                               n_seqs, c->n_slots);
    for (int s = 0; s < n_seqs; s++) {
        if (cu[s + 1] <= cu[s])
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "step: sequence %d has no new tokens (cu[%d] = %d, cu[%d] = %d)",
                                   s, s, cu[s], s + 1, cu[s + 1]);
        if (slots[s] < 0 || slots[s] >= c->n_slots)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "step: slot %d of sequence %d is outside [0, %d)", slots[s], s,
                                   c->n_slots);
        for (int r = 0; r < s; r++)
            if (slots[r] == slots[s])
                return areal_error_set(err, AREAL_EINVAL, -1,
                                       "step: sequences %d and %d share slot %d", r, s, slots[s]);
        if (c->len[slots[s]] + (cu[s + 1] - cu[s]) > c->cap)
            return areal_error_set(err, AREAL_ERANGE, -1,
                                   "step: slot %d holds %d tokens; %d more pass its capacity %d",
                                   slots[s], c->len[slots[s]], cu[s + 1] - cu[s], c->cap);
    }
    for (int t = 0; t < cu[n_seqs]; t++)
        if (tokens[t] < 0 || tokens[t] >= m->cfg.vocab_size)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "step: token %d is id %d, outside the vocabulary [0, %d)", t,
                                   tokens[t], m->cfg.vocab_size);
    return AREAL_OK;
}

int areal_model_step(areal_model *m, areal_kv_cache *c, const int32_t *tokens, const int32_t *cu,
                     const int *slots, int n_seqs, float *logits, areal_error *err) {
    int rc = check_step(m, c, tokens, cu, slots, n_seqs, err);
    if (rc != AREAL_OK)
        return rc;
    size_t T = (size_t)cu[n_seqs];
    const int32_t **table = malloc(sizeof *table * T);
    int32_t *pos = malloc(sizeof *pos * T), *ids = malloc(sizeof *ids * (size_t)n_seqs);
    int32_t *last = malloc(sizeof *last * (size_t)n_seqs);
    if (table == NULL || pos == NULL || ids == NULL || last == NULL) {
        free(table);
        free(pos);
        free(ids);
        free(last);
        return areal_error_set(err, AREAL_ENOMEM, -1, "step: no memory for %zu new tokens", T);
    }
    for (int s = 0; s < n_seqs; s++) {
        ids[s] = slots[s]; /* the one-block table of sequence s */
        last[s] = cu[s + 1] - 1;
        for (int t = cu[s]; t < cu[s + 1]; t++) {
            table[t] = &ids[s];
            pos[t] = c->len[slots[s]] + (t - cu[s]);
        }
    }
    infer_kv kv = {c->k, c->v, c->n_slots, c->cap, c->kv_dim};
    rc = infer_run(m, &kv, tokens, (int)T, table, pos, last, n_seqs, logits, err);
    if (rc == AREAL_OK)
        for (int s = 0; s < n_seqs; s++)
            c->len[slots[s]] += cu[s + 1] - cu[s];
    free(table);
    free(pos);
    free(ids);
    free(last);
    return rc;
}
