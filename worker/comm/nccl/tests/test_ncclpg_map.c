/*
 * test_ncclpg_map.c - the NCCL backend's parts that need no GPU: type and
 * reduction mapping, store key names, config and argument checks (all
 * before any CUDA call), and the no-device path of group creation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../src/ncclpg_internal.h"

/* CUDA maps memory where ASan keeps its shadow gap; harmless without ASan. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "protect_shadow_gap=0";
}

static void dtypes_map_to_nccl_types_of_the_same_size(void **state) {
    (void)state;
    const struct {
        areal_dtype t;
        ncclDataType_t nt;
    } want[] = {{AREAL_DT_F32, ncclFloat32},
                {AREAL_DT_BF16, ncclBfloat16},
                {AREAL_DT_F16, ncclFloat16},
                {AREAL_DT_I32, ncclInt32},
                {AREAL_DT_I64, ncclInt64}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ncclDataType_t nt = ncclNumTypes;
        assert_int_equal(areal_ncclpg_dtype(want[i].t, &nt), 0);
        assert_int_equal(nt, want[i].nt);
        assert_true(areal_comm_dtype_ok(want[i].t));
    }
    /* every type the CPU backend refuses, NCCL refuses too */
    for (int t = 0; t < AREAL_DT_COUNT; t++) {
        ncclDataType_t nt;
        assert_int_equal(areal_ncclpg_dtype((areal_dtype)t, &nt) == 0,
                         areal_comm_dtype_ok((areal_dtype)t));
    }
    assert_int_equal(areal_ncclpg_dtype(AREAL_DT_COUNT, &(ncclDataType_t){0}), -1);
}

static void redops_map_to_nccl_ops(void **state) {
    (void)state;
    ncclRedOp_t op;
    assert_int_equal(areal_ncclpg_redop(AREAL_SUM, &op), 0);
    assert_int_equal(op, ncclSum);
    assert_int_equal(areal_ncclpg_redop(AREAL_AVG, &op), 0);
    assert_int_equal(op, ncclAvg);
    assert_int_equal(areal_ncclpg_redop(AREAL_MAX, &op), 0);
    assert_int_equal(op, ncclMax);
    assert_int_equal(areal_ncclpg_redop(AREAL_REDOP_COUNT, &op), -1);
}

static void keys_are_named_under_the_group(void **state) {
    (void)state;
    char k[64];
    assert_int_equal(areal_ncclpg_key(k, sizeof k, "tp/3", -1, "joins"), 0);
    assert_string_equal(k, "nccl/tp/3/joins");
    assert_int_equal(areal_ncclpg_key(k, sizeof k, "tp/3", 12, "id"), 0);
    assert_string_equal(k, "nccl/tp/3/12/id");
    char small[12];
    assert_int_equal(areal_ncclpg_key(small, sizeof small, "tp/3", 0, "id"), -1);
    assert_string_equal(small, "");
}

static areal_ncclpg_config good_config(const int *ranks, int n) {
    areal_ncclpg_config c = {.store = (areal_store *)(uintptr_t)1,
                             .name = "dp/0",
                             .ranks = ranks,
                             .n = n,
                             .rank = ranks[n - 1],
                             .device = 0,
                             .timeout_ms = 1000};
    return c;
}

static void config_errors_name_the_field(void **state) {
    (void)state;
    const int ranks[] = {4, 7, 9};
    int me = -1;
    areal_error e;
    areal_ncclpg_config c = good_config(ranks, 3);
    assert_int_equal(areal_ncclpg_check_config(&c, &me, &e), AREAL_OK);
    assert_int_equal(me, 2);

    char longname[AREAL_COMM_GROUP_NAME_MAX + 1];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    const struct {
        const char *field;
        const char *expect;
    } cases[] = {{"name", "name must be"},  {"store", "store is NULL"},
                 {"n", "member ranks"},     {"device", "device -1"},
                 {"timeout", "timeout_ms"}, {"dup", "listed twice"},
                 {"rank", "not among its"}, {"negative", "negative global rank"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int dup[] = {4, 4, 9}, neg[] = {4, -2, 9};
        c = good_config(ranks, 3);
        if (strcmp(cases[i].field, "name") == 0)
            c.name = longname;
        else if (strcmp(cases[i].field, "store") == 0)
            c.store = NULL;
        else if (strcmp(cases[i].field, "n") == 0)
            c.n = 0;
        else if (strcmp(cases[i].field, "device") == 0)
            c.device = -1;
        else if (strcmp(cases[i].field, "timeout") == 0)
            c.timeout_ms = 0;
        else if (strcmp(cases[i].field, "dup") == 0)
            c.ranks = dup;
        else if (strcmp(cases[i].field, "rank") == 0)
            c.rank = 5;
        else
            c.ranks = neg;
        areal_error_clear(&e);
        assert_int_equal(areal_ncclpg_check_config(&c, &me, &e), AREAL_EINVAL);
        if (strstr(e.msg, cases[i].expect) == NULL)
            fail_msg("%s: message \"%s\" lacks \"%s\"", cases[i].field, e.msg, cases[i].expect);
    }
    /* creation checks the config before touching CUDA or the store */
    areal_ncclpg *g = (areal_ncclpg *)(uintptr_t)1;
    c = good_config(ranks, 3);
    c.rank = 5;
    assert_int_equal(areal_ncclpg_create(&c, &g, &e), AREAL_EINVAL);
    assert_null(g);
}

/* A group that never reached NCCL: argument checks must fail before using it. */
static areal_ncclpg fake_group(void) {
    areal_ncclpg g;
    memset(&g, 0, sizeof g);
    snprintf(g.name, sizeof g.name, "tp/1");
    g.n = 4;
    g.me = 1;
    g.timeout_ms = 1000;
    pthread_mutex_init(&g.mu, NULL);
    areal_error_set(&g.broken, AREAL_EIO, -1, "nccl group tp/1: broken on purpose");
    return g;
}

static void op_argument_errors_come_first(void **state) {
    (void)state;
    areal_ncclpg g = fake_group();
    areal_error e;
    float buf[16];
    size_t cnt[4] = {1, 1, 1, 1}, dsp[4] = {0, 1, 2, 3};
    ncclDataType_t nt;
    ncclRedOp_t nop;
    assert_int_equal(areal_ncclpg_check_args(&g, "all_reduce", buf, buf, 4, 1, AREAL_DT_F32,
                                             AREAL_SUM, &nt, &nop, &e),
                     AREAL_OK);
    assert_int_equal(areal_ncclpg_check_args(&g, "all_gather", buf, buf, SIZE_MAX / 8, 4,
                                             AREAL_DT_F32, AREAL_SUM, &nt, NULL, &e),
                     AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "overflows"));

    assert_int_equal(areal_ncclpg_all_reduce(&g, buf, 4, AREAL_DT_F64, AREAL_SUM, &e),
                     AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "tp/1"));
    assert_non_null(strstr(e.msg, "all_reduce"));
    assert_non_null(strstr(e.msg, "F64"));
    assert_int_equal(areal_ncclpg_all_reduce(&g, buf, 4, AREAL_DT_F32, AREAL_REDOP_COUNT, &e),
                     AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "reduction"));
    assert_int_equal(areal_ncclpg_reduce_scatter(&g, NULL, buf, 4, AREAL_DT_F32, AREAL_SUM, &e),
                     AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "NULL buffer"));
    assert_int_equal(areal_ncclpg_broadcast(&g, buf, 4, AREAL_DT_I32, 4, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "root 4"));
    assert_int_equal(areal_ncclpg_send(&g, buf, 4, AREAL_DT_I32, 1, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "other than this rank"));
    assert_int_equal(areal_ncclpg_recv(&g, buf, 4, AREAL_DT_I32, -1, &e), AREAL_EINVAL);
    assert_int_equal(areal_ncclpg_all_to_allv(&g, buf, NULL, dsp, buf, cnt, dsp, AREAL_DT_F32, &e),
                     AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "scounts"));
    size_t huge[4] = {SIZE_MAX, 0, 0, 0};
    assert_int_equal(areal_ncclpg_all_to_allv(&g, buf, huge, dsp, buf, cnt, dsp, AREAL_DT_F32, &e),
                     AREAL_EINVAL);
    assert_int_equal(areal_ncclpg_all_to_all(NULL, buf, buf, 1, AREAL_DT_F32, &e), AREAL_EINVAL);
    /* valid arguments reach the group, which reports its recorded failure */
    assert_int_equal(areal_ncclpg_all_gather(&g, buf, buf, 4, AREAL_DT_F32, &e), AREAL_EIO);
    assert_string_equal(e.msg, "nccl group tp/1: broken on purpose");
    assert_int_equal(areal_ncclpg_barrier(&g, &e), AREAL_EIO);
    pthread_mutex_destroy(&g.mu);
}

/* Without a GPU, device discovery and creation fail with a message, never crash. */
static void no_device_path_is_an_error_not_a_crash(void **state) {
    (void)state;
    areal_error e;
    areal_error_clear(&e);
    int n = areal_ncclpg_devices(&e);
    if (n >= 1) {
        print_message("a CUDA device is present (%d): only the GPU tests check it\n", n);
        assert_int_equal(e.code, AREAL_OK);
        return;
    }
    assert_int_equal(n, AREAL_EIO);
    assert_non_null(strstr(e.msg, "no CUDA device"));
    areal_store_server *srv = NULL;
    areal_store *st = NULL;
    int port = 0;
    assert_int_equal(areal_store_server_start("127.0.0.1", 0, &srv, &port, &e), AREAL_OK);
    assert_int_equal(areal_store_connect("127.0.0.1", port, 2000, 2000, &st, &e), AREAL_OK);
    const int ranks[] = {0};
    areal_ncclpg_config c = {.store = st,
                             .name = "solo",
                             .ranks = ranks,
                             .n = 1,
                             .rank = 0,
                             .device = 0,
                             .timeout_ms = 2000};
    areal_ncclpg *g = NULL;
    assert_int_equal(areal_ncclpg_create(&c, &g, &e), AREAL_EIO);
    assert_null(g);
    assert_non_null(strstr(e.msg, "solo"));
    assert_non_null(strstr(e.msg, "cudaSetDevice"));
    int exists = 1;
    assert_int_equal(areal_store_check(st, "nccl/solo/joins", &exists, &e), AREAL_OK);
    assert_int_equal(exists, 0); /* failed before the id exchange */
    areal_store_close(st);
    areal_store_server_stop(srv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dtypes_map_to_nccl_types_of_the_same_size),
        cmocka_unit_test(redops_map_to_nccl_ops),
        cmocka_unit_test(keys_are_named_under_the_group),
        cmocka_unit_test(config_errors_name_the_field),
        cmocka_unit_test(op_argument_errors_come_first),
        cmocka_unit_test(no_device_path_is_an_error_not_a_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
