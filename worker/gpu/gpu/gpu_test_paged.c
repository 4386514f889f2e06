/*
 * gpu_test_paged.c - the rollout engine's step on the GPU (areal_gpu_step_paged,
 * what the engine's GPU backend calls) against the CPU engine's
 * (areal_model_step_paged) on the fp32 tiny Qwen3, under an engine-like
 * schedule (make test-gpu; skipped without a device): three sequences in
 * blocks of 4 positions, prompts prefilled in chunks of at most 5 tokens per
 * step (so steps mix prefill and decode rows), the third sequence joining
 * late with the first one's two full prompt blocks shared through its table
 * (the prefix cache), then greedy decoding; CUDA graphs on (the tiny model
 * is dense), so batches of 1..3 rows replay buckets 1, 2 and 4.
 *
 * Both sides are fed the CPU's greedy tokens (teacher forcing), so a bf16
 * near-tie cannot fork the two generations. Checked at every wanted row:
 * logits within 3% relative L2 of the CPU's (gpu_test_model's decode bound),
 * and the GPU's argmax equal to the CPU's greedy token wherever the CPU's
 * top-2 margin exceeds 2% of its largest |logit|. Printed too: how many of
 * the GPU's free-running greedy tokens equal the CPU's (no bound: bf16).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../kernels/gpu/ktest.h"
#include "areal/gpumodel/model.h"
#include "areal/gpumodel/paged.h"
#include "areal/model/paged.h"

#define HF "worker/model/tests/fixtures/hf/"

enum { NSQ = 3, BS = 4, MAXB = 8, NBLK = 32, CHUNK = 5, NEW = 10, CAP = 40 };

typedef struct sq {
    int32_t tok[CAP];
    int n_tok, n_prompt, computed, join_step;
    int32_t table[MAXB];
    int n_table;
} sq;

static int argmax(const float *z, int V, double *margin) {
    int best = 0, second = -1;
    double mx = 0;
    for (int v = 0; v < V; v++) {
        mx = fabs(z[v]) > mx ? fabs(z[v]) : mx;
        if (z[v] > z[best]) {
            second = best;
            best = v;
        } else if (v != best && (second < 0 || z[v] > z[second])) {
            second = v;
        }
    }
    *margin = mx > 0 ? (z[best] - z[second]) / mx : 0;
    return best;
}

static double rel_l2(const float *a, const float *b, int n) {
    double d = 0, r = 0;
    for (int i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

static void test_engine_schedule(void **state) {
    (void)state;
    kt_need_device();
    areal_model m;
    KT_OK(areal_model_load(&m, HF "qwen3-bf16", NULL, KT_ERR));
    const int V = m.cfg.vocab_size;
    areal_paged_kv kv;
    KT_OK(areal_paged_kv_init(&kv, &m.cfg, NBLK, BS, KT_ERR));
    areal_gpu_model *g = NULL;
    KT_OK(areal_gpu_model_create(&m, 1, 1, 0, &g, KT_ERR));
    KT_OK(areal_gpu_model_upload(g, &m, KT_ERR));
    areal_gpu_kv_cfg gkv = {NSQ, BS, NBLK, MAXB};
    KT_OK(areal_gpu_decode_init(g, &gkv, KT_ERR));
    KT_OK(areal_gpu_decode_graphs(g, true, KT_ERR));
    /* prompts: 9, 6 and 13 tokens; the third's first 8 are the first's (two full blocks) */
    sq s[NSQ];
    memset(s, 0, sizeof s);
    const int plen[NSQ] = {9, 6, 13}, join[NSQ] = {0, 0, 2};
    uint64_t seed = 0x5eedull;
    int next_block = 0;
    for (int i = 0; i < NSQ; i++) {
        s[i].n_prompt = s[i].n_tok = plen[i];
        s[i].join_step = join[i];
        for (int t = 0; t < plen[i]; t++)
            s[i].tok[t] = (int32_t)(kt_rnd(&seed) % (uint32_t)V);
        for (int b = 0; b < MAXB; b++)
            s[i].table[b] = (int32_t)(next_block++ * 7 % NBLK); /* scattered, distinct */
        s[i].n_table = MAXB;
    }
    memcpy(s[2].tok, s[0].tok, 8 * sizeof(int32_t));
    s[2].table[0] = s[0].table[0];
    s[2].table[1] = s[0].table[1];
    s[2].computed = 8; /* the shared blocks are the first sequence's */
    float *lc = malloc(sizeof(float) * NSQ * V), *lg = malloc(sizeof(float) * NSQ * V);
    int bad = 0, checked = 0, rows = 0;
    double worst = 0;
    for (int step = 0; step < 40; step++) {
        int32_t tokens[NSQ * CHUNK], cu[NSQ + 1] = {0}, out_rows[NSQ], who[NSQ];
        areal_paged_seq ps[NSQ];
        int nb = 0, n_out = 0;
        for (int i = 0; i < NSQ; i++) {
            if (step < s[i].join_step || s[i].n_tok - s[i].n_prompt >= NEW)
                continue;
            int left = s[i].n_tok - s[i].computed, c = left < CHUNK ? left : CHUNK;
            memcpy(tokens + cu[nb], s[i].tok + s[i].computed, sizeof(int32_t) * (size_t)c);
            ps[nb] = (areal_paged_seq){s[i].table, s[i].n_table, s[i].computed};
            cu[nb + 1] = cu[nb] + c;
            if (s[i].computed + c == s[i].n_tok) {
                out_rows[n_out] = cu[nb + 1] - 1;
                who[n_out++] = i;
            }
            s[i].computed += c;
            nb++;
        }
        if (nb == 0)
            break;
        KT_OK(areal_model_step_paged(&m, &kv, tokens, cu, ps, nb, out_rows, n_out, lc, KT_ERR));
        KT_OK(areal_gpu_step_paged(g, &gkv, tokens, cu, ps, nb, out_rows, n_out, lg, KT_ERR));
        for (int k = 0; k < n_out; k++) {
            const float *ref = lc + (size_t)k * V, *got = lg + (size_t)k * V;
            double rel = rel_l2(got, ref, V), margin = 0, gm = 0;
            worst = rel > worst ? rel : worst;
            bad += rel > 0.03;
            int cpu = argmax(ref, V, &margin), gpu = argmax(got, V, &gm);
            if (margin > 0.02) {
                checked++;
                if (gpu != cpu) {
                    printf("  step %d seq %d: gpu argmax %d, cpu %d (margin %.3f)\n", step, who[k],
                           gpu, cpu, margin);
                    bad++;
                }
            }
            rows++;
            sq *q = &s[who[k]];
            q->tok[q->n_tok++] = cpu; /* teacher forcing: both sides continue with the CPU's */
        }
    }
    printf("engine schedule: %d logits rows, worst rel err %.4f, %d greedy tokens checked\n", rows,
           worst, checked);
    assert_true(rows >= NSQ * NEW);
    assert_int_equal(bad, 0);
    /* free-running greedy on the GPU alone for the first sequence: how long it agrees */
    areal_gpu_kv_cfg one = {1, BS, NBLK, MAXB};
    KT_OK(areal_gpu_decode_init(g, &one, KT_ERR));
    int32_t gen[CAP];
    memcpy(gen, s[0].tok, sizeof(int32_t) * (size_t)s[0].n_prompt);
    int n = s[0].n_prompt, agree = 0;
    int32_t cu1[2] = {0, n};
    areal_paged_seq p1 = {s[0].table, MAXB, 0};
    int32_t last = n - 1;
    KT_OK(areal_gpu_step_paged(g, &one, gen, cu1, &p1, 1, &last, 1, lg, KT_ERR));
    for (int t = 0; t < NEW; t++) {
        double mg;
        gen[n] = argmax(lg, V, &mg);
        agree += agree == t && gen[n] == s[0].tok[n];
        int32_t cu2[2] = {0, 1}, zero = 0;
        areal_paged_seq p2 = {s[0].table, MAXB, n};
        n++;
        if (t + 1 < NEW)
            KT_OK(areal_gpu_step_paged(g, &one, gen + n - 1, cu2, &p2, 1, &zero, 1, lg, KT_ERR));
    }
    printf("free-running GPU greedy: the first %d of %d tokens equal the CPU's\n", agree, NEW);
    free(lc), free(lg);
    areal_paged_kv_free(&kv);
    areal_gpu_model_free(g);
    areal_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_engine_schedule)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
