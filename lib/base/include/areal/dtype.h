/*
 * dtype.h - the element types of safetensors files and conversions to and
 * from fp32.
 *
 * The names are the safetensors spellings ("F32", "BF16", ...). Each type has
 * a rank: the order of the safetensors package's Dtype enum, which the writer
 * uses to lay tensors out exactly as the Python package does (larger rank
 * first). Only F32, F16 and BF16 convert to fp32; the other types are known so
 * that a header naming them is valid, and loading them as fp32 is refused.
 * fp32 -> bf16/fp16 rounds to nearest even and keeps NaN a NaN (quiet).
 */
#ifndef AREAL_DTYPE_H
#define AREAL_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum areal_dtype {
    AREAL_DT_BOOL,
    AREAL_DT_U8,
    AREAL_DT_I8,
    AREAL_DT_F8_E5M2,
    AREAL_DT_F8_E4M3,
    AREAL_DT_F8_E8M0,
    AREAL_DT_I16,
    AREAL_DT_U16,
    AREAL_DT_F16,
    AREAL_DT_BF16,
    AREAL_DT_I32,
    AREAL_DT_U32,
    AREAL_DT_F32,
    AREAL_DT_C64,
    AREAL_DT_F64,
    AREAL_DT_I64,
    AREAL_DT_U64,
    AREAL_DT_COUNT
} areal_dtype;

/* Parses a safetensors dtype name; returns 0 and sets *dt, or -1 if unknown. */
int areal_dtype_parse(const char *name, areal_dtype *dt);

/* The safetensors name of dt ("F32"), or "?" for a value out of range. */
const char *areal_dtype_name(areal_dtype dt);

/* Bytes per element (1, 2, 4 or 8); 0 for a value out of range. */
size_t areal_dtype_size(areal_dtype dt);

/* True for F32, F16 and BF16: the types that load to fp32. */
bool areal_dtype_is_float(areal_dtype dt);

/* Scalar conversions (bits in, value out and back). */
float areal_bf16_to_f32(uint16_t h);
float areal_f16_to_f32(uint16_t h);
uint16_t areal_f32_to_bf16(float f);
uint16_t areal_f32_to_f16(float f);

/*
 * Converts n little-endian elements of `src` (type dt, any alignment) to fp32
 * in dst. Returns 0, or -1 when dt is not F32/F16/BF16 (dst untouched).
 */
int areal_dtype_to_f32(areal_dtype dt, const void *src, float *dst, size_t n);

/*
 * Converts n fp32 values to dt (F32, F16 or BF16) into dst, little-endian.
 * Returns 0 or -1 for any other dt.
 */
int areal_dtype_from_f32(areal_dtype dt, const float *src, void *dst, size_t n);

#endif
