/*
 * dtype.h - element types and reductions of the comm API.
 *
 * Buffers are typed and counted in elements, never bytes. bf16 and fp16 are
 * stored as their 16-bit patterns (uint16_t); the backend reduces them in fp32
 * and rounds once at the end (round to nearest even). Float max is symmetric
 * (NaN wins), so op(a, b) == op(b, a) bit for bit and every rank of a
 * collective ends with identical bytes. Integer avg truncates toward zero.
 */
#ifndef AREAL_COMM_DTYPE_H
#define AREAL_COMM_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum areal_dtype {
    AREAL_FP32,
    AREAL_BF16,
    AREAL_FP16,
    AREAL_INT32,
    AREAL_INT64,
    AREAL_DTYPE_COUNT
} areal_dtype;

typedef enum areal_redop { AREAL_SUM, AREAL_AVG, AREAL_MAX, AREAL_REDOP_COUNT } areal_redop;

/* Bytes per element (0 for an unknown type); "fp32", ... (NULL when unknown). */
size_t areal_dtype_size(areal_dtype t);
const char *areal_dtype_name(areal_dtype t);
const char *areal_redop_name(areal_redop op);

/* Conversions between fp32 and the 16-bit formats (round to nearest even; NaN stays NaN). */
float areal_bf16_to_f32(uint16_t h);
uint16_t areal_f32_to_bf16(float f);
float areal_fp16_to_f32(uint16_t h);
uint16_t areal_f32_to_fp16(float f);

/*
 * dst[i] = op(dst[i], src[i]) for n elements of type t, which must be fp32,
 * int32 or int64 (AVG reduces as SUM; see areal_scale_avg).
 */
void areal_reduce(void *dst, const void *src, size_t n, areal_dtype t, areal_redop op);

/* Divides n elements of type t (fp32, int32 or int64) by `by` (the avg's final step). */
void areal_scale_avg(void *buf, size_t n, areal_dtype t, int by);

#endif
