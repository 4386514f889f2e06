/*
 * warmup.c - supervised warm-up and greedy accuracy on the synthetic task
 * (see warmup.h). Batches are packed (no padding), the loss reads only the
 * positions that predict an answer token, and the optimizer state is local:
 * RL starts with a fresh AdamW, as a trainer loading an SFT checkpoint does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/generate.h"
#include "areal/model/heads.h"
#include "areal/model/optim.h"
#include "areal/train/tiny.h"
#include "areal/train/warmup.h"

int areal_synth_encode(const areal_tokenizer *tok, int32_t eos, const areal_synth_item *it,
                       areal_synth_tokens *out, areal_error *err) {
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = areal_tokenizer_encode(tok, it->question, strlen(it->question), &ids, &n, err);
    if (rc != AREAL_OK)
        return rc;
    if (n < 1 || n > sizeof out->prompt / sizeof *out->prompt) {
        free(ids);
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "synthetic problem \"%s\" encodes to %zu tokens", it->question, n);
    }
    memcpy(out->prompt, ids, n * sizeof *ids);
    out->n_prompt = (int)n;
    free(ids);
    char a[32];
    snprintf(a, sizeof a, "%ld", it->answer);
    if ((rc = areal_tokenizer_encode(tok, a, strlen(a), &ids, &n, err)) != AREAL_OK)
        return rc;
    if (n + 1 > sizeof out->answer / sizeof *out->answer) {
        free(ids);
        return areal_error_set(err, AREAL_EINVAL, -1, "answer %ld is too long", it->answer);
    }
    memcpy(out->answer, ids, n * sizeof *ids);
    out->answer[n] = eos;
    out->n_answer = (int)n + 1;
    free(ids);
    return AREAL_OK;
}

static uint64_t next_rand(uint64_t *x) {
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 33;
}

int areal_warmup_run(areal_model *m, const areal_tokenizer *tok, const areal_synth_item *train,
                     size_t n, const areal_warmup_cfg *cfg, double *final_loss, areal_error *err) {
    if (n == 0 || cfg->batch < 1 || cfg->batch > 1024 || cfg->steps < 0 || !(cfg->lr > 0))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "warm-up: needs problems, batch 1..1024, steps >= 0 and lr > 0");
    int32_t eos = areal_tokenizer_token_id(tok, AREAL_TINY_EOS);
    if (eos < 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "warm-up: the tokenizer has no %s",
                               AREAL_TINY_EOS);
    int V = m->cfg.vocab_size, cap = cfg->batch * 48;
    int32_t *tokens = malloc((size_t)cap * sizeof *tokens);
    int32_t *targets = malloc((size_t)cap * sizeof *targets);
    int32_t *cu = malloc(((size_t)cfg->batch + 1) * sizeof *cu);
    float *dlogits = malloc((size_t)cap * (size_t)V * sizeof *dlogits);
    areal_adamw opt = {0};
    int rc = tokens && targets && cu && dlogits
                 ? areal_adamw_init(&opt, m->n_params, err)
                 : areal_error_set(err, AREAL_ENOMEM, -1, "warm-up: no memory");
    areal_adamw_cfg oc = {cfg->lr, 0.9, 0.999, 1e-8, 0.01};
    uint64_t x = cfg->seed;
    for (int step = 0; step < cfg->steps && rc == AREAL_OK; step++) {
        int T = 0;
        cu[0] = 0;
        for (int b = 0; b < cfg->batch && rc == AREAL_OK; b++) {
            areal_synth_tokens e;
            rc = areal_synth_encode(tok, eos, &train[next_rand(&x) % n], &e, err);
            for (int i = 0; rc == AREAL_OK && i < e.n_prompt; i++, T++) {
                tokens[T] = e.prompt[i];
                targets[T] = i == e.n_prompt - 1 ? e.answer[0] : -1;
            }
            for (int i = 0; rc == AREAL_OK && i < e.n_answer; i++, T++) {
                tokens[T] = e.answer[i];
                targets[T] = i + 1 < e.n_answer ? e.answer[i + 1] : -1;
            }
            cu[b + 1] = T;
        }
        if (rc != AREAL_OK)
            break;
        areal_batch batch = {tokens, cu, T, cfg->batch};
        areal_acts acts;
        double loss = 0;
        areal_model_zero_grad(m);
        if ((rc = areal_model_forward(m, &batch, &acts, err)) != AREAL_OK)
            break;
        rc = areal_cross_entropy(m->pool, acts.logits, T, V, targets, &loss, dlogits, err);
        if (rc == AREAL_OK)
            rc = areal_model_backward(m, &acts, dlogits, err);
        areal_acts_free(&acts);
        if (rc != AREAL_OK)
            break;
        areal_clip_grad_norm(m->grads, m->n_params, 1.0);
        areal_adamw_step(&opt, &oc, cfg->lr, m->params, m->grads, m->pool);
        if (final_loss)
            *final_loss = loss;
    }
    areal_model_zero_grad(m);
    areal_adamw_free(&opt);
    free(tokens);
    free(targets);
    free(cu);
    free(dlogits);
    return rc;
}

int areal_synth_accuracy(areal_model *m, const areal_tokenizer *tok, const areal_synth_item *items,
                         size_t n, double *acc, areal_error *err) {
    *acc = 0;
    if (n == 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "accuracy of no problems");
    int32_t eos = areal_tokenizer_token_id(tok, AREAL_TINY_EOS);
    areal_synth_tokens *e = calloc(n, sizeof *e);
    const int32_t **prompts = calloc(n, sizeof *prompts);
    int *lens = calloc(n, sizeof *lens);
    areal_gen_out *out = calloc(n, sizeof *out);
    int rc = e && prompts && lens && out
                 ? AREAL_OK
                 : areal_error_set(err, AREAL_ENOMEM, -1, "accuracy: no memory");
    for (size_t i = 0; i < n && rc == AREAL_OK; i++) {
        rc = areal_synth_encode(tok, eos, &items[i], &e[i], err);
        prompts[i] = e[i].prompt;
        lens[i] = e[i].n_prompt;
    }
    areal_sampling s = {0};
    s.top_p = 1;
    s.max_new_tokens = 8;
    s.stop = &eos;
    s.n_stop = 1;
    /* One batch per 256 problems bounds the KV cache of areal_generate. */
    size_t right = 0;
    for (size_t at = 0; at < n && rc == AREAL_OK; at += 256) {
        int B = (int)(n - at < 256 ? n - at : 256);
        rc = areal_generate(m, prompts + at, lens + at, B, &s, out + at, err);
        for (int i = 0; rc == AREAL_OK && i < B; i++) {
            const areal_gen_out *o = &out[at + (size_t)i];
            right +=
                o->n == e[at + (size_t)i].n_answer &&
                memcmp(o->tokens, e[at + (size_t)i].answer, (size_t)o->n * sizeof(int32_t)) == 0;
            areal_gen_out_free(&out[at + (size_t)i]);
        }
    }
    if (rc == AREAL_OK)
        *acc = (double)right / (double)n;
    free(e);
    free(prompts);
    free(lens);
    free(out);
    return rc;
}
