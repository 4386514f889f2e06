/*
 * model_paged.c - the paged KV cache and the incremental forward over block
 * tables (paged.h): checks the step and hands it to infer_step.c, the layer
 * body it shares with the slot cache of model_infer.c (so the engine's
 * greedy tokens equal areal_generate's by construction, and logprobs agree
 * to fp32 rounding with a training forward).
 */
#include <stdlib.h>
#include <string.h>

#include "areal/model/paged.h"
#include "infer_step.h"

size_t areal_paged_kv_block_bytes(const areal_model_config *cfg, int block_tokens) {
    return (size_t)2 * sizeof(float) * (size_t)cfg->num_layers * (size_t)block_tokens *
           (size_t)cfg->num_kv_heads * (size_t)cfg->head_dim;
}

/* cfg with the shard's local key/value heads: what one rank's cache holds. */
static areal_model_config local_cfg(const areal_model *m) {
    areal_model_config c = m->cfg;
    c.num_kv_heads = m->nkv;
    return c;
}

size_t areal_paged_kv_block_bytes_local(const areal_model *m, int block_tokens) {
    areal_model_config c = local_cfg(m);
    return areal_paged_kv_block_bytes(&c, block_tokens);
}

int areal_paged_kv_init_local(areal_paged_kv *c, const areal_model *m, int n_blocks,
                              int block_tokens, areal_error *err) {
    areal_model_config lc = local_cfg(m);
    return areal_paged_kv_init(c, &lc, n_blocks, block_tokens, err);
}

bool areal_paged_shard_ok(const areal_model_config *cfg, const areal_model_shard *s,
                          areal_error *err) {
    if (areal_model_shard_is_whole(cfg, s))
        return true;
    if (s->pp == 1 && s->ep == 1 && areal_model_shard_etp(s) == 1 && !s->vocab_parallel &&
        !s->sequence_parallel && s->first_layer == 0 && s->n_layers == cfg->num_layers)
        return true;
    areal_error_set(err, AREAL_EINVAL, -1,
                    "paged step: the KV-cache path runs the whole model or a tensor-parallel "
                    "shard (tp only: pp %d, ep %d, etp %d, vocab_parallel %d, sequence_parallel "
                    "%d must be 1, 1, 1, 0, 0); load the shard with only tp and tp_rank set",
                    s->pp, s->ep, areal_model_shard_etp(s), s->vocab_parallel,
                    s->sequence_parallel);
    return false;
}

int areal_paged_kv_init(areal_paged_kv *c, const areal_model_config *cfg, int n_blocks,
                        int block_tokens, areal_error *err) {
    memset(c, 0, sizeof *c);
    if (n_blocks < 1 || block_tokens < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "paged kv: %d blocks of %d tokens; both must be >= 1", n_blocks,
                               block_tokens);
    c->n_layers = cfg->num_layers;
    c->n_blocks = n_blocks;
    c->block_tokens = block_tokens;
    c->kv_dim = cfg->num_kv_heads * cfg->head_dim;
    size_t n = (size_t)c->n_layers * n_blocks * block_tokens * c->kv_dim;
    c->k = malloc(sizeof(float) * (n ? n : 1));
    c->v = malloc(sizeof(float) * (n ? n : 1));
    if (c->k == NULL || c->v == NULL) {
        areal_paged_kv_free(c);
        return areal_error_set(err, AREAL_ENOMEM, -1,
                               "paged kv: no memory for %d blocks of %d tokens (%zu MiB)", n_blocks,
                               block_tokens, 2 * n * sizeof(float) >> 20);
    }
    return AREAL_OK;
}

void areal_paged_kv_free(areal_paged_kv *c) {
    free(c->k);
    free(c->v);
    memset(c, 0, sizeof *c);
}

void areal_paged_kv_copy_block(areal_paged_kv *c, int dst, int src) {
    size_t bs = (size_t)c->block_tokens * c->kv_dim, ls = bs * c->n_blocks;
    for (int l = 0; l < c->n_layers; l++) {
        memcpy(c->k + l * ls + dst * bs, c->k + l * ls + src * bs, sizeof(float) * bs);
        memcpy(c->v + l * ls + dst * bs, c->v + l * ls + src * bs, sizeof(float) * bs);
    }
}

static int check_paged(const areal_model *m, const areal_paged_kv *c, const int32_t *tokens,
                       const int32_t *cu, const areal_paged_seq *seqs, int n_seqs,
                       const int32_t *out_rows, int n_out, areal_error *err) {
    if (!areal_paged_shard_ok(&m->cfg, &m->shard, err))
        return AREAL_EINVAL;
    if (c->kv_dim != m->nkv * m->cfg.head_dim || c->n_layers != m->cfg.num_layers)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "paged step: the cache holds %d layers of kv_dim %d but the model "
                               "(tp rank %d of %d) has %d layers of %d key/value heads x %d; "
                               "size the cache with areal_paged_kv_init_local",
                               c->n_layers, c->kv_dim, m->shard.tp_rank, m->shard.tp,
                               m->cfg.num_layers, m->nkv, m->cfg.head_dim);
    if (n_seqs < 1 || cu[0] != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "paged step: %d sequences (need >= 1) and cu[0] = %d (must be 0)",
                               n_seqs, cu[0]);
    int bt = c->block_tokens;
    for (int s = 0; s < n_seqs; s++) {
        if (cu[s + 1] <= cu[s])
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "paged step: sequence %d has no new tokens (cu[%d] = %d, "
                                   "cu[%d] = %d)",
                                   s, s, cu[s], s + 1, cu[s + 1]);
        const areal_paged_seq *q = &seqs[s];
        long need = (long)q->start + (cu[s + 1] - cu[s]);
        if (q->start < 0 || (long)q->n_table * bt < need)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "paged step: sequence %d needs %ld positions but its table "
                                   "of %d blocks holds %ld (start %d)",
                                   s, need, q->n_table, (long)q->n_table * bt, q->start);
        for (long b = 0; b < (need + bt - 1) / bt; b++)
            if (q->table[b] < 0 || q->table[b] >= c->n_blocks)
                return areal_error_set(err, AREAL_EINVAL, -1,
                                       "paged step: sequence %d block %ld is id %d, outside "
                                       "[0, %d)",
                                       s, b, q->table[b], c->n_blocks);
    }
    for (int t = 0; t < cu[n_seqs]; t++)
        if (tokens[t] < 0 || tokens[t] >= m->cfg.vocab_size)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "paged step: token %d is id %d, outside the vocabulary [0, %d)",
                                   t, tokens[t], m->cfg.vocab_size);
    if (n_out < 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "paged step: n_out %d < 0", n_out);
    for (int i = 0; i < n_out; i++)
        if (out_rows[i] < 0 || out_rows[i] >= cu[n_seqs])
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "paged step: out_rows[%d] = %d is outside [0, %d)", i,
                                   out_rows[i], cu[n_seqs]);
    return AREAL_OK;
}

int areal_model_step_paged(areal_model *m, areal_paged_kv *c, const int32_t *tokens,
                           const int32_t *cu, const areal_paged_seq *seqs, int n_seqs,
                           const int32_t *out_rows, int n_out, float *logits, areal_error *err) {
    int rc = check_paged(m, c, tokens, cu, seqs, n_seqs, out_rows, n_out, err);
    if (rc != AREAL_OK)
        return rc;
    size_t T = (size_t)cu[n_seqs];
    const int32_t **table = malloc(sizeof *table * T);
    int32_t *pos = malloc(sizeof *pos * T);
    if (table == NULL || pos == NULL) {
        free(table);
        free(pos);
        return areal_error_set(err, AREAL_ENOMEM, -1, "paged step: no memory for %zu new tokens",
                               T);
    }
    for (int s = 0; s < n_seqs; s++)
        for (int t = cu[s]; t < cu[s + 1]; t++) {
            table[t] = seqs[s].table;
            pos[t] = seqs[s].start + (t - cu[s]);
        }
    infer_kv kv = {c->k, c->v, c->n_blocks, c->block_tokens, c->kv_dim};
    rc = infer_run(m, &kv, tokens, (int)T, table, pos, out_rows, n_out, logits, err);
    free(table);
    free(pos);
    return rc;
}
