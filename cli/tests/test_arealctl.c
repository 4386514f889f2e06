/*
 * test_arealctl.c - arealctl as a user runs it: a real child process per case
 * (the binary named by $AREALCTL, by default build/rel/arealctl), its exit code,
 * stdout and stderr. Bad input must give exactly one "arealctl: ..." line on
 * stderr and exit 2, never a crash; the JSON must agree with the library.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "child.h"
#include "cli_check.h"
#include <jansson.h>

#include "areal/alloc.h"
#include "areal/groups.h"

typedef struct run_result {
    int status; /* exit code, or 128 + signal */
    char out[1 << 20];
    char err[8192];
} run_result;

static run_result result; /* large: static, and tests run one at a time */

/* Runs arealctl with the NULL-terminated arguments. */
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

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Exit 2 with one line that starts "arealctl: " and contains `needle`. */
static void expect_bad_input(const run_result *r, const char *needle) {
    if (r->status != 2 || count_lines(r->err) != 1 || strncmp(r->err, "arealctl: ", 10) != 0 ||
        strstr(r->err, needle) == NULL)
        fail_msg("expected exit 2 and one line with '%s'; got exit %d, stderr:\n%s", needle,
                 r->status, r->err);
}

static const char *write_temp(const char *text) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/arealctl-in-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void default_job_runs(void **state) {
    (void)state;
    run_result *r = run("plan", NULL);
    assert_int_equal(r->status, 0);
    assert_non_null(strstr(r->out, "job demo: sglang:d4t2+megatron:d2p2t4e2"));
    assert_non_null(strstr(r->out, "demo-trainer-1"));
    assert_non_null(strstr(r->out, "QUALITY"));
    r = run("--help", NULL);
    assert_int_equal(r->status, 0);
    assert_non_null(strstr(r->out, "usage: arealctl plan"));
}

static void json_agrees_with_the_library(void **state) {
    (void)state;
    const char *alloc = "sglang:d2t2+megatron:(attn:d4p2t2|ffn:p2t2e2)";
    run_result *r =
        run("plan", "--alloc", alloc, "--json", "--rank", "13", "--gpus-per-node", "8", NULL);
    if (r->status != 0)
        fail_msg("exit %d: %s", r->status, r->err);
    json_error_t jerr;
    json_t *doc = json_loads(r->out, 0, &jerr);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "allocation")), alloc);
    json_t *roles = json_object_get(doc, "roles");
    assert_int_equal(json_array_size(roles), 2);
    json_t *trainer = json_array_get(roles, 1);
    assert_string_equal(json_string_value(json_object_get(trainer, "name")), "trainer");
    assert_int_equal(json_integer_value(json_object_get(trainer, "world_size")), 16);
    json_t *st = json_object_get(trainer, "strategy");
    assert_int_equal(json_integer_value(json_object_get(st, "etp")), 2);
    assert_int_equal(json_integer_value(json_object_get(st, "edp")), 2);

    /* every group of every kind equals what the library computes */
    areal_alloc a;
    assert_int_equal(areal_alloc_parse(alloc, &a, NULL), AREAL_OK);
    areal_layout l;
    assert_int_equal(areal_layout_init(&l, &a.comp[1].strategy, NULL), AREAL_OK);
    json_t *groups = json_object_get(trainer, "groups");
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
        json_t *list = json_object_get(groups, areal_group_kind_name((areal_group_kind)k));
        assert_non_null(list);
        assert_int_equal(json_array_size(list), areal_group_count(&l, (areal_group_kind)k));
        for (size_t g = 0; g < json_array_size(list); g++) {
            int members[64];
            int size = areal_group_ranks(&l, (areal_group_kind)k, (int)g, members);
            json_t *jg = json_array_get(list, g);
            assert_int_equal(json_array_size(jg), size);
            for (int j = 0; j < size; j++)
                assert_int_equal(json_integer_value(json_array_get(jg, (size_t)j)), members[j]);
        }
    }
    /* pods: consecutive ranks, on named nodes, covering the world */
    json_t *pods = json_object_get(trainer, "pods");
    int next = 0;
    for (size_t i = 0; i < json_array_size(pods); i++) {
        json_t *pod = json_array_get(pods, i);
        assert_non_null(json_string_value(json_object_get(pod, "node")));
        json_t *ranks = json_object_get(pod, "ranks");
        for (size_t j = 0; j < json_array_size(ranks); j++)
            assert_int_equal(json_integer_value(json_array_get(ranks, j)), next++);
    }
    assert_int_equal(next, 16);
    /* the rank section: rank 13 -> etp 1, ep 0, edp 1, pp 1 (reference/areal.md 2.2) */
    json_t *rank = json_object_get(doc, "rank");
    assert_int_equal(json_integer_value(json_object_get(rank, "rank")), 13);
    json_t *edp = json_object_get(json_object_get(rank, "groups"), "edp");
    assert_int_equal(json_integer_value(json_object_get(edp, "index")), 5); /* [9,13] */
    json_decref(doc);
}

static void bad_input_is_one_line_and_exit_2(void **state) {
    (void)state;
    expect_bad_input(run("plan", "--alloc", "sglang:d4t2+megatron:d2p2t4x2", NULL), "at 27");
    expect_bad_input(run("plan", "--alloc", "", NULL), "--alloc");
    expect_bad_input(run("plan", "--alloc", "fsdp:d4p2", NULL), "FSDP");
    expect_bad_input(run("plan", "--alloc", "megatron:d64t8", NULL), "cannot place");
    expect_bad_input(run("plan", "--alloc", "megatron:t16", NULL), "tp group of 16 GPUs");
    expect_bad_input(run("plan", "--cluster", "/nonexistent/cluster.yaml", NULL), "cannot open");
    expect_bad_input(run("plan", "--cluster", write_temp("nodes: [ {name: a, gpus: 8\n"), NULL),
                     "YAML");
    expect_bad_input(run("plan", "--cluster", write_temp("{\"nodes\": [}"), NULL), "invalid JSON");
    expect_bad_input(
        run("plan", "--cluster", write_temp("nodes:\n  - name: a\n    gpuUsed: 1\n"), NULL),
        "nodes[0].gpuUsed");
    expect_bad_input(run("plan", "--rank", "99", NULL), "--rank 99");
    expect_bad_input(run("plan", "--rank", "-1", NULL), "--rank");
    expect_bad_input(run("plan", "--role", "critic", NULL), "no such role");
    expect_bad_input(run("plan", "--gpus-per-node", "0", NULL), "--gpus-per-node");
    expect_bad_input(run("plan", "--require", "pp", NULL), "KIND=LEVEL");
    expect_bad_input(run("plan", "--require", "xx=leaf", NULL), "unknown group kind");
    expect_bad_input(run("plan", "--require", "pp=galaxy", NULL), "unknown level");
    expect_bad_input(run("plan", "--bogus", NULL), "unknown option");
    expect_bad_input(run("plan", "--alloc", NULL), "needs a value");
    expect_bad_input(run("plan", "extra", NULL), "unexpected argument");
    expect_bad_input(run("frobnicate", NULL), "unknown subcommand");
    expect_bad_input(run(NULL), "subcommand is required");
}

/* Input with control bytes is echoed escaped, so the error stays one line. */
static void control_bytes_are_escaped(void **state) {
    (void)state;
    run_result *r = run("plan", "--alloc", "sglang:d4\nx2", NULL);
    expect_bad_input(r, "--alloc 'sglang:d4\\nx2'");
    r = run("plan", "--alloc", "megatron:d2\x1b[31m\t\r\x7f", NULL);
    expect_bad_input(r, "'megatron:d2\\x1b[31m\\t\\r\\x7f'");
    assert_null(strchr(r->err, '\x1b'));
    r = run("plan", "--cluster", "no\nsuch\nfile", NULL);
    expect_bad_input(r, "no\\nsuch\\nfile");
    r = run("plan", "--require", "pp=le\naf", NULL);
    expect_bad_input(r, "le\\naf");
    r = run("run", "--slots", "1\n2", NULL);
    expect_bad_input(r, "--slots '1\\n2'");
    r = run("pl\nan", NULL);
    expect_bad_input(r, "unknown subcommand 'pl\\nan'");
    /* a long input is cut, still on one line */
    char big[6000];
    memset(big, 'd', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[100] = '\n';
    r = run("plan", "--alloc", big, NULL);
    expect_bad_input(r, "...");
}

/* Every subcommand answers --help and --version (stdout, exit 0). */
static void help_and_version(void **state) {
    (void)state;
    const char *bin = getenv("AREALCTL") ? getenv("AREALCTL") : "build/rel/arealctl";
    cli_check_help_version(bin, NULL, "arealctl");
    cli_check_help_version(bin, "plan", "arealctl");
    cli_check_help_version(bin, "run", "arealctl");
    run_result *r = run("plan", "--alloc", "megatron:t2", "--help", NULL);
    assert_int_equal(r->status, 0);
    assert_non_null(strstr(r->out, "--require KIND=LEVEL"));
    assert_string_equal(r->err, "");
}

static void required_rule_from_the_command_line(void **state) {
    (void)state;
    /* pp4 x tp8 needs 4 nodes; each leaf of the default cluster has 4, one partly used */
    run_result *r = run("plan", "--alloc", "megatron:p4t8", "--require", "pp=leaf", NULL);
    assert_int_equal(r->status, 0);
    r = run("plan", "--alloc", "megatron:p6t8", "--require", "pp=leaf", NULL);
    expect_bad_input(r, "must lie within one leaf (required)");
    r = run("plan", "--alloc", "megatron:p6t8", "--prefer", "pp=leaf", NULL);
    assert_int_equal(r->status, 0); /* preferred: placed across both leaves */
    r = run("plan", "--alloc", "megatron:p8t8", NULL);
    expect_bad_input(r, "needs 64 GPUs but the cluster has 62 free");
    /* enough GPUs in total, but no node holds a whole tp8 group */
    const char *halves = write_temp("nodes:\n  - {name: a, gpus: 8, gpusUsed: 4}\n"
                                    "  - {name: b, gpus: 8, gpusUsed: 4}\n");
    r = run("plan", "--alloc", "megatron:t8", "--cluster", halves, NULL);
    expect_bad_input(r, "room for 0 such pods");
}

static void legacy_string_warns_and_plans(void **state) {
    (void)state;
    run_result *r = run("plan", "--alloc", "sglang.d4p1t1+d4p1t1", "--json", NULL);
    assert_int_equal(r->status, 0);
    assert_non_null(strstr(r->err, "legacy syntax"));
    assert_non_null(strstr(r->err, "sglang:d4+fsdp:d4"));
    assert_non_null(strstr(r->out, "\"legacy\":true"));
}

/* Every example allocation plans on every example inventory, or says why. */
static void examples_plan(void **state) {
    (void)state;
    FILE *f = fopen("examples/allocations.txt", "r");
    assert_non_null(f);
    const char *clusters[] = {"examples/clusters/two-racks.yaml",
                              "examples/clusters/kubectl-nodes.json",
                              "examples/clusters/64-nodes-8-racks.yaml"};
    char line[512];
    int planned = 0, lines = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#')
            continue;
        lines++;
        for (size_t c = 0; c < sizeof clusters / sizeof clusters[0]; c++) {
            run_result *r = run("plan", "--alloc", line, "--cluster", clusters[c], NULL);
            if (r->status == 0)
                planned++;
            else
                expect_bad_input(r, "cannot place");
        }
    }
    fclose(f);
    assert_true(lines >= 10);
    assert_true(planned >= lines); /* the big inventory holds them all */
}

/* arealctl run: a local job whose pods are real areal-worker processes. */
static void run_starts_the_local_job(void **state) {
    (void)state;
    run_result *r = run("run", "--timeout", "60", NULL);
    if (r->status != 0)
        fail_msg("arealctl run exited %d:\n%s", r->status, r->err);
    assert_non_null(strstr(r->out, "3 pods"));
    assert_non_null(strstr(r->out, "all 3 pods succeeded"));
    assert_non_null(strstr(r->out, "all ok"));
    /* a pod that fails stops the gang and is named */
    setenv("AREAL_WORKER", "/bin/false", 1);
    r = run("run", NULL);
    unsetenv("AREAL_WORKER");
    assert_int_equal(r->status, 1);
    assert_non_null(strstr(r->err, "exited with status 1; the gang was stopped"));
    expect_bad_input(run("run", "--alloc", "fsdp:d4p2", NULL), "FSDP");
    expect_bad_input(run("run", "--slots", "0", NULL), "--slots");
    expect_bad_input(run("run", "--alloc", "megatron:t8", "--slots", "4", NULL), "cannot run");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_job_runs),
        cmocka_unit_test(json_agrees_with_the_library),
        cmocka_unit_test(bad_input_is_one_line_and_exit_2),
        cmocka_unit_test(control_bytes_are_escaped),
        cmocka_unit_test(help_and_version),
        cmocka_unit_test(required_rule_from_the_command_line),
        cmocka_unit_test(legacy_string_warns_and_plans),
        cmocka_unit_test(examples_plan),
        cmocka_unit_test(run_starts_the_local_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
