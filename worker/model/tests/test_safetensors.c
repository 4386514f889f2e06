/*
 * test_safetensors.c - the safetensors reader and writer: fp16/bf16 edge
 * values against the bit patterns numpy gave, byte-exact rewrites of files the
 * Python package wrote, conversion properties, and every malformed header.
 */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "areal/model/safetensors.h"
#include "model_test_util.h"

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void edge_values_load_as_numpy_says(void **state) {
    (void)state;
    areal_st_file f;
    areal_error err;
    assert_int_equal(areal_st_open(FIX "dtypes/special.safetensors", &f, &err), AREAL_OK);
    json_t *want = json_load_file(FIX "dtypes/special.json", 0, NULL);
    assert_non_null(want);
    const char *names[] = {"f16", "bf16", "f32"};
    for (int k = 0; k < 3; k++) {
        const areal_st_tensor *t = areal_st_header_find(&f.hdr, names[k]);
        assert_non_null(t);
        json_t *w = json_object_get(want, names[k]);
        assert_int_equal(t->numel, json_array_size(w));
        float out[16];
        assert_int_equal(areal_st_read_f32(&f, t, out, 16, &err), AREAL_OK);
        for (size_t i = 0; i < t->numel; i++) {
            uint32_t expect = (uint32_t)json_integer_value(json_array_get(w, i));
            if (bits(out[i]) != expect)
                fail_msg("%s[%zu]: got 0x%08x, numpy 0x%08x", names[k], i, bits(out[i]), expect);
        }
        assert_int_equal(areal_st_read_f32(&f, t, out, t->numel - 1, &err), AREAL_ERANGE);
    }
    const areal_st_tensor *t = areal_st_header_find(&f.hdr, "f16");
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 7);
    assert_null(areal_st_header_find(&f.hdr, "nope"));
    assert_int_equal(f.hdr.n_meta, 1);
    assert_string_equal(f.hdr.meta_keys[0], "note");
    assert_string_equal(f.hdr.meta_values[0], "edge values");
    json_decref(want);
    areal_st_close(&f);
}

/* A streamed write's source: the tensors' data, handed out one at a time, and the count. */
typedef struct stream_src {
    const areal_st_out *t;
    size_t asked;
} stream_src;

static int stream_fill(void *ctx, size_t i, const void **data, areal_error *err) {
    (void)err;
    stream_src *s = ctx;
    *data = s->t[i].data;
    s->asked++;
    return AREAL_OK;
}

static void expect_same_file(const char *a_path, const char *b_path) {
    size_t a_len = 0, b_len = 0;
    char *a = mt_read(a_path, &a_len), *b = mt_read(b_path, &b_len);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a_len, b_len);
    assert_memory_equal(a, b, a_len);
    free(a);
    free(b);
}

/* Rewrites a file through the writer, whole and streamed, and expects the very same bytes. */
static void rewrite_identical(const char *path) {
    areal_st_file f;
    areal_error err;
    assert_int_equal(areal_st_open(path, &f, &err), AREAL_OK);
    areal_st_out *out = calloc(f.hdr.n_tensors + 1, sizeof *out);
    assert_non_null(out);
    /* hand the writer the tensors in reverse header order: it must restore the layout */
    for (size_t i = 0; i < f.hdr.n_tensors; i++) {
        const areal_st_tensor *t = &f.hdr.tensors[f.hdr.n_tensors - 1 - i];
        out[i] = (areal_st_out){t->name, t->dtype, t->ndim, t->shape, areal_st_data(&f, t)};
    }
    const char *meta[8];
    for (size_t i = 0; i < f.hdr.n_meta; i++) {
        meta[2 * i] = f.hdr.meta_keys[i];
        meta[2 * i + 1] = f.hdr.meta_values[i];
    }
    char dir[256], p[300];
    assert_int_equal(mt_tmpdir(dir, sizeof dir), 0);
    mt_path(p, sizeof p, dir, "out.safetensors");
    assert_int_equal(areal_st_write(p, out, f.hdr.n_tensors, meta, f.hdr.n_meta, &err), AREAL_OK);
    expect_same_file(path, p);
    /* streamed: no data in the list, each tensor's asked for once, in the file's order */
    areal_st_out *bare = calloc(f.hdr.n_tensors + 1, sizeof *bare);
    assert_non_null(bare);
    for (size_t i = 0; i < f.hdr.n_tensors; i++)
        bare[i] = out[i], bare[i].data = NULL;
    stream_src src = {out, 0};
    mt_path(p, sizeof p, dir, "streamed.safetensors");
    assert_int_equal(areal_st_write_stream(p, bare, f.hdr.n_tensors, meta, f.hdr.n_meta,
                                           stream_fill, &src, &err),
                     AREAL_OK);
    assert_int_equal(src.asked, f.hdr.n_tensors);
    expect_same_file(path, p);
    free(bare);
    free(out);
    areal_st_close(&f);
    mt_rmdir(dir);
}

static void python_files_round_trip_bit_exact(void **state) {
    (void)state;
    rewrite_identical(FIX "roundtrip/mixed.safetensors");
    rewrite_identical(FIX "roundtrip/nometa.safetensors");
    rewrite_identical(FIX "qwen2/model.safetensors");
    rewrite_identical(FIX "qwen2-fp16/model.safetensors");
}

static void writer_escapes_and_refuses(void **state) {
    (void)state;
    char dir[256], p[300];
    assert_int_equal(mt_tmpdir(dir, sizeof dir), 0);
    mt_path(p, sizeof p, dir, "w.safetensors");
    float v[4] = {1, 2, 3, 4};
    int64_t shape[2] = {2, 2};
    areal_st_out t[2] = {{"we\"ird\\na\tme\x01", AREAL_DT_F32, 2, shape, v},
                         {"half", AREAL_DT_F16, 1, shape, v}};
    areal_error err;
    const char *meta[] = {"k", "v\n"};
    assert_int_equal(areal_st_write(p, t, 2, meta, 1, &err), AREAL_OK);
    areal_st_file f;
    assert_int_equal(areal_st_open(p, &f, &err), AREAL_OK);
    assert_int_equal(f.hdr.header_len % 8, 0);
    const areal_st_tensor *w = areal_st_header_find(&f.hdr, "we\"ird\\na\tme\x01");
    assert_non_null(w);
    assert_int_equal(w->begin, 0); /* F32 sorts before F16 */
    size_t len;
    char *raw = mt_read(p, &len);
    assert_non_null(strstr(raw + 8, "\\u0001"));
    free(raw);
    areal_st_close(&f);
    t[1].name = t[0].name;
    assert_int_equal(areal_st_write(p, t, 2, NULL, 0, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "appears twice"));
    t[1].name = "__metadata__";
    assert_int_equal(areal_st_write(p, t, 2, NULL, 0, &err), AREAL_EINVAL);
    int64_t neg[1] = {-1};
    areal_st_out bad = {"x", AREAL_DT_F32, 1, neg, v};
    assert_int_equal(areal_st_write(p, &bad, 1, NULL, 0, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "\"x\""));
    const char *dup_meta[] = {"k", "1", "k", "2"};
    assert_int_equal(areal_st_write(p, t, 1, dup_meta, 2, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "metadata key \"k\""));
    /* an empty name is legal in the format: written and read back */
    areal_st_out unnamed = {"", AREAL_DT_F32, 1, shape, v};
    assert_int_equal(areal_st_write(p, &unnamed, 1, NULL, 0, &err), AREAL_OK);
    assert_int_equal(areal_st_open(p, &f, &err), AREAL_OK);
    assert_non_null(areal_st_header_find(&f.hdr, ""));
    areal_st_close(&f);
    /* an empty file is too short, not a crash */
    assert_int_equal(mt_write(p, "", 0), 0);
    assert_int_equal(areal_st_open(p, &f, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "too short"));
    mt_path(p, sizeof p, dir, "no/such/dir.safetensors");
    assert_int_equal(areal_st_write(p, t, 1, NULL, 0, &err), AREAL_EIO);
    mt_rmdir(dir);
}

static void half_conversions_are_exact_and_round_to_nearest(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = areal_f16_to_f32((uint16_t)h);
        if (isnan(f)) {
            assert_true(isnan(areal_f16_to_f32(areal_f32_to_f16(f))));
            continue;
        }
        assert_int_equal(areal_f32_to_f16(f), h); /* every fp16 value survives fp32 */
        float g = areal_bf16_to_f32((uint16_t)h);
        if (!isnan(g))
            assert_int_equal(areal_f32_to_bf16(g), h);
    }
    /* random fp32 values: the result is a nearest representable value */
    uint64_t s = 12345;
    for (int i = 0; i < 200000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        float f = from_bits((uint32_t)(s >> 32));
        if (isnan(f))
            continue;
        uint16_t h = areal_f32_to_f16(f);
        double got = areal_f16_to_f32(h);
        if (isinf(got)) {
            assert_true(fabs(f) >= 65520.0);
            continue;
        }
        double up = areal_f16_to_f32((uint16_t)(h + 1)), dn = areal_f16_to_f32((uint16_t)(h - 1));
        double err = fabs(got - f);
        if ((h & 0x7fff) != 0x7bff && !isnan(up) && (h & 0x7fff) != 0)
            assert_true(err <= fabs(up - f) && err <= fabs(dn - f));
        uint16_t b = areal_f32_to_bf16(f);
        double bg = areal_bf16_to_f32(b);
        if (!isinf(bg)) {
            double bu = areal_bf16_to_f32((uint16_t)(b + 1));
            double bd = areal_bf16_to_f32((uint16_t)(b - 1));
            if (!isnan(bu) && !isinf(bu) && (b & 0x7fff) != 0)
                assert_true(fabs(bg - f) <= fabs(bu - f) && fabs(bg - f) <= fabs(bd - f));
        }
    }
    assert_int_equal(areal_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(areal_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(areal_f32_to_f16(from_bits(0x33000000)), 0); /* 2^-25 ties to even 0 */
    assert_int_equal(areal_f32_to_f16(from_bits(0x33000001)), 1);
    assert_int_equal(areal_f32_to_bf16(from_bits(0x3f808000)), 0x3f80); /* tie to even */
    assert_int_equal(areal_f32_to_bf16(from_bits(0x3f818000)), 0x3f82);
    uint8_t buf[8];
    float in[2] = {1.0f, -2.0f}, back[2];
    assert_int_equal(areal_dtype_from_f32(AREAL_DT_BF16, in, buf, 2), 0);
    assert_int_equal(areal_dtype_to_f32(AREAL_DT_BF16, buf, back, 2), 0);
    assert_true(back[0] == 1.0f && back[1] == -2.0f);
    assert_int_equal(areal_dtype_from_f32(AREAL_DT_I32, in, buf, 2), -1);
    assert_int_equal(areal_dtype_to_f32(AREAL_DT_U8, buf, back, 2), -1);
}

static void dtype_names(void **state) {
    (void)state;
    for (int d = 0; d < AREAL_DT_COUNT; d++) {
        areal_dtype back;
        assert_int_equal(areal_dtype_parse(areal_dtype_name((areal_dtype)d), &back), 0);
        assert_int_equal(back, d);
        assert_true(areal_dtype_size((areal_dtype)d) > 0);
    }
    areal_dtype x;
    assert_int_equal(areal_dtype_parse("F128", &x), -1);
    assert_string_equal(areal_dtype_name(AREAL_DT_COUNT), "?");
}

/* Builds a file from a header string and data length, parses it, expects `needle`. */
static void expect_bad(const char *header, size_t data_len, const char *needle) {
    size_t hl = strlen(header);
    size_t len = 8 + hl + data_len;
    uint8_t *buf = calloc(1, len);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, header, hl);
    areal_st_header h;
    areal_error err;
    int rc = areal_st_header_parse(buf, len, "bad.safetensors", &h, &err);
    free(buf);
    assert_int_equal(rc, AREAL_EINVAL);
    assert_int_equal(h.n_tensors, 0);
    if (strstr(err.msg, needle) == NULL || strstr(err.msg, "bad.safetensors") == NULL)
        fail_msg("expected \"%s\" and the file name in: %s", needle, err.msg);
}

static void bad_headers_are_refused(void **state) {
    (void)state;
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "past the");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               12, "overlap");
    expect_bad("{\"a\":{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
               "12 bytes but data_offsets span 8");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
               8, "duplicate");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "shape[0]");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
               "\"data_offsets\":[0,8]}}",
               8, "overflows");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "begin");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "data_offsets");
    expect_bad("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype");
    expect_bad("{\"a\":[1,2]}", 8, "object");
    expect_bad("{\"__metadata__\":{\"k\":1}}", 0, "__metadata__");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, "malformed");
    expect_bad("[1,2,3]", 0, "'{'");
    /* length field issues */
    uint8_t small[4] = {0};
    areal_st_header h;
    areal_error err;
    assert_int_equal(areal_st_header_parse(small, 4, "tiny.safetensors", &h, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "too short"));
    uint8_t huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    assert_int_equal(areal_st_header_parse(huge, 16, "huge.safetensors", &h, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "absurd"));
    uint8_t past[16] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    assert_int_equal(areal_st_header_parse(past, 16, "past.safetensors", &h, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "truncated"));
}

static void truncated_real_file(void **state) {
    (void)state;
    size_t len = 0;
    char *raw = mt_read(FIX "qwen2/model.safetensors", &len);
    assert_non_null(raw);
    char dir[256], p[300];
    assert_int_equal(mt_tmpdir(dir, sizeof dir), 0);
    mt_path(p, sizeof p, dir, "cut.safetensors");
    assert_int_equal(mt_write(p, raw, len - 100), 0);
    areal_st_file f;
    areal_error err;
    assert_int_equal(areal_st_open(p, &f, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "cut.safetensors"));
    assert_non_null(strstr(err.msg, "truncated"));
    assert_int_equal(areal_st_open(FIX "qwen2/missing.safetensors", &f, &err), AREAL_EIO);
    assert_non_null(strstr(err.msg, "missing.safetensors"));
    /* an integer tensor is valid in a header but does not load as fp32 */
    int32_t iv[2] = {1, 2};
    int64_t shape[1] = {2};
    areal_st_out t = {"ints", AREAL_DT_I32, 1, shape, iv};
    mt_path(p, sizeof p, dir, "ints.safetensors");
    assert_int_equal(areal_st_write(p, &t, 1, NULL, 0, &err), AREAL_OK);
    assert_int_equal(areal_st_open(p, &f, &err), AREAL_OK);
    float out[2];
    assert_int_equal(areal_st_read_f32(&f, &f.hdr.tensors[0], out, 2, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "I32"));
    areal_st_close(&f);
    free(raw);
    mt_rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(edge_values_load_as_numpy_says),
        cmocka_unit_test(python_files_round_trip_bit_exact),
        cmocka_unit_test(writer_escapes_and_refuses),
        cmocka_unit_test(half_conversions_are_exact_and_round_to_nearest),
        cmocka_unit_test(dtype_names),
        cmocka_unit_test(bad_headers_are_refused),
        cmocka_unit_test(truncated_real_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
