/*
 * test_plan_memory.c - `arealctl plan --model`: the trainer ranks' memory
 * table (lib/layout's memory plan, itself checked against the worker's
 * shards by worker/parallel's test_par_memplan) and the refusal of a layout
 * that does not fit --gpu-memory: exit 2, one line naming the largest part
 * and the dimension to grow.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "child.h"

#define QWEN3 "worker/model/tests/fixtures/ref-qwen3"

typedef struct run_result {
    int status;
    char out[1 << 18];
    char err[8192];
} run_result;

static run_result result;

static run_result *run(const char *first, ...) {
    const char *bin = getenv("AREALCTL") ? getenv("AREALCTL") : "build/rel/arealctl";
    va_list ap;
    va_start(ap, first);
    int rc = child_run_va(bin, first, ap, &result.status, result.out, sizeof result.out, result.err,
                          sizeof result.err);
    va_end(ap);
    assert_int_equal(rc, 0);
    return &result;
}

static void table_of_the_trainer(void **state) {
    (void)state;
    run_result *r = run("plan", "--alloc", "sglang:d2+megatron:d2p2", "--model", QWEN3,
                        "--mb-tokens", "64", "--n-mb", "2", NULL);
    if (r->status != 0)
        fail_msg("exit %d: %s", r->status, r->err);
    const char *t = strstr(r->out, "MEMORY per trainer rank");
    assert_non_null(t);
    assert_non_null(strstr(t, "64 tokens a micro-batch"));
    /* one row, the trainer's (the rollout servers are not trainers) */
    assert_non_null(strstr(t, "\ntrainer "));
    assert_null(strstr(t, "\nrollout "));
    /* the same job fits a large GPU */
    r = run("plan", "--alloc", "sglang:d2+megatron:d2p2", "--model", QWEN3, "--gpu-memory", "80Gi",
            NULL);
    assert_int_equal(r->status, 0);
}

/* fsdp:d4 shards parameters and gradients too: less per rank than megatron:d4's ZeRO-1. */
static void fsdp_shards_the_parameters(void **state) {
    (void)state;
    /* a Qwen3-8B-shaped config (the fixtures' sizes round to 0.00 GiB) */
    static const char cfg[] =
        "{\"architectures\":[\"Qwen3ForCausalLM\"],\"head_dim\":128,\"hidden_size\":4096,"
        "\"intermediate_size\":12288,\"model_type\":\"qwen3\",\"num_attention_heads\":32,"
        "\"num_hidden_layers\":36,\"num_key_value_heads\":8,\"rms_norm_eps\":1e-06,"
        "\"rope_theta\":1000000.0,\"tie_word_embeddings\":false,\"vocab_size\":151936,"
        "\"max_position_embeddings\":40960,\"torch_dtype\":\"bfloat16\"}";
    char path[] = "/tmp/areal-plan-fsdp-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, cfg, sizeof cfg - 1), (ssize_t)(sizeof cfg - 1));
    close(fd);
    static char mega[sizeof result.out];
    run_result *r = run("plan", "--alloc", "sglang:d2+megatron:d4", "--model", path, "--mb-tokens",
                        "1024", "--seq-len", "1024", NULL);
    assert_int_equal(r->status, 0);
    memcpy(mega, r->out, sizeof mega);
    r = run("plan", "--alloc", "sglang:d2+fsdp:d4", "--model", path, "--mb-tokens", "1024",
            "--seq-len", "1024", NULL);
    unlink(path);
    if (r->status != 0)
        fail_msg("exit %d: %s", r->status, r->err);
    const char *t = strstr(r->out, "MEMORY per trainer rank"), *m = strstr(mega, "MEMORY per");
    assert_non_null(t);
    assert_non_null(m);
    t = strstr(t, "\ntrainer "), m = strstr(m, "\ntrainer ");
    assert_non_null(t);
    assert_non_null(m);
    double fp = 0, fg = 0, mp = 0, mg = 0, fgath = -1, mgath = -1;
    assert_int_equal(
        sscanf(t, "\ntrainer %*d %*d %lf GiB %lf GiB %*f GiB %*f GiB %lf", &fp, &fg, &fgath), 3);
    assert_int_equal(
        sscanf(m, "\ntrainer %*d %*d %lf GiB %lf GiB %*f GiB %*f GiB %lf", &mp, &mg, &mgath), 3);
    printf("fsdp:d4 params %.4f GiB grads %.4f gathered %.4f; megatron:d4 params %.4f grads %.4f\n",
           fp, fg, fgath, mp, mg);
    assert_true(fp < mp / 3 && fg < mg / 3);
    assert_true(fgath > 0 && mgath == 0);
}

static void refusal_names_what_to_grow(void **state) {
    (void)state;
    run_result *r = run("plan", "--alloc", "sglang:d2+megatron:d2p2", "--model", QWEN3,
                        "--mb-tokens", "4096", "--gpu-memory", "64Mi", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "arealctl: role trainer does not fit --gpu-memory"));
    assert_non_null(strstr(r->err, "largest part is the activations"));
    assert_non_null(strstr(r->err, "grow tp or pp"));
    /* a split the model refuses, naming the field */
    r = run("plan", "--alloc", "sglang:d2+megatron:d1t8", "--model", QWEN3, NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "tp 8 must divide num_attention_heads"));
    r = run("plan", "--gpu-memory", "1Gi", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "--gpu-memory needs --model"));
    r = run("plan", "--model", QWEN3, "--gpu-memory", "lots", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "expected bytes"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_of_the_trainer),
        cmocka_unit_test(fsdp_shards_the_parameters),
        cmocka_unit_test(refusal_names_what_to_grow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
