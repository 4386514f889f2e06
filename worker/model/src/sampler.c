/*
 * sampler.c - the seeded RNG and next-token sampling of generate.h.
 *
 * The order is transformers' logits processors: temperature, then top-k,
 * then top-p, then min-p (SGLang's order), each on the survivors of the
 * previous one. Candidates are
 * sorted by scaled logit (descending, ties by id) only when top-k or top-p
 * filter; plain temperature sampling scans the vocabulary in id order. The
 * log-sum-exp is taken with the maximum subtracted, each term a float exp
 * (k_softmax.c: vectorised, once per id; the draw scans the kept terms
 * instead of taking exp again) summed in double, and logits are scaled by
 * multiplying with 1 / temperature exactly as heads.c does, so the logprob
 * returned for an unfiltered draw is the one the training forward computes
 * (to ~1e-7; the tests hold it to 1e-5). splitmix64 was chosen for the RNG: one 64-bit word of
 * state per stream, and streams from (seed, index) are independent, so a sequence's draws do not
 * depend on what else is in its batch.
 */
#include <math.h>
#include <stdlib.h>

#include "areal/model/generate.h"
#include "kernels.h"

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void areal_rng_seed(areal_rng *r, uint64_t seed, uint64_t stream) {
    uint64_t s = seed ^ (stream * 0xD1B54A32D192ED03ull);
    r->s = splitmix(&s);
}

float areal_rng_uniform(areal_rng *r) {
    return (float)(splitmix(&r->s) >> 40) * (1.0f / 16777216.0f);
}

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

int32_t areal_sample(const float *logits, int V, const areal_sampling *s, areal_rng *rng,
                     float *scratch, float *logprob) {
    if (s->vocab_limit > 0 && s->vocab_limit < V)
        V = s->vocab_limit;    /* the padding rows are excluded, as a -inf mask would */
    if (s->temperature <= 0) { /* the first id of the largest logit */
        float mx = k_max(logits, V);
        int best = 0;
        while (best < V - 1 && !(logits[best] >= mx))
            best++;
        *logprob = (float)(-log(k_exp_sum(NULL, logits, 1.0f, logits[best], V)));
        return best;
    }
    float inv_t = 1.0f / s->temperature;
    bool filter = (s->top_k > 0 && s->top_k < V) || s->top_p < 1.0f || s->min_p > 0;
    if (!filter) {                           /* id order, the terms kept in scratch for the draw */
        float mx = k_max(logits, V) * inv_t; /* scaling by inv_t > 0 keeps the order */
        double sum = k_exp_sum(scratch, logits, inv_t, mx, V);
        double u = (double)areal_rng_uniform(rng) * sum, acc = 0;
        int pick = -1, last = 0;
        for (int j = 0; j < V && pick < 0; j++) {
            acc += (double)scratch[j];
            if (scratch[j] > 0)
                last = j;
            if (u < acc)
                pick = j;
        }
        if (pick < 0) /* u fell in the rounding gap between the scan and the sum */
            pick = last;
        *logprob = (float)((double)(logits[pick] * inv_t) - ((double)mx + log(sum)));
        return pick;
    }
    cand *c = (cand *)scratch;
    int n = V;
    for (int j = 0; j < V; j++)
        c[j] = (cand){logits[j] * inv_t, j};
    qsort(c, (size_t)V, sizeof *c, cand_cmp);
    if (s->top_k > 0 && s->top_k < n)
        n = s->top_k;
    float mx = c[0].z;
    for (int j = 1; j < n; j++)
        mx = c[j].z > mx ? c[j].z : mx;
    double sum = 0;
    for (int j = 0; j < n; j++)
        sum += exp((double)(c[j].z - mx));
    if (s->top_p < 1.0f) { /* smallest prefix with mass >= top_p */
        double cum = 0, keep_sum = 0;
        int keep = 0;
        while (keep < n) {
            double pj = exp((double)(c[keep].z - mx));
            cum += pj / sum;
            keep_sum += pj;
            keep++;
            if (cum >= s->top_p)
                break;
        }
        n = keep;
        sum = keep_sum;
    }
    if (s->min_p > 0) { /* c[0] is the most likely: its ratio exp(z - mx) is 1 */
        int keep = 1;
        double keep_sum = 1.0;
        while (keep < n && exp((double)(c[keep].z - mx)) >= (double)s->min_p) {
            keep_sum += exp((double)(c[keep].z - mx));
            keep++;
        }
        n = keep;
        sum = keep_sum;
    }
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
