/*
 * generate.h - batched generation on the CPU model: a KV cache with one slot
 * per sequence, an incremental forward (prefill of whole prompts and decode
 * of one token per sequence are the same call), a seeded sampler (greedy,
 * temperature, top-k, top-p) and a generation loop with stop tokens and a
 * token budget.
 *
 * The incremental forward runs the same kernels as the training forward
 * (model_fwd.c) on the new tokens, appends their rotated keys and values to
 * the cache and attends over the cache, so a sampled token's logprob equals
 * what areal_token_logprobs computes from a training forward of the whole
 * sequence (to fp32 rounding; the tests hold it to 1e-5).
 */
#ifndef AREAL_MODEL_GENERATE_H
#define AREAL_MODEL_GENERATE_H

#include <stdbool.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/model/model.h"

/* Keys and values of every layer for n_slots sequences of up to cap tokens. */
typedef struct areal_kv_cache {
    int n_layers, n_slots, cap, kv_dim; /* kv_dim = num_kv_heads * head_dim */
    float *k, *v;                       /* [layer][slot][cap][kv_dim] */
    int *len;                           /* tokens held per slot */
} areal_kv_cache;

/* Allocates an empty cache. Returns 0, AREAL_EINVAL (n_slots or cap < 1) or AREAL_ENOMEM. */
int areal_kv_cache_init(areal_kv_cache *c, const areal_model_config *cfg, int n_slots, int cap,
                        areal_error *err);
void areal_kv_cache_free(areal_kv_cache *c);

/*
 * Feeds new tokens to n_seqs sequences: sequence s owns cache slot slots[s]
 * (distinct) and its tokens are tokens[cu[s] .. cu[s+1]) (at least one),
 * placed after the slot's cached ones. Writes the logits of each sequence's
 * last new token into logits [n_seqs, V] and advances the slots' lengths.
 * Returns 0, AREAL_EINVAL (bad ids, slots or cu), AREAL_ERANGE (a slot would
 * pass cap; nothing changed) or AREAL_ENOMEM.
 */
int areal_model_step(areal_model *m, areal_kv_cache *c, const int32_t *tokens, const int32_t *cu,
                     const int *slots, int n_seqs, float *logits, areal_error *err);

typedef struct areal_sampling {
    float temperature; /* 0: greedy (argmax); > 0: softmax(logits / temperature) */
    int top_k;         /* keep the k most likely tokens; 0: all */
    float top_p;       /* keep the smallest most-likely set with mass >= top_p; 1: all */
    uint64_t seed;     /* sequence i of a batch draws from its own stream (seed, i) */
    int max_new_tokens;
    const int32_t *stop; /* generation ends after any of these (it is kept) */
    int n_stop;
    /* ids >= vocab_limit are never drawn: the padding rows past the tokenizer
     * of a padded vocabulary, masked as serving engines do (their logits count
     * as -inf, in the logprob's normaliser too); 0: every id may be drawn */
    int vocab_limit;
    /* after top-p, keep the candidates whose probability is at least min_p
     * times the largest (SGLang's min-p); 0: off. Ignored when greedy. */
    float min_p;
} areal_sampling;

/* A seeded random stream (splitmix64). */
typedef struct areal_rng {
    uint64_t s;
} areal_rng;

void areal_rng_seed(areal_rng *r, uint64_t seed, uint64_t stream);
/* Uniform in [0, 1) with 24 random bits. */
float areal_rng_uniform(areal_rng *r);

/*
 * Picks the next token from one row of logits [V] under s (scratch holds 2 V
 * floats) and writes its log probability under the distribution it was drawn
 * from: softmax(logits / temperature) restricted to the top-k / top-p / min-p
 * set and renormalised; for greedy, under softmax(logits). Ids at or past
 * s->vocab_limit (when set) take no part. Returns the token id.
 */
int32_t areal_sample(const float *logits, int V, const areal_sampling *s, areal_rng *rng,
                     float *scratch, float *logprob);

typedef struct areal_gen_out {
    int32_t *tokens; /* new tokens, n of them (owned; free with areal_gen_out_free) */
    float *logprobs; /* their logprobs as areal_sample defines them */
    int n;
    bool stopped; /* ended on a stop token (else on max_new_tokens) */
} areal_gen_out;

/*
 * Generates for B prompts (prompts[b] of prompt_lens[b] >= 1 tokens) in one
 * batch: prefill, then one decode step per token for the sequences still
 * running. out[0..B) receive the results. Returns 0, AREAL_EINVAL (bad
 * sampling settings or prompts, naming the field) or AREAL_ENOMEM; on failure
 * out holds nothing to free.
 */
int areal_generate(areal_model *m, const int32_t *const *prompts, const int *prompt_lens, int B,
                   const areal_sampling *s, areal_gen_out *out, areal_error *err);

void areal_gen_out_free(areal_gen_out *o);

#endif
