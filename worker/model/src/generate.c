/*
 * generate.c - the batched generation loop of generate.h.
 *
 * All prompts are prefilled in one areal_model_step (packed, one cache slot
 * each); then every step feeds the last token of each still-running sequence,
 * again as one packed call, so finished sequences cost nothing. A sequence
 * ends after a stop token (kept in its output, as SGLang returns it) or after
 * max_new_tokens. Continuous batching of new requests belongs to the rollout
 * server, not here.
 */
#include <stdlib.h>
#include <string.h>

#include "areal/model/generate.h"

void areal_gen_out_free(areal_gen_out *o) {
    free(o->tokens);
    free(o->logprobs);
    memset(o, 0, sizeof *o);
}

static int check(const areal_model *m, const int32_t *const *prompts, const int *lens, int B,
                 const areal_sampling *s, areal_error *err) {
    if (B < 1)
        return areal_error_set(err, AREAL_EINVAL, -1, "generate: %d prompts; need >= 1", B);
    if (!(s->temperature >= 0) || s->top_k < 0 || !(s->top_p > 0 && s->top_p <= 1) ||
        s->max_new_tokens < 0 || s->n_stop < 0 || s->vocab_limit < 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "generate: sampling needs temperature >= 0 (got %g), top_k >= 0 "
                               "(%d), top_p in (0, 1] (%g), max_new_tokens >= 0 (%d)",
                               s->temperature, s->top_k, s->top_p, s->max_new_tokens);
    for (int b = 0; b < B; b++) {
        if (lens[b] < 1)
            return areal_error_set(err, AREAL_EINVAL, -1, "generate: prompt %d is empty", b);
        for (int i = 0; i < lens[b]; i++)
            if (prompts[b][i] < 0 || prompts[b][i] >= m->cfg.vocab_size)
                return areal_error_set(err, AREAL_EINVAL, -1,
                                       "generate: prompt %d token %d is id %d, outside [0, %d)", b,
                                       i, prompts[b][i], m->cfg.vocab_size);
    }
    return AREAL_OK;
}

static bool is_stop(const areal_sampling *s, int32_t tok) {
    for (int i = 0; i < s->n_stop; i++)
        if (s->stop[i] == tok)
            return true;
    return false;
}

int areal_generate(areal_model *m, const int32_t *const *prompts, const int *prompt_lens, int B,
                   const areal_sampling *s, areal_gen_out *out, areal_error *err) {
    memset(out, 0, sizeof *out * (size_t)B);
    int rc = check(m, prompts, prompt_lens, B, s, err);
    if (rc != AREAL_OK)
        return rc;
    int V = m->cfg.vocab_size, max_len = 0, total = 0;
    for (int b = 0; b < B; b++) {
        total += prompt_lens[b];
        max_len = prompt_lens[b] > max_len ? prompt_lens[b] : max_len;
    }
    areal_kv_cache c;
    rc = areal_kv_cache_init(&c, &m->cfg, B, max_len + s->max_new_tokens, err);
    if (rc != AREAL_OK)
        return rc;
    int32_t *tok = malloc(sizeof(int32_t) * ((size_t)total + (size_t)B + 1));
    int32_t *cu = malloc(sizeof(int32_t) * ((size_t)B + 1));
    int *slots = malloc(sizeof(int) * (size_t)B);
    float *logits = malloc(sizeof(float) * (size_t)B * V);
    float *scratch = malloc(sizeof(float) * 2 * (size_t)V);
    areal_rng *rng = malloc(sizeof(areal_rng) * (size_t)B);
    bool oom = !tok || !cu || !slots || !logits || !scratch || !rng;
    for (int b = 0; b < B && !oom && s->max_new_tokens > 0; b++) {
        out[b].tokens = malloc(sizeof(int32_t) * (size_t)s->max_new_tokens);
        out[b].logprobs = malloc(sizeof(float) * (size_t)s->max_new_tokens);
        oom = !out[b].tokens || !out[b].logprobs;
    }
    if (oom) {
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "generate: no memory for %d sequences", B);
        goto done;
    }
    /* prefill */
    int n_act = B;
    cu[0] = 0;
    for (int b = 0; b < B; b++) {
        memcpy(tok + cu[b], prompts[b], sizeof(int32_t) * (size_t)prompt_lens[b]);
        cu[b + 1] = cu[b] + prompt_lens[b];
        slots[b] = b;
        areal_rng_seed(&rng[b], s->seed, (uint64_t)b);
    }
    while (n_act > 0 && s->max_new_tokens > 0) {
        rc = areal_model_step(m, &c, tok, cu, slots, n_act, logits, err);
        if (rc != AREAL_OK)
            goto done;
        int next = 0;
        for (int i = 0; i < n_act; i++) {
            int b = slots[i];
            areal_gen_out *o = &out[b];
            float lp;
            int32_t t = areal_sample(logits + (size_t)i * V, V, s, &rng[b], scratch, &lp);
            o->tokens[o->n] = t;
            o->logprobs[o->n] = lp;
            o->n++;
            o->stopped = is_stop(s, t);
            if (!o->stopped && o->n < s->max_new_tokens) {
                slots[next] = b;
                tok[next] = t;
                next++;
            }
        }
        n_act = next;
        for (int i = 0; i <= n_act; i++)
            cu[i] = i;
    }
done:
    if (rc != AREAL_OK)
        for (int b = 0; b < B; b++)
            areal_gen_out_free(&out[b]);
    free(tok);
    free(cu);
    free(slots);
    free(logits);
    free(scratch);
    free(rng);
    areal_kv_cache_free(&c);
    return rc;
}
