/*
 * dtype.c - safetensors element types and the fp16/bf16 <-> fp32 conversions.
 *
 * Conversions work on bit patterns (memcpy, no type punning through unions)
 * so they are exact, including subnormals, infinities and NaN payloads where
 * they fit. fp16 -> fp32 normalises subnormals by shifting; fp32 -> fp16
 * rounds to nearest even through the usual "add the rounding bias" trick on
 * the integer representation. A table-driven fp16 decoder was rejected: the
 * arithmetic is a handful of instructions and needs no 256 KB table.
 * The host is assumed little-endian, as safetensors data is (checked at
 * compile time where the compiler says).
 */
#include "areal/dtype.h"

#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; a big-endian host needs byte swaps here"
#endif

static const struct {
    const char *name;
    size_t size;
} dtypes[AREAL_DT_COUNT] = {
    [AREAL_DT_BOOL] = {"BOOL", 1},       [AREAL_DT_U8] = {"U8", 1},
    [AREAL_DT_I8] = {"I8", 1},           [AREAL_DT_F8_E5M2] = {"F8_E5M2", 1},
    [AREAL_DT_F8_E4M3] = {"F8_E4M3", 1}, [AREAL_DT_F8_E8M0] = {"F8_E8M0", 1},
    [AREAL_DT_I16] = {"I16", 2},         [AREAL_DT_U16] = {"U16", 2},
    [AREAL_DT_F16] = {"F16", 2},         [AREAL_DT_BF16] = {"BF16", 2},
    [AREAL_DT_I32] = {"I32", 4},         [AREAL_DT_U32] = {"U32", 4},
    [AREAL_DT_F32] = {"F32", 4},         [AREAL_DT_C64] = {"C64", 8},
    [AREAL_DT_F64] = {"F64", 8},         [AREAL_DT_I64] = {"I64", 8},
    [AREAL_DT_U64] = {"U64", 8},
};

int areal_dtype_parse(const char *name, areal_dtype *dt) {
    for (int i = 0; i < AREAL_DT_COUNT; i++) {
        if (strcmp(name, dtypes[i].name) == 0) {
            *dt = (areal_dtype)i;
            return 0;
        }
    }
    return -1;
}

const char *areal_dtype_name(areal_dtype dt) {
    return (unsigned)dt < AREAL_DT_COUNT ? dtypes[dt].name : "?";
}

size_t areal_dtype_size(areal_dtype dt) {
    return (unsigned)dt < AREAL_DT_COUNT ? dtypes[dt].size : 0;
}

bool areal_dtype_is_float(areal_dtype dt) {
    return dt == AREAL_DT_F32 || dt == AREAL_DT_F16 || dt == AREAL_DT_BF16;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float areal_bf16_to_f32(uint16_t h) {
    return bits_f32((uint32_t)h << 16);
}

float areal_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1f) { /* inf or NaN: keep the payload */
        u = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        u = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        u = sign;
    } else { /* subnormal: shift until the leading 1 becomes the implicit bit */
        uint32_t e = 113;
        while ((man & 0x400u) == 0) {
            man <<= 1;
            e--;
        }
        u = sign | (e << 23) | ((man & 0x3ffu) << 13);
    }
    return bits_f32(u);
}

uint16_t areal_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: truncate, force quiet */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

uint16_t areal_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {   /* below the smallest normal fp16 (2^-14): subnormal or 0 */
        if (a < 0x33000000u) /* below half the smallest subnormal: 0 */
            return sign;
        uint32_t e = a >> 23;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14..24: aligns to units of 2^-24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = a + 0x0fffu + ((a >> 13) & 1u) - (112u << 23);
    return (uint16_t)(sign | (r >> 13));
}

int areal_dtype_to_f32(areal_dtype dt, const void *src, float *dst, size_t n) {
    const uint8_t *s = src;
    switch (dt) {
    case AREAL_DT_F32:
        memcpy(dst, s, n * 4);
        return 0;
    case AREAL_DT_F16:
        for (size_t i = 0; i < n; i++)
            dst[i] = areal_f16_to_f32((uint16_t)(s[2 * i] | (s[2 * i + 1] << 8)));
        return 0;
    case AREAL_DT_BF16: /* a shift per element; written so that compilers vectorise it */
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            uint32_t u = (uint32_t)h << 16;
            memcpy(&dst[i], &u, 4);
        }
        return 0;
    default:
        return -1;
    }
}

int areal_dtype_from_f32(areal_dtype dt, const float *src, void *dst, size_t n) {
    uint8_t *d = dst;
    switch (dt) {
    case AREAL_DT_F32:
        memcpy(d, src, n * 4);
        return 0;
    case AREAL_DT_F16:
    case AREAL_DT_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = dt == AREAL_DT_F16 ? areal_f32_to_f16(src[i]) : areal_f32_to_bf16(src[i]);
            d[2 * i] = (uint8_t)h;
            d[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return 0;
    default:
        return -1;
    }
}
