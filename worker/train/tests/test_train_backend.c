/*
 * test_train_backend.c - the trainer's backend seam (areal/train/backend.h)
 * on fake environments: a pod without GPUs trains on the CPU quietly; a pod
 * with GPUs gets the GPU where this build has the GPU model, else the CPU
 * and a warning naming the trainer and what is missing. Also the host-side
 * rules of the GPU path that need no device: the order of the refusals of
 * areal_trainer_use_gpu (each with its reason, which the loop logs once
 * before training on the CPU), the GPU plan's micro-batch budget, and that a
 * fresh trainer's step goes through the CPU implementation of the seam.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "areal/train/backend.h"
#include "areal/train/trainer.h"

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
    /* asked for and built, but no driver: the CPU with the reason, whatever the build */
    areal_device_env nodrv = {"all", NULL, -1};
    c = areal_train_backend(&nodrv);
    assert_int_equal(c.kind, AREAL_BACKEND_CPU);
    assert_true(c.warn);
    assert_non_null(strstr(c.why, areal_train_gpu_built() ? "libcudart" : "GPU model"));
}

/* refusals in order: no GPU model in the build, then a layout, then GSPO (before any device) */
static void use_gpu_refusals(void **st) {
    (void)st;
    areal_trainer t;
    memset(&t, 0, sizeof t);
    t.par = (struct areal_train_par *)&t; /* never dereferenced: the first check refuses */
    t.actor.sequence_level_is = true;
    areal_error e;
    assert_int_equal(areal_trainer_use_gpu(&t, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, areal_train_gpu_built() ? "layout" : "no GPU model"));
    t.par = NULL;
    assert_int_equal(areal_trainer_use_gpu(&t, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, areal_train_gpu_built() ? "sequence" : "no GPU model"));
    assert_null(t.ops); /* a refusal leaves the trainer as it was */
    assert_null(t.be_state);
}

static void plan_tokens(void **st) {
    (void)st;
    assert_int_equal(areal_train_gpu_plan_tokens(0, 1), 256);        /* the floor */
    assert_int_equal(areal_train_gpu_plan_tokens(0, 257), 512);      /* rounded up to 256 */
    assert_int_equal(areal_train_gpu_plan_tokens(4096, 300), 4096);  /* the setting */
    assert_int_equal(areal_train_gpu_plan_tokens(1000, 3000), 3072); /* a longer first batch */
    assert_int_equal(areal_train_gpu_plan_tokens(-5, 0), 256);
}

static void cpu_ops_named(void **st) {
    (void)st;
    assert_string_equal(areal_train_cpu_ops.name, "cpu");
    assert_non_null(areal_train_cpu_ops.logprobs);
    assert_non_null(areal_train_cpu_ops.accum);
    assert_non_null(areal_train_cpu_ops.apply);
    assert_null(areal_train_cpu_ops.release); /* the CPU state is the trainer's own */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(trainer_choice), cmocka_unit_test(use_gpu_refusals),
        cmocka_unit_test(plan_tokens), cmocka_unit_test(cpu_ops_named)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
