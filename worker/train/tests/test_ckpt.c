/*
 * test_ckpt.c - recover checkpoints: a save loads back bit for bit (weights,
 * moments, every state field including a 64-bit RNG), only the two newest
 * are kept, and a corrupted, truncated or unfinished newest checkpoint is
 * refused with the file named while the previous one is used.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/train/ckpt.h"
#include "areal/train/tiny.h"

typedef struct fixture {
    char dir[256], src[300], root[300];
    areal_model m;
    float *ma, *va;
    char log[4][1024];
    int n_log;
} fixture;

static void logline(void *ctx, const char *line) {
    fixture *f = ctx;
    if (f->n_log < 4)
        snprintf(f->log[f->n_log++], sizeof f->log[0], "%s", line);
}

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(f->dir, sizeof f->dir, "%s/areal-ckpt-XXXXXX", t);
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->src, sizeof f->src, "%s/src", f->dir);
    snprintf(f->root, sizeof f->root, "%s/recover", f->dir);
    assert_int_equal(mkdir(f->src, 0755), 0);
    areal_tiny_cfg tc = areal_tiny_default();
    areal_error err;
    assert_int_equal(areal_tiny_create(f->src, &tc, &err), AREAL_OK);
    assert_int_equal(areal_model_load(&f->m, f->src, NULL, &err), AREAL_OK);
    f->ma = calloc(f->m.n_params, sizeof(float));
    f->va = calloc(f->m.n_params, sizeof(float));
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        return -1;
    areal_model_free(&f->m);
    free(f->ma);
    free(f->va);
    free(f);
    return 0;
}

static areal_ckpt_state state_of(long step) {
    areal_ckpt_state s;
    memset(&s, 0, sizeof s);
    s.step = step;
    s.version = step;
    s.adam_step = step * 2;
    s.data_epoch = 1;
    s.data_index = step % 5;
    s.rng = 0xfedcba9876543210ull + (uint64_t)step;
    s.counters.batch_size = 4;
    s.counters.accepted = step * 4;
    s.counters.eta = 2;
    s.counters.max_concurrent = 8;
    return s;
}

static void save_step(fixture *f, long step) {
    for (size_t i = 0; i < f->m.n_params; i++) {
        f->m.params[i] = (float)step + (float)i * 1e-4f;
        f->ma[i] = (float)step * 0.5f;
        f->va[i] = (float)i;
    }
    areal_ckpt_tensors t = {&f->m, f->src, f->ma, f->va, f->m.n_params};
    areal_ckpt_state s = state_of(step);
    areal_error err;
    if (areal_ckpt_save(f->root, &t, &s, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
}

static long load(fixture *f, char *used) {
    memset(f->m.params, 0, f->m.n_params * sizeof(float));
    areal_ckpt_tensors t = {&f->m, f->src, f->ma, f->va, f->m.n_params};
    areal_ckpt_state s;
    areal_error err;
    int rc = areal_ckpt_load(f->root, &t, &s, used, 512, logline, f, &err);
    if (rc != AREAL_OK)
        return -1;
    areal_ckpt_state want = state_of(s.step);
    assert_memory_equal(&s, &want, sizeof s);
    assert_true(f->m.params[1] == (float)s.step + 1e-4f);
    assert_true(f->ma[3] == (float)s.step * 0.5f);
    assert_true(f->va[7] == 7.0f);
    return s.step;
}

static void round_trip_and_keep_two(void **state) {
    fixture *f = *state;
    char used[512], path[600];
    assert_int_equal(load(f, used), -1); /* nothing yet: a fresh start */
    save_step(f, 1);
    save_step(f, 2);
    save_step(f, 3);
    assert_int_equal(load(f, used), 3);
    assert_non_null(strstr(used, "step_00000003"));
    snprintf(path, sizeof path, "%s/step_00000001", f->root);
    assert_int_not_equal(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/step_00000002/MANIFEST.json", f->root);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(f->n_log, 0);
}

static void corrupt_newest_is_refused_and_named(void **state) {
    fixture *f = *state;
    char used[512], path[600];
    save_step(f, 4);
    save_step(f, 5);
    /* flip one byte of the newest weights */
    snprintf(path, sizeof path, "%s/step_00000005/model/model.safetensors", f->root);
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    fseek(fp, -3, SEEK_END);
    int c = fgetc(fp);
    fseek(fp, -3, SEEK_END);
    fputc(c ^ 0x40, fp);
    fclose(fp);
    assert_int_equal(load(f, used), 4);
    assert_int_equal(f->n_log, 1);
    assert_non_null(strstr(f->log[0], "step_00000005/model/model.safetensors"));
    assert_non_null(strstr(f->log[0], "corrupted"));
}

static void partial_newest_is_refused(void **state) {
    fixture *f = *state;
    char used[512], path[600];
    save_step(f, 6);
    save_step(f, 7);
    /* a torn save: the optimizer file cut short */
    snprintf(path, sizeof path, "%s/step_00000007/optim.safetensors", f->root);
    assert_int_equal(truncate(path, 100), 0);
    assert_int_equal(load(f, used), 6);
    assert_non_null(strstr(f->log[0], "optim.safetensors"));
    assert_non_null(strstr(f->log[0], "truncated"));
    /* an unfinished one: no manifest */
    f->n_log = 0;
    snprintf(path, sizeof path, "%s/step_00000007/MANIFEST.json", f->root);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(load(f, used), 6);
    assert_non_null(strstr(f->log[0], "MANIFEST.json"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(round_trip_and_keep_two, setup, teardown),
        cmocka_unit_test_setup_teardown(corrupt_newest_is_refused_and_named, setup, teardown),
        cmocka_unit_test_setup_teardown(partial_newest_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
