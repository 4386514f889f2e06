/*
 * test_model_device.c - the device choice of areal/model/device.h on fake
 * environments: no GPU asked (unset, "void", "none", hidden by
 * CUDA_VISIBLE_DEVICES "" / "-1"), GPUs asked without a GPU path in the
 * build, without a loadable runtime, with 0 devices, and the GPU case; the
 * environment reader with setenv; the runtime probe on missing and on
 * symbol-less libraries; the pod leader from LOCAL_RANK.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "areal/model/device.h"

static areal_backend_choice pick(const char *nv, const char *cv, int count, bool built) {
    areal_device_env e = {nv, cv, count};
    return areal_backend_select("trainer", &e, built, "no GPU model in this build");
}

static void no_gpu_asked_runs_on_cpu_quietly(void **st) {
    (void)st;
    const char *nv[] = {NULL, "void", "none", "", "  ", "NoDevFiles"};
    for (size_t i = 0; i < sizeof nv / sizeof nv[0]; i++) {
        areal_backend_choice c = pick(nv[i], NULL, 4, true);
        assert_int_equal(c.kind, AREAL_BACKEND_CPU);
        assert_false(c.warn);
        assert_non_null(strstr(c.why, "no GPU"));
    }
    /* granted by the device plugin but hidden on purpose by CUDA_VISIBLE_DEVICES */
    const char *hide[] = {"", "-1", "-1,0"};
    for (size_t i = 0; i < sizeof hide / sizeof hide[0]; i++) {
        areal_backend_choice c = pick("all", hide[i], 4, true);
        assert_int_equal(c.kind, AREAL_BACKEND_CPU);
        assert_false(c.warn);
    }
}

static void gpus_asked_but_unusable_warn_with_the_reason(void **st) {
    (void)st;
    areal_backend_choice c = pick("all", NULL, 8, false); /* the build lacks the GPU path */
    assert_int_equal(c.kind, AREAL_BACKEND_CPU);
    assert_true(c.warn);
    assert_non_null(strstr(c.why, "trainer runs on the CPU"));
    assert_non_null(strstr(c.why, "NVIDIA_VISIBLE_DEVICES=all"));
    assert_non_null(strstr(c.why, "no GPU model in this build"));
    c = pick("0,1", NULL, -1, true); /* no runtime */
    assert_int_equal(c.kind, AREAL_BACKEND_CPU);
    assert_true(c.warn);
    assert_non_null(strstr(c.why, "libcudart"));
    c = pick(NULL, "0", 0, true); /* CUDA_VISIBLE_DEVICES alone asks too */
    assert_int_equal(c.kind, AREAL_BACKEND_CPU);
    assert_true(c.warn);
    assert_non_null(strstr(c.why, "0 devices"));
    assert_non_null(strstr(c.why, "CUDA_VISIBLE_DEVICES=0"));
}

static void gpu_when_asked_built_and_present(void **st) {
    (void)st;
    areal_backend_choice c = pick("GPU-1234", "0", 1, true);
    assert_int_equal(c.kind, AREAL_BACKEND_GPU);
    assert_false(c.warn);
    assert_non_null(strstr(c.why, "1 device(s)"));
}

static void env_reader_and_probe(void **st) {
    (void)st;
    unsetenv("NVIDIA_VISIBLE_DEVICES");
    unsetenv("CUDA_VISIBLE_DEVICES");
    areal_device_env e = areal_device_env_read(true); /* nothing asked: no probe */
    assert_null(e.nvidia_visible);
    assert_null(e.cuda_visible);
    assert_int_equal(e.device_count, -1);
    assert_false(areal_device_env_asks_gpu(&e));
    setenv("NVIDIA_VISIBLE_DEVICES", "all", 1);
    setenv("CUDA_VISIBLE_DEVICES", "1", 1);
    e = areal_device_env_read(false);
    assert_string_equal(e.nvidia_visible, "all");
    assert_string_equal(e.cuda_visible, "1");
    assert_int_equal(e.device_count, -1);
    assert_true(areal_device_env_asks_gpu(&e));
    unsetenv("NVIDIA_VISIBLE_DEVICES");
    unsetenv("CUDA_VISIBLE_DEVICES");
    assert_int_equal(areal_device_probe("/nonexistent/libcudart.so"), -1);
    assert_int_equal(areal_device_probe("libm.so.6"), -1); /* loads, has no cudaGetDeviceCount */
}

static void pod_leader_from_local_rank(void **st) {
    (void)st;
    unsetenv("LOCAL_RANK");
    assert_true(areal_device_pod_leader());
    setenv("LOCAL_RANK", "0", 1);
    assert_true(areal_device_pod_leader());
    setenv("LOCAL_RANK", "3", 1);
    assert_false(areal_device_pod_leader());
    unsetenv("LOCAL_RANK");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_gpu_asked_runs_on_cpu_quietly),
        cmocka_unit_test(gpus_asked_but_unusable_warn_with_the_reason),
        cmocka_unit_test(gpu_when_asked_built_and_present),
        cmocka_unit_test(env_reader_and_probe),
        cmocka_unit_test(pod_leader_from_local_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
