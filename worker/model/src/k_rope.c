/*
 * k_rope.c - rotary position embedding in HF's rotate-half layout: for head
 * dimension hd and i < hd/2, the pair (x[i], x[i + hd/2]) is rotated by the
 * angle pos * inv_freq[i]. HF checkpoints store q/k in this layout, so no
 * weight permutation is needed (the interleaved Meta layout was rejected).
 * The angle and its cos/sin are computed in fp32 as HF does (pos * inv_freq
 * in fp32, then cos/sin), so results agree to rounding. The backward applies
 * the inverse rotation (the transpose) to the gradient, in place.
 */
#include <math.h>

#include "kernels.h"

typedef struct rope_ctx {
    float *x;
    const int32_t *pos;
    const float *inv_freq;
    int nh, hd;
    float sign; /* +1 forward, -1 backward */
} rope_ctx;

static void rope_rows(void *c, size_t b, size_t e) {
    rope_ctx *k = c;
    int half = k->hd / 2;
    for (size_t t = b; t < e; t++) {
        for (int i = 0; i < half; i++) {
            float ang = (float)k->pos[t] * k->inv_freq[i];
            float cs = cosf(ang), sn = k->sign * sinf(ang);
            for (int h = 0; h < k->nh; h++) {
                float *x = k->x + (t * k->nh + h) * k->hd;
                float x1 = x[i], x2 = x[i + half];
                x[i] = x1 * cs - x2 * sn;
                x[i + half] = x2 * cs + x1 * sn;
            }
        }
    }
}

void k_rope_fwd(areal_pool *p, float *x, const int32_t *pos, const float *inv_freq, int T, int nh,
                int hd) {
    rope_ctx k = {x, pos, inv_freq, nh, hd, 1.0f};
    areal_pool_for(p, (size_t)T, 8, rope_rows, &k);
}

void k_rope_bwd(areal_pool *p, float *dx, const int32_t *pos, const float *inv_freq, int T, int nh,
                int hd) {
    rope_ctx k = {dx, pos, inv_freq, nh, hd, -1.0f};
    areal_pool_for(p, (size_t)T, 8, rope_rows, &k);
}
