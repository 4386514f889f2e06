/*
 * infer_step.h - the one incremental forward behind both KV caches
 * (internal to model_infer.c, the slot cache of generate.h, and
 * model_paged.c, the block tables of paged.h).
 *
 * The KV store is always "blocks": n_blocks blocks of block_tokens positions,
 * position p of a row's sequence at block table[p / block_tokens], row p %
 * block_tokens. The paged cache is that literally; the slot cache is the
 * special case block_tokens = cap with a one-entry table {slot}. So both
 * caches run the same layer body (buffer carving, projections, q/k norm,
 * RoPE, KV write, attention, MLP or MoE) and the same arithmetic, and the
 * engine's tokens equal areal_generate's by construction rather than by two
 * copies kept in step (the road taken before, with a comment asking for it).
 */
#ifndef AREAL_MODEL_INFER_STEP_H
#define AREAL_MODEL_INFER_STEP_H

#include <stdint.h>

#include "areal/error.h"
#include "areal/model/model.h"

typedef struct infer_kv {
    float *k, *v; /* [layer][block][block_tokens][kv_dim] each */
    int n_blocks, block_tokens, kv_dim;
} infer_kv;

/*
 * Runs T new rows through every layer: row t is token tokens[t] at position
 * pos[t] of the sequence whose block table is table[t] (covering positions
 * 0..pos[t]); its key and value are written there and it attends positions
 * 0..pos[t] of that table. Then rows out_rows[0..n_out) go through the final
 * norm and the LM head into logits [n_out, V]. Inputs are trusted (the
 * callers check them). A tp shard runs its local heads and columns and calls
 * the reduction hook after o_proj and down_proj. Returns 0, AREAL_ENOMEM
 * (cache untouched then) or the hook's error.
 */
int infer_run(areal_model *m, const infer_kv *kv, const int32_t *tokens, int T,
              const int32_t *const *table, const int32_t *pos, const int32_t *out_rows, int n_out,
              float *logits, areal_error *err);

#endif
