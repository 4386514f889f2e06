/*
 * test_generate.c - generation on the CPU model: greedy decoding matches
 * transformers' generate token for token (Qwen2, Qwen3, Qwen3-MoE, Qwen2-MoE,
 * Llama);
 * sampled tokens' logprobs equal the training forward's within 1e-5; draws
 * are reproducible per seed and independent of the rest of the batch; stop
 * tokens, top-k and top-p behave as specified; the KV cache refuses overflow.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "areal/model/generate.h"
#include "areal/model/heads.h"
#include "model_ref_util.h"
#include "model_test_util.h"

static const char *ARCHS[] = {"ref-qwen2", "ref-qwen3", "ref-qwen3-moe", "ref-qwen2-moe",
                              "ref-llama"};

typedef struct gen_case {
    areal_model m;
    areal_st_file ref;
    int32_t *prompt[2], *want[2];
    int plen[2], wlen[2];
} gen_case;

static void open_gen(gen_case *g, const char *name) {
    char dir[256], file[300];
    areal_error err;
    snprintf(dir, sizeof dir, FIX "%s", name);
    snprintf(file, sizeof file, "%s/ref.safetensors", dir);
    if (areal_model_load(&g->m, dir, NULL, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    if (areal_st_open(file, &g->ref, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    for (int i = 0; i < 2; i++) {
        char k[32];
        size_t n = 0;
        snprintf(k, sizeof k, "gen.prompt%d", i);
        g->prompt[i] = ref_i32(&g->ref, k, &n);
        g->plen[i] = (int)n;
        snprintf(k, sizeof k, "gen.out%d", i);
        g->want[i] = ref_i32(&g->ref, k, &n);
        g->wlen[i] = (int)n;
        assert_non_null(g->prompt[i]);
        assert_non_null(g->want[i]);
    }
}

static void close_gen(gen_case *g) {
    for (int i = 0; i < 2; i++) {
        free(g->prompt[i]);
        free(g->want[i]);
    }
    areal_st_close(&g->ref);
    areal_model_free(&g->m);
}

static void gen(gen_case *g, int B, const areal_sampling *s, areal_gen_out *out) {
    areal_error err;
    const int32_t *p[2] = {g->prompt[0], g->prompt[1]};
    if (areal_generate(&g->m, p, g->plen, B, s, out, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
}

/* Training-forward logprobs (at temperature) of o's tokens after prompt i. */
static double max_logprob_gap(gen_case *g, int i, const areal_gen_out *o, float temperature) {
    int T = g->plen[i] + o->n, V = g->m.cfg.vocab_size;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)T * 2), *tgt = tok + T;
    float *lp = malloc(sizeof(float) * (size_t)T);
    assert_non_null(tok);
    assert_non_null(lp);
    memcpy(tok, g->prompt[i], sizeof(int32_t) * (size_t)g->plen[i]);
    memcpy(tok + g->plen[i], o->tokens, sizeof(int32_t) * (size_t)o->n);
    for (int t = 0; t < T; t++)
        tgt[t] = t + 1 < T ? tok[t + 1] : -1;
    int32_t cu[2] = {0, T};
    areal_batch b = {tok, cu, T, 1};
    areal_acts a;
    areal_error err;
    if (areal_model_forward(&g->m, &b, &a, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    areal_token_logprobs(NULL, a.logits, T, V, tgt, temperature, lp, NULL);
    double gap = 0;
    for (int j = 0; j < o->n; j++) {
        double d = fabs((double)lp[g->plen[i] - 1 + j] - o->logprobs[j]);
        gap = d > gap ? d : gap;
    }
    areal_acts_free(&a);
    free(tok);
    free(lp);
    return gap;
}

static void greedy_matches_transformers(void **s) {
    (void)s;
    for (size_t k = 0; k < sizeof ARCHS / sizeof ARCHS[0]; k++) {
        gen_case g;
        open_gen(&g, ARCHS[k]);
        areal_sampling sp = {.temperature = 0, .top_p = 1, .max_new_tokens = g.wlen[0]};
        areal_gen_out out[2];
        gen(&g, 2, &sp, out);
        for (int i = 0; i < 2; i++) {
            assert_int_equal(out[i].n, g.wlen[i]);
            assert_false(out[i].stopped);
            for (int j = 0; j < g.wlen[i]; j++)
                if (out[i].tokens[j] != g.want[i][j])
                    fail_msg("%s prompt %d token %d: %d, transformers %d", ARCHS[k], i, j,
                             out[i].tokens[j], g.want[i][j]);
            double gap = max_logprob_gap(&g, i, &out[i], 1.0f);
            if (!(gap <= 1e-5))
                fail_msg("%s greedy logprob differs from the training forward by %g", ARCHS[k],
                         gap);
            areal_gen_out_free(&out[i]);
        }
        close_gen(&g);
    }
}

static void sampled_logprobs_equal_training_forward(void **s) {
    (void)s;
    for (size_t k = 0; k < sizeof ARCHS / sizeof ARCHS[0]; k++) {
        gen_case g;
        open_gen(&g, ARCHS[k]);
        areal_sampling sp = {.temperature = 0.8f, .top_p = 1, .seed = 11, .max_new_tokens = 12};
        areal_gen_out out[2];
        gen(&g, 2, &sp, out);
        double worst = 0;
        for (int i = 0; i < 2; i++) {
            assert_int_equal(out[i].n, 12);
            double gap = max_logprob_gap(&g, i, &out[i], 0.8f);
            worst = gap > worst ? gap : worst;
            areal_gen_out_free(&out[i]);
        }
        print_message("%s: sampled logprob vs training forward, max |diff| %.2e\n", ARCHS[k],
                      worst);
        if (!(worst <= 1e-5))
            fail_msg("%s: sampled logprobs differ from the training forward by %g", ARCHS[k],
                     worst);
        close_gen(&g);
    }
}

static void seeds_reproduce_and_batches_do_not_interfere(void **s) {
    (void)s;
    gen_case g;
    open_gen(&g, "ref-qwen3-moe");
    areal_sampling sp = {.temperature = 1.0f, .top_p = 1, .seed = 5, .max_new_tokens = 10};
    areal_gen_out a[2], b[1], c[1];
    gen(&g, 2, &sp, a);
    gen(&g, 1, &sp, b); /* prompt 0 alone */
    sp.seed = 6;
    gen(&g, 1, &sp, c);
    assert_int_equal(a[0].n, b[0].n);
    int same_other = 1;
    for (int j = 0; j < a[0].n; j++) {
        assert_int_equal(a[0].tokens[j], b[0].tokens[j]);
        assert_true(fabsf(a[0].logprobs[j] - b[0].logprobs[j]) < 1e-5f);
        same_other &= a[0].tokens[j] == c[0].tokens[j];
    }
    assert_false(same_other); /* another seed, another draw */
    areal_gen_out_free(&a[0]);
    areal_gen_out_free(&a[1]);
    areal_gen_out_free(&b[0]);
    areal_gen_out_free(&c[0]);
    close_gen(&g);
}

static void stop_tokens_and_top_k_one(void **s) {
    (void)s;
    gen_case g;
    open_gen(&g, "ref-qwen2");
    int at = 2; /* stop on the greedy output's token 2 (first time it appears) */
    for (int j = 0; j < 2; j++)
        if (g.want[0][j] == g.want[0][2])
            at = j;
    int32_t stop = g.want[0][at];
    areal_sampling sp = {
        .temperature = 0, .top_p = 1, .max_new_tokens = 8, .stop = &stop, .n_stop = 1};
    areal_gen_out o[1];
    gen(&g, 1, &sp, o);
    assert_true(o[0].stopped);
    assert_int_equal(o[0].n, at + 1);
    assert_int_equal(o[0].tokens[at], stop);
    areal_gen_out_free(&o[0]);
    /* top-k 1 at any temperature is greedy, with logprob 0 in its one-token set */
    areal_sampling k1 = {
        .temperature = 1.3f, .top_k = 1, .top_p = 1, .seed = 3, .max_new_tokens = 8};
    gen(&g, 1, &k1, o);
    for (int j = 0; j < 8; j++) {
        assert_int_equal(o[0].tokens[j], g.want[0][j]);
        assert_true(o[0].logprobs[j] == 0.0f);
    }
    areal_gen_out_free(&o[0]);
    close_gen(&g);
}

static void top_p_keeps_the_nucleus(void **s) {
    (void)s;
    /* probabilities 0.5, 0.3, 0.15, 0.05: top_p 0.7 keeps {0, 1} -> 0.625 / 0.375 */
    float logits[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)}, scratch[8];
    areal_sampling sp = {.temperature = 1, .top_p = 0.7f};
    areal_rng rng;
    areal_rng_seed(&rng, 42, 0);
    int count[4] = {0};
    for (int i = 0; i < 4000; i++) {
        float lp;
        int32_t t = areal_sample(logits, 4, &sp, &rng, scratch, &lp);
        assert_true(t >= 0 && t < 4);
        count[t]++;
        float want = t == 0 ? logf(0.625f) : logf(0.375f);
        assert_true(fabsf(lp - want) < 1e-5f);
    }
    assert_int_equal(count[2] + count[3], 0);
    assert_true(fabs(count[0] / 4000.0 - 0.625) < 0.03);
    sp.top_k = 3;
    sp.top_p = 1;
    for (int i = 0; i < 2000; i++) {
        float lp;
        assert_true(areal_sample(logits, 4, &sp, &rng, scratch, &lp) != 3);
    }
}

/* The unfiltered draw and greedy against a double-precision log softmax
 * computed here with libm: logprobs to 1e-6 over a vocabulary that is not a
 * multiple of 8 (the vector body and its scalar tail), ids whose exp
 * underflows are never drawn, ties go to the first id, and the draw
 * frequencies follow the softmax. */
static void unfiltered_draws_follow_the_softmax(void **s) {
    (void)s;
    enum { V = 1003 };
    static float logits[V], scratch[2 * V];
    uint64_t x = 99;
    for (int j = 0; j < V; j++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        logits[j] = (float)((x >> 40) % 20001) / 1000.0f - 10.0f; /* [-10, 10] */
    }
    for (int j = 0; j < V; j += 17)
        logits[j] = -300.0f;           /* exp underflows at any temperature used here */
    logits[500] = logits[900] = 25.0f; /* a tie for the maximum */
    float temps[] = {0.0f, 0.7f, 1.0f, 2.5f};
    for (size_t ti = 0; ti < sizeof temps / sizeof temps[0]; ti++) {
        float T = temps[ti], inv_t = T > 0 ? 1.0f / T : 1.0f;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < V; j++)
            mx = fmax(mx, (double)(logits[j] * inv_t));
        for (int j = 0; j < V; j++)
            sum += exp((double)(logits[j] * inv_t) - mx);
        double lse = mx + log(sum);
        areal_sampling sp = {.temperature = T, .top_p = 1};
        areal_rng rng;
        areal_rng_seed(&rng, 5, (uint64_t)ti);
        for (int i = 0; i < 2000; i++) {
            float lp;
            int32_t t = areal_sample(logits, V, &sp, &rng, scratch, &lp);
            assert_true(t >= 0 && t < V);
            if (T == 0)
                assert_int_equal(t, 500);
            assert_true(t % 17 != 0);
            double want = (double)(logits[t] * inv_t) - lse;
            if (!(fabs(lp - want) < 1e-6))
                fail_msg("T %g id %d: logprob %.9g, want %.9g", T, t, lp, want);
        }
    }
    /* frequencies: three ids at probabilities 0.6 / 0.3 / 0.1, the rest -inf-like */
    for (int j = 0; j < V; j++)
        logits[j] = -1000.0f;
    logits[3] = logf(0.6f);
    logits[600] = logf(0.3f);
    logits[1002] = logf(0.1f); /* in the scalar tail */
    areal_sampling sp = {.temperature = 1, .top_p = 1};
    areal_rng rng;
    areal_rng_seed(&rng, 8, 0);
    int count[3] = {0};
    for (int i = 0; i < 6000; i++) {
        float lp;
        int32_t t = areal_sample(logits, V, &sp, &rng, scratch, &lp);
        assert_true(t == 3 || t == 600 || t == 1002);
        count[t == 3 ? 0 : t == 600 ? 1 : 2]++;
        assert_true(fabsf(lp - logits[t]) < 1e-6f);
    }
    assert_true(fabs(count[0] / 6000.0 - 0.6) < 0.03);
    assert_true(fabs(count[1] / 6000.0 - 0.3) < 0.03);
    assert_true(fabs(count[2] / 6000.0 - 0.1) < 0.02);
}

static void cache_refuses_overflow_and_bad_slots(void **s) {
    (void)s;
    gen_case g;
    open_gen(&g, "ref-qwen3");
    areal_kv_cache c;
    areal_error err;
    assert_int_equal(areal_kv_cache_init(&c, &g.m.cfg, 2, 4, &err), AREAL_OK);
    int32_t tok[5] = {1, 2, 3, 4, 5}, cu[2] = {0, 5};
    int slot = 0;
    float *logits = malloc(sizeof(float) * 2 * (size_t)g.m.cfg.vocab_size);
    assert_non_null(logits);
    assert_int_equal(areal_model_step(&g.m, &c, tok, cu, &slot, 1, logits, &err), AREAL_ERANGE);
    assert_non_null(strstr(err.msg, "capacity"));
    assert_int_equal(c.len[0], 0);
    slot = 2;
    cu[1] = 2;
    assert_int_equal(areal_model_step(&g.m, &c, tok, cu, &slot, 1, logits, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "slot 2"));
    /* prefill in two chunks gives the logits of prefill at once */
    int32_t cu2[2] = {0, 2};
    int slots[1] = {0};
    float *once = malloc(sizeof(float) * (size_t)g.m.cfg.vocab_size);
    assert_non_null(once);
    int32_t cu4[2] = {0, 4};
    slots[0] = 1;
    assert_int_equal(areal_model_step(&g.m, &c, tok, cu4, slots, 1, once, &err), AREAL_OK);
    slots[0] = 0;
    assert_int_equal(areal_model_step(&g.m, &c, tok, cu2, slots, 1, logits, &err), AREAL_OK);
    assert_int_equal(areal_model_step(&g.m, &c, tok + 2, cu2, slots, 1, logits, &err), AREAL_OK);
    assert_true(ref_rel_err(logits, once, (size_t)g.m.cfg.vocab_size) < 1e-5);
    free(once);
    free(logits);
    areal_kv_cache_free(&c);
    const int32_t *p[1] = {tok};
    int plen[1] = {0};
    areal_sampling sp = {.temperature = 0, .top_p = 1, .max_new_tokens = 2};
    areal_gen_out o[1];
    assert_int_equal(areal_generate(&g.m, p, plen, 1, &sp, o, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "prompt 0"));
    plen[0] = 2;
    sp.top_p = 0;
    assert_int_equal(areal_generate(&g.m, p, plen, 1, &sp, o, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "top_p"));
    close_gen(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(greedy_matches_transformers),
        cmocka_unit_test(sampled_logprobs_equal_training_forward),
        cmocka_unit_test(seeds_reproduce_and_batches_do_not_interfere),
        cmocka_unit_test(stop_tokens_and_top_k_one),
        cmocka_unit_test(top_p_keeps_the_nucleus),
        cmocka_unit_test(unfiltered_draws_follow_the_softmax),
        cmocka_unit_test(cache_refuses_overflow_and_bad_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
