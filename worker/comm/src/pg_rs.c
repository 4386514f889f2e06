/*
 * pg_rs.c - reduce-scatter from a const input into a separate output: a
 * ring that never copies the whole input.
 *
 * Step s (0..n-2) sends chunk me-s-1 to the next member and receives chunk
 * me-s-2 from the previous one, reduced into a target that starts as this
 * rank's own input block; the next step sends that target on. Targets
 * alternate between two chunk-sized buffers, arranged so the last one is
 * the output itself (fp32, int32, int64) and the first send reads straight
 * from the input. Each segment of the target is filled from the input just
 * before its bytes arrive, so the reduce finds it in cache. bf16/fp16 work
 * in fp32 buffers and round once at the end. Rejected: copying the whole
 * input into a work buffer first (a size*count allocation and page faults
 * on every call: measured 2-3x slower at 64 MiB).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"

#define RS_SEG (128u << 10) /* bytes per segment */

static int is_half(areal_dtype t) {
    return t == AREAL_DT_BF16 || t == AREAL_DT_F16;
}

/* dst (fp32 or t) = elements [0, n) of src (type t), widened when t is half. */
static void load(void *dst, const uint8_t *src, size_t n, areal_dtype t) {
    if (!is_half(t)) {
        memcpy(dst, src, n * areal_dtype_size(t));
        return;
    }
    float *d = dst;
    const uint16_t *s = (const uint16_t *)(const void *)src;
    for (size_t i = 0; i < n; i++)
        d[i] = t == AREAL_DT_BF16 ? areal_bf16_to_f32(s[i]) : areal_f16_to_f32(s[i]);
}

static int overlaps(const void *a, size_t an, const void *b, size_t bn) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + bn && y < x + an;
}

int areal_pg_ring_reduce_scatter(areal_pg *g, const char *opn, const void *in, void *out,
                                 size_t count, areal_dtype t, areal_redop op, int64_t dl,
                                 areal_error *err) {
    int n = g->n, me = g->me, half = is_half(t);
    size_t es = areal_dtype_size(t);
    if (n == 1 || count == 0) {
        if (count > 0)
            memmove(out, in, count * es);
        return AREAL_OK;
    }
    areal_dtype wt = half ? AREAL_DT_F32 : t;
    size_t wes = areal_dtype_size(wt), seg = RS_SEG / wes, bytes = count * wes;
    areal_redop core = op == AREAL_AVG ? AREAL_SUM : op;
    /* out is the last target unless it must be converted or overlaps the input */
    int out_direct = !half && !overlaps(in, count * (size_t)n * es, out, count * es);
    uint8_t *x = malloc(bytes), *y = out_direct ? out : malloc(bytes), *tmp = malloc(RS_SEG);
    const uint8_t *src = in;
    int rc = AREAL_OK;
    if (x == NULL || y == NULL || tmp == NULL) {
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "group %s: %s: out of memory", g->name, opn);
        goto done;
    }
    const uint8_t *send = NULL;
    for (int s = 0; s < n - 1 && rc == AREAL_OK; s++) {
        int sc = ((me - s - 1) % n + n) % n, rcv = ((me - s - 2) % n + n) % n;
        uint8_t *target = (n - 2 - s) % 2 == 0 ? y : x;
        if (s == 0) {
            if (half) {
                uint8_t *other = target == x ? y : x;
                load(other, src + (size_t)sc * count * es, count, t);
                send = other;
            } else {
                send = src + (size_t)sc * count * es;
            }
        }
        for (size_t k = 0; k < count && rc == AREAL_OK; k += seg) {
            size_t m = count - k < seg ? count - k : seg;
            load(target + k * wes, src + ((size_t)rcv * count + k) * es, m, t);
            rc = areal_pg_xfer_reduce(g, opn, (me + 1) % n, send + k * wes, m * wes,
                                      (me + n - 1) % n, target + k * wes, tmp, m * wes, wt, core,
                                      dl, err);
        }
        send = target;
    }
    if (rc == AREAL_OK) {
        if (op == AREAL_AVG)
            areal_scale_avg(y, count, wt, n);
        if (half) {
            uint16_t *o = out;
            const float *w = (const float *)(const void *)y;
            for (size_t i = 0; i < count; i++)
                o[i] = t == AREAL_DT_BF16 ? areal_f32_to_bf16(w[i]) : areal_f32_to_f16(w[i]);
        } else if (!out_direct) {
            memcpy(out, y, bytes);
        }
    }
done:
    free(x);
    if (!out_direct)
        free(y);
    free(tmp);
    return rc;
}
