/*
 * test_rollout_backend.c - the rollout engine's backend seam (areal/rollout/backend.h)
 * on fake environments: a pod without GPUs serves on the CPU quietly; a pod
 * with GPUs gets the GPU where this build has the GPU model, else the CPU and
 * a warning naming the rollout engine and what is missing. The GPU cache's
 * table width, and an engine asked for the GPU where it cannot have it
 * (here: no device, or no GPU model in the build) refusing with the reason
 * and leaving the model the caller's, so the server can start a CPU engine.
 */
#include "areal/rollout/backend.h"
#include "engine_test_util.h"

static void rollout_choice(void **st) {
    (void)st;
    areal_device_env none = {NULL, NULL, -1};
    areal_backend_choice c = areal_rollout_backend(&none);
    assert_int_equal(c.kind, AREAL_BACKEND_CPU);
    assert_false(c.warn);
    areal_device_env gpus = {"all", NULL, 2};
    c = areal_rollout_backend(&gpus);
    assert_int_equal(c.kind, areal_rollout_gpu_built() ? AREAL_BACKEND_GPU : AREAL_BACKEND_CPU);
    assert_int_equal(c.warn, !areal_rollout_gpu_built());
    assert_non_null(strstr(c.why, "rollout"));
    if (!areal_rollout_gpu_built())
        assert_non_null(strstr(c.why, "GPU model"));
    areal_device_env hidden = {"all", "-1", 3}; /* CUDA_VISIBLE_DEVICES hides them all */
    c = areal_rollout_backend(&hidden);
    assert_int_equal(c.kind, AREAL_BACKEND_CPU);
}

static void table_width(void **st) {
    (void)st;
    assert_int_equal(areal_rollout_gpu_max_blocks(4096, 16, 1000), 256);
    assert_int_equal(areal_rollout_gpu_max_blocks(4097, 16, 1000), 257);     /* rounded up */
    assert_int_equal(areal_rollout_gpu_max_blocks(1 << 30, 16, 1000), 1000); /* all there are */
    assert_int_equal(areal_rollout_gpu_max_blocks(0, 16, 12), 12);           /* unknown context */
    assert_int_equal(areal_rollout_gpu_max_blocks(100, 0, 12), 0);
}

/* asked for the GPU without a device (or a GPU model): refused, the model still the caller's;
 * on a machine with a GPU the same call makes a GPU engine that serves */
static void gpu_engine_where_it_cannot(void **st) {
    (void)st;
    areal_model m;
    et_load(&m, "ref-qwen2");
    areal_engine_config cfg = {.kv_bytes = 4u << 20, .gpu = true};
    areal_engine *e = NULL;
    areal_error err;
    int rc = areal_engine_create(&m, &cfg, &e, &err);
    if (rc == AREAL_OK) { /* a device and the GPU model: nothing to refuse here */
        areal_engine_destroy(e);
        return;
    }
    assert_null(e);
    assert_non_null(m.params); /* still the caller's: a CPU engine can take it */
    if (!areal_rollout_gpu_built())
        assert_non_null(strstr(err.msg, "no GPU model"));
    cfg.gpu = false;
    if (areal_engine_create(&m, &cfg, &e, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    areal_engine_destroy(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(rollout_choice),
                                       cmocka_unit_test(table_width),
                                       cmocka_unit_test(gpu_engine_where_it_cannot)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
