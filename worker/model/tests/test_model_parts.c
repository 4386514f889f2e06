/*
 * test_model_parts.c - the pieces around the CPU model: the thread pool
 * covers every index once; the entropy and logprob backward agree with
 * finite differences; bad batches, unsupported rope scaling and broken model
 * directories are refused with the field or file named.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "areal/model/heads.h"
#include "areal/model/model.h"
#include "areal/model/pool.h"
#include "model_test_util.h"

static void count_range(void *ctx, size_t b, size_t e) {
    int *hits = ctx;
    for (size_t i = b; i < e; i++)
        hits[i]++;
}

static void pool_covers_each_index_once(void **s) {
    (void)s;
    areal_pool *p;
    areal_error err;
    assert_int_equal(areal_pool_create(0, &p, &err), AREAL_EINVAL);
    assert_null(p);
    assert_non_null(strstr(err.msg, "1..256"));
    for (int threads = 1; threads <= 4; threads++) {
        assert_int_equal(areal_pool_create(threads, &p, &err), AREAL_OK);
        assert_int_equal(areal_pool_threads(p), threads);
        size_t sizes[] = {0, 1, 6, 7, 8, 10007};
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
            for (int rep = 0; rep < 3; rep++) {
                int *hits = calloc(sizes[k] + 1, sizeof(int));
                assert_non_null(hits);
                areal_pool_for(p, sizes[k], 7, count_range, hits);
                for (size_t i = 0; i < sizes[k]; i++)
                    assert_int_equal(hits[i], 1);
                assert_int_equal(hits[sizes[k]], 0);
                free(hits);
            }
        areal_pool_destroy(p);
    }
    areal_pool_destroy(NULL);
}

/* L = sum_t a_t logp_t + b_t H_t; analytic dL/dlogits against central differences. */
static void head_backward_matches_finite_differences(void **s) {
    (void)s;
    enum { T = 3, V = 7 };
    float z[T * V], dz[T * V], a[T] = {0.7f, -1.3f, 0.4f}, b[T] = {-0.5f, 0.9f, 1.1f};
    int32_t tgt[T] = {2, -1, 6};
    uint64_t x = 12345;
    for (int i = 0; i < T * V; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        z[i] = (float)((x >> 40) % 2000) / 500.0f - 2.0f;
    }
    for (int k = 0; k < 2; k++) {
        float temp = k == 0 ? 1.0f : 0.6f;
        areal_token_logprobs_backward(NULL, z, T, V, tgt, temp, a, b, dz);
        for (int i = 0; i < T * V; i++) {
            double l[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                float zz[T * V], lp[T], h[T];
                memcpy(zz, z, sizeof zz);
                zz[i] += sgn ? 1e-2f : -1e-2f;
                areal_token_logprobs(NULL, zz, T, V, tgt, temp, lp, h);
                l[sgn] = 0;
                for (int t = 0; t < T; t++)
                    l[sgn] += a[t] * lp[t] + b[t] * h[t];
            }
            double num = (l[1] - l[0]) / 2e-2;
            if (fabs(num - dz[i]) > 2e-3)
                fail_msg("temperature %g, logit %d: analytic %g, numeric %g", temp, i, dz[i], num);
        }
    }
    /* a target < 0 has logprob 0 */
    float lp[T];
    areal_token_logprobs(NULL, z, T, V, tgt, 1.0f, lp, NULL);
    assert_true(lp[1] == 0.0f);
    assert_true(lp[0] < 0.0f && lp[2] < 0.0f);
}

static void bad_batches_are_refused(void **s) {
    (void)s;
    areal_model m;
    areal_error err;
    if (areal_model_load(&m, FIX "ref-qwen2", NULL, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    int32_t tok[4] = {1, 2, 3, 96}, cu[3] = {0, 2, 4};
    areal_batch b = {tok, cu, 4, 2};
    areal_acts a;
    assert_int_equal(areal_model_forward(&m, &b, &a, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "token 3 is id 96"));
    assert_null(a.logits);
    assert_int_equal(areal_model_backward(&m, &a, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "successful forward"));
    tok[3] = 4;
    cu[1] = 4;
    assert_int_equal(areal_model_forward(&m, &b, &a, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "cu_seqlens[2]"));
    cu[1] = 2;
    cu[2] = 3;
    assert_int_equal(areal_model_forward(&m, &b, &a, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "n_tokens"));
    cu[2] = 4;
    assert_int_equal(areal_model_forward(&m, &b, &a, &err), AREAL_OK);
    assert_int_equal(a.T, 4);
    areal_acts_free(&a);
    areal_model_free(&m);
}

static void unsupported_rope_and_broken_dirs(void **s) {
    (void)s;
    areal_model_config c;
    areal_model m;
    areal_error err;
    assert_int_equal(areal_model_config_load(FIX "ref-qwen2/config.json", &c, &err), AREAL_OK);
    c.rope_scaling.type = AREAL_ROPE_YARN;
    c.rope_scaling.factor = 4;
    assert_int_equal(areal_model_init(&m, &c, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "rope_scaling.rope_type"));
    assert_null(m.params);
    assert_int_equal(areal_model_load(&m, FIX "no-such-model", NULL, &err), AREAL_EIO);
    assert_non_null(strstr(err.msg, "no-such-model"));
    /* a config whose sizes do not match the weights: named tensor and field */
    char dir[128], p[200];
    assert_int_equal(mt_tmpdir(dir, sizeof dir), 0);
    size_t n = 0;
    char *cfg = mt_read(FIX "ref-qwen2/config.json", &n);
    size_t wn = 0;
    char *w = mt_read(FIX "ref-qwen2/model.safetensors", &wn);
    assert_non_null(cfg);
    assert_non_null(w);
    char *at = strstr(cfg, "\"intermediate_size\": 48");
    assert_non_null(at);
    memcpy(at, "\"intermediate_size\": 40", 23);
    snprintf(p, sizeof p, "%s/config.json", dir);
    assert_int_equal(mt_write(p, cfg, n), 0);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    assert_int_equal(mt_write(p, w, wn), 0);
    assert_int_equal(areal_model_load(&m, dir, NULL, &err), AREAL_EINVAL);
    if (strstr(err.msg, "mlp.") == NULL || strstr(err.msg, "intermediate_size") == NULL)
        fail_msg("expected the tensor and the config field in: %s", err.msg);
    /* an architecture the model does not know: the file and the field */
    memcpy(at, "\"intermediate_size\": 48", 23);
    at = strstr(cfg, "\"qwen2\"");
    assert_non_null(at);
    memcpy(at, "\"gpt_2\"", 7);
    snprintf(p, sizeof p, "%s/config.json", dir);
    assert_int_equal(mt_write(p, cfg, n), 0);
    assert_int_equal(areal_model_load(&m, dir, NULL, &err), AREAL_EINVAL);
    if (strstr(err.msg, "config.json") == NULL || strstr(err.msg, "model_type") == NULL)
        fail_msg("expected the file and model_type in: %s", err.msg);
    free(cfg);
    free(w);
    mt_rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pool_covers_each_index_once),
        cmocka_unit_test(head_backward_matches_finite_differences),
        cmocka_unit_test(bad_batches_are_refused),
        cmocka_unit_test(unsupported_rope_and_broken_dirs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
