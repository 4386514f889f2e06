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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The project's one element-type enum and its fp32 <-> fp16/bf16 conversions. */
#include "areal/dtype.h"

typedef enum areal_redop { AREAL_SUM, AREAL_AVG, AREAL_MAX, AREAL_REDOP_COUNT } areal_redop;

/* The types collectives carry: fp32, bf16, fp16, int32, int64. */
bool areal_comm_dtype_ok(areal_dtype t);

const char *areal_redop_name(areal_redop op);

/*
 * dst[i] = op(dst[i], src[i]) for n elements of type t, which must be fp32,
 * int32 or int64 (AVG reduces as SUM; see areal_scale_avg).
 */
void areal_reduce(void *dst, const void *src, size_t n, areal_dtype t, areal_redop op);

/* Divides n elements of type t (fp32, int32 or int64) by `by` (the avg's final step). */
void areal_scale_avg(void *buf, size_t n, areal_dtype t, int by);

#endif
