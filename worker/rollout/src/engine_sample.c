/*
 * engine_sample.c - the engine's next-token choice and the logprobs of the
 * prompt-scoring and top-logprobs lists.
 *
 * Without min_p the draw IS areal_sample (generate.h), so a token, its
 * logprob and the RNG stream are exactly the `generate` command's. min_p
 * (SGLang's order: temperature, top-k, top-p, then min-p on the survivors)
 * repeats areal_sample's steps with one more cut: keep the candidates whose
 * probability is at least min_p times the largest; the logprob is then the
 * renormalised one over that set, as for top-k and top-p. Scoring lists are
 * unfiltered: log softmax(logits / T), the training forward's definition.
 */
#include <math.h>
#include <stdlib.h>

#include "engine_internal.h"

typedef struct cand {
    float z;
    int32_t id;
} cand;

static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->z != y->z)
        return x->z > y->z ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int32_t sample_min_p(const float *logits, int V, const areal_engine_params *p,
                            areal_rng *rng, float *scratch, float *logprob) {
    float inv_t = 1.0f / p->temperature;
    cand *c = (cand *)scratch;
    for (int j = 0; j < V; j++)
        c[j] = (cand){logits[j] * inv_t, j};
    qsort(c, (size_t)V, sizeof *c, cand_cmp);
    int n = p->top_k > 0 && p->top_k < V ? p->top_k : V;
    float mx = c[0].z;
    double sum = 0;
    for (int j = 0; j < n; j++)
        sum += exp((double)(c[j].z - mx));
    if (p->top_p < 1.0f) {
        double cum = 0, keep_sum = 0;
        int keep = 0;
        while (keep < n) {
            double pj = exp((double)(c[keep].z - mx));
            cum += pj / sum;
            keep_sum += pj;
            keep++;
            if (cum >= p->top_p)
                break;
        }
        n = keep;
        sum = keep_sum;
    }
    int keep = 1; /* c[0] has the largest probability: ratio exp(z - mx) */
    double keep_sum = 1.0;
    while (keep < n && exp((double)(c[keep].z - mx)) >= (double)p->min_p) {
        keep_sum += exp((double)(c[keep].z - mx));
        keep++;
    }
    n = keep;
    sum = keep_sum;
    double u = (double)areal_rng_uniform(rng) * sum, acc = 0;
    int pick = n - 1;
    for (int j = 0; j < n; j++) {
        acc += exp((double)(c[j].z - mx));
        if (u < acc) {
            pick = j;
            break;
        }
    }
    *logprob = (float)((double)c[pick].z - ((double)mx + log(sum)));
    return c[pick].id;
}

int32_t eng_sample(const float *logits, int V, const areal_engine_params *p, areal_rng *rng,
                   float *scratch, float *logprob) {
    if (p->min_p > 0 && p->temperature > 0)
        return sample_min_p(logits, V, p, rng, scratch, logprob);
    areal_sampling s = {.temperature = p->temperature,
                        .top_k = p->top_k > 0 ? p->top_k : 0,
                        .top_p = p->top_p,
                        .max_new_tokens = p->max_new_tokens};
    return areal_sample(logits, V, &s, rng, scratch, logprob);
}

float eng_logprob(const float *logits, int V, float temperature, int32_t id, int k,
                  areal_engine_top *top) {
    float inv_t = temperature > 0 ? 1.0f / temperature : 1.0f;
    float mx = -INFINITY;
    for (int j = 0; j < V; j++) {
        float z = temperature > 0 ? logits[j] * inv_t : logits[j];
        if (z > mx)
            mx = z;
    }
    double sum = 0;
    for (int j = 0; j < V; j++) {
        float z = temperature > 0 ? logits[j] * inv_t : logits[j];
        sum += exp((double)(z - mx));
    }
    double lse = (double)mx + log(sum);
    if (k > 0) {
        int n = 0; /* insertion into the k best, best first, ties by id */
        for (int j = 0; j < V; j++) {
            float z = temperature > 0 ? logits[j] * inv_t : logits[j];
            float lp = (float)((double)z - lse);
            if (n == k && lp <= top[n - 1].logprob)
                continue;
            int at = n < k ? n++ : k - 1;
            while (at > 0 && top[at - 1].logprob < lp) {
                top[at] = top[at - 1];
                at--;
            }
            top[at] = (areal_engine_top){lp, j};
        }
        for (int i = n; i < k; i++)
            top[i] = (areal_engine_top){-INFINITY, -1};
    }
    float z = temperature > 0 ? logits[id] * inv_t : logits[id];
    return (float)((double)z - lse);
}
