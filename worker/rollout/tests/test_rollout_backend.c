/*
 * test_rollout_backend.c - the rollout engine's backend seam (areal/rollout/backend.h)
 * on fake environments: a pod without GPUs serves on the CPU quietly; a pod
 * with GPUs gets the CPU and a warning naming the rollout engine and what is
 * missing (the GPU decode is not wired into the scheduler yet, in every build).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "areal/rollout/backend.h"

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
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(rollout_choice)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
