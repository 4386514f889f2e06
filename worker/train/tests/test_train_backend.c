/*
 * test_train_backend.c - the trainer's backend seam (areal/train/backend.h)
 * on fake environments: a pod without GPUs trains on the CPU quietly; a pod
 * with GPUs gets the CPU and a warning naming the trainer and what is
 * missing (the GPU step is not wired into the loop yet, in every build).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "areal/train/backend.h"

static void trainer_choice(void **st) {
    (void)st;
    areal_device_env none = {NULL, NULL, -1};
    areal_backend_choice c = areal_train_backend(&none);
    assert_int_equal(c.kind, AREAL_BACKEND_CPU);
    assert_false(c.warn);
    areal_device_env gpus = {"all", NULL, 2};
    c = areal_train_backend(&gpus);
    assert_int_equal(c.kind, areal_train_gpu_built() ? AREAL_BACKEND_GPU : AREAL_BACKEND_CPU);
    assert_int_equal(c.warn, !areal_train_gpu_built());
    assert_non_null(strstr(c.why, "trainer"));
    if (!areal_train_gpu_built())
        assert_non_null(strstr(c.why, "GPU model"));
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(trainer_choice)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
