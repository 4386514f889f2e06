/*
 * engine_sample.c - the engine's next-token choice and the logprobs of the
 * prompt-scoring and top-logprobs lists.
 *
 * The draw IS areal_sample (generate.h), min_p included, so a token, its
 * logprob and the RNG stream are exactly the `generate` command's. Scoring
 * lists are unfiltered: log softmax(logits / T), the training forward's
 * definition.
 */
#include <math.h>

#include "engine_internal.h"

int32_t eng_sample(const float *logits, int V, const areal_engine_params *p, areal_rng *rng,
                   float *scratch, float *logprob) {
    areal_sampling s = {.temperature = p->temperature,
                        .top_k = p->top_k > 0 ? p->top_k : 0,
                        .top_p = p->top_p,
                        .min_p = p->min_p,
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
    if (id >= V)
        return -INFINITY; /* a padding id past the vocabulary limit */
    float z = temperature > 0 ? logits[id] * inv_t : logits[id];
    return (float)((double)z - lse);
}
