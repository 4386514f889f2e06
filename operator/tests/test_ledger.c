/*
 * test_ledger.c - the reservation ledger (areal/operator/ledger.h): a claim
 * is charged to every other job's cluster until it is seen bound, never to
 * its own job, is replaced whole by its job's next set, and is capped at a
 * node's allocatable GPUs; a job's answered binds are expected in the cache
 * for a window.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "areal/operator/ledger.h"

typedef struct fixture {
    areal_cluster c;
    areal_keyset index;
} fixture;

static void fixture_init(fixture *f) {
    areal_cluster_init(&f->c);
    areal_keyset_init(&f->index);
    const char *names[] = {"n0", "n1"};
    for (int i = 0; i < 2; i++) {
        int at = areal_cluster_add_node(&f->c, names[i], 4, 0, NULL);
        assert_true(at >= 0);
        assert_true(areal_keyset_add(&f->index, names[i]) == 1);
        *areal_keyset_value(&f->index, names[i]) = at;
    }
}

static void fixture_reset(fixture *f) {
    for (int i = 0; i < f->c.n_nodes; i++) {
        f->c.nodes[i].gpus_used = 0;
        f->c.nodes[i].cpu_used_milli = 0;
        f->c.nodes[i].mem_used_bytes = 0;
    }
}

static void fixture_free(fixture *f) {
    areal_keyset_free(&f->index);
    areal_cluster_free(&f->c);
}

static void charged_until_seen(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    ledger l;
    ledger_init(&l);
    ledger_claim a[] = {{.pod = "ns/a-0", .node = "n0", .gpus = 3, .cpu_milli = 500},
                        {.pod = "ns/a-1", .node = "n1", .gpus = 1, .mem_bytes = 1024}};
    assert_int_equal(ledger_set(&l, "ns/a", a, 2), 0);
    assert_int_equal(ledger_len(&l), 2);

    /* another job's pass: both claims count */
    ledger_begin(&l);
    ledger_charge(&l, "ns/b", &f.c, &f.index);
    assert_int_equal(f.c.nodes[0].gpus_used, 3);
    assert_int_equal(f.c.nodes[0].cpu_used_milli, 500);
    assert_int_equal(f.c.nodes[1].gpus_used, 1);
    assert_int_equal(f.c.nodes[1].mem_used_bytes, 1024);

    /* its own pass replans over them */
    fixture_reset(&f);
    ledger_begin(&l);
    ledger_charge(&l, "ns/a", &f.c, &f.index);
    assert_int_equal(f.c.nodes[0].gpus_used, 0);

    /* a-0 seen bound (the caller counted it): only a-1 is charged */
    fixture_reset(&f);
    ledger_begin(&l);
    ledger_seen(&l, "ns/a-0", "n0");
    ledger_charge(&l, "ns/b", &f.c, &f.index);
    assert_int_equal(f.c.nodes[0].gpus_used, 0);
    assert_int_equal(f.c.nodes[1].gpus_used, 1);

    /* a-0 counted on another node than its claim's (an older version of the
     * pod, planned elsewhere): its claim is still charged */
    fixture_reset(&f);
    ledger_begin(&l);
    ledger_seen(&l, "ns/a-0", "n1");
    ledger_charge(&l, "ns/b", &f.c, &f.index);
    assert_int_equal(f.c.nodes[0].gpus_used, 3);

    /* a new pass forgets what was seen */
    fixture_reset(&f);
    ledger_begin(&l);
    ledger_charge(&l, "ns/b", &f.c, &f.index);
    assert_int_equal(f.c.nodes[0].gpus_used, 3);

    ledger_free(&l);
    fixture_free(&f);
}

static void set_replaces_and_caps(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    ledger l;
    ledger_init(&l);
    ledger_claim a[] = {{.pod = "ns/a-0", .node = "n0", .gpus = 3}};
    ledger_claim b[] = {{.pod = "ns/b-0", .node = "n0", .gpus = 2},
                        {.pod = "ns/b-1", .node = "gone", .gpus = 2}};
    assert_int_equal(ledger_set(&l, "ns/a", a, 1), 0);
    assert_int_equal(ledger_set(&l, "ns/b", b, 2), 0);
    ledger_begin(&l);
    ledger_charge(&l, "ns/c", &f.c, &f.index);
    assert_int_equal(f.c.nodes[0].gpus_used, 4); /* 3 + 2, capped at 4 */
    assert_int_equal(f.c.nodes[1].gpus_used, 0); /* a node not in the cluster is skipped */

    /* a's new plan moves it to n1; b drops its plan */
    ledger_claim a2[] = {{.pod = "ns/a-0", .node = "n1", .gpus = 3}};
    assert_int_equal(ledger_set(&l, "ns/a", a2, 1), 0);
    assert_int_equal(ledger_set(&l, "ns/b", NULL, 0), 0);
    assert_int_equal(ledger_len(&l), 1);
    fixture_reset(&f);
    ledger_begin(&l);
    ledger_seen(&l, "ns/b-0", "n0"); /* no such claim any more: nothing happens */
    ledger_charge(&l, "ns/c", &f.c, &f.index);
    assert_int_equal(f.c.nodes[0].gpus_used, 0);
    assert_int_equal(f.c.nodes[1].gpus_used, 3);
    ledger_free(&l);
    fixture_free(&f);
}

static ledger_pod_state only_a0_observed(void *ud, const char *pod) {
    (void)ud;
    return strcmp(pod, "ns/a-0") == 0 ? LEDGER_POD_BOUND : LEDGER_POD_ABSENT;
}

/* a-0 bound, a-1 created but unbound */
static ledger_pod_state a1_unbound(void *ud, const char *pod) {
    (void)ud;
    return strcmp(pod, "ns/a-0") == 0 ? LEDGER_POD_BOUND : LEDGER_POD_CREATED;
}

/* Chaos seed 52: what a pass cut short did is expected pod by pod. */
static void answered_creates_are_expected(void **state) {
    (void)state;
    ledger l;
    ledger_init(&l);
    ledger_claim a[] = {{.pod = "ns/a-0", .node = "n0", .gpus = 1},
                        {.pod = "ns/a-1", .node = "n1", .gpus = 1}};
    assert_int_equal(ledger_set(&l, "ns/a", a, 2), 0);
    ledger_answered(&l, "ns/a-0", true, 1000);
    ledger_answered(&l, "ns/a-1", true, 1000);
    ledger_answered(&l, "ns/zz", true, 1000); /* no claim: nothing */
    /* created, cut short before any bind: both must be seen (at all) */
    assert_int_equal(ledger_unobserved(&l, "ns/a", 1001, 5000, only_a0_observed, NULL), 1);
    assert_int_equal(ledger_unobserved(&l, "ns/a", 1001, 5000, a1_unbound, NULL), 0);
    /* a-1's bind answered too: now it must be seen bound */
    ledger_answered(&l, "ns/a-1", false, 1002);
    assert_int_equal(ledger_unobserved(&l, "ns/a", 1003, 5000, a1_unbound, NULL), 1);
    assert_int_equal(ledger_unobserved(&l, "ns/a", 7000, 5000, a1_unbound, NULL), 0);
    ledger_free(&l);
}

static void answered_binds_are_expected(void **state) {
    (void)state;
    ledger l;
    ledger_init(&l);
    ledger_claim a[] = {{.pod = "ns/a-0", .node = "n0", .gpus = 1},
                        {.pod = "ns/a-1", .node = "n1", .gpus = 1}};
    assert_int_equal(ledger_set(&l, "ns/a", a, 2), 0);
    /* not bound yet: nothing to expect */
    assert_int_equal(ledger_unobserved(&l, "ns/a", 1000, 5000, only_a0_observed, NULL), 0);
    ledger_bound(&l, "ns/a", 1000);
    assert_int_equal(ledger_unobserved(&l, "ns/a", 1001, 5000, only_a0_observed, NULL), 1);
    assert_int_equal(ledger_unobserved(&l, "ns/b", 1001, 5000, only_a0_observed, NULL), 0);
    /* past the window the job acts on what it sees */
    assert_int_equal(ledger_unobserved(&l, "ns/a", 6000, 5000, only_a0_observed, NULL), 0);
    /* a new plan starts unanswered */
    assert_int_equal(ledger_set(&l, "ns/a", a, 2), 0);
    assert_int_equal(ledger_unobserved(&l, "ns/a", 1001, 5000, only_a0_observed, NULL), 0);
    ledger_free(&l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(answered_binds_are_expected),
        cmocka_unit_test(answered_creates_are_expected),
        cmocka_unit_test(charged_until_seen),
        cmocka_unit_test(set_replaces_and_caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
