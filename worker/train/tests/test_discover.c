/*
 * test_discover.c - the trainer's discovery of rollout servers in the job's
 * store (areal/train/discover.h): registrations become the controller's
 * server list; one registered at the policy's version takes requests at once,
 * one behind it is kept out and raises `pending` (the trainer then catches it
 * up); a deregistered server leaves the list; a replacement of the same name
 * at a new address takes its place; until something registers, the static
 * list stays. The controller's prompt source is empty, so no request is sent
 * (the addresses need not answer).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "areal/comm/registry.h"
#include "areal/comm/store.h"
#include "areal/train/discover.h"
#include "areal/train/rollout_ctl.h"

typedef struct logbuf {
    pthread_mutex_t mu;
    char lines[32][512];
    int n;
} logbuf;

static void on_log(void *ctx, const char *line) {
    logbuf *b = ctx;
    pthread_mutex_lock(&b->mu);
    if (b->n < 32)
        snprintf(b->lines[b->n++], sizeof b->lines[0], "%s", line);
    pthread_mutex_unlock(&b->mu);
}

static bool logged(logbuf *b, const char *a, const char *c) {
    pthread_mutex_lock(&b->mu);
    bool found = false;
    for (int i = 0; i < b->n && !found; i++)
        found = strstr(b->lines[i], a) != NULL && (c == NULL || strstr(b->lines[i], c) != NULL);
    pthread_mutex_unlock(&b->mu);
    return found;
}

static int no_prompt(void *ctx, areal_rollout_prompt *p) {
    (void)ctx;
    (void)p;
    return 0;
}

/* The controller's present servers as "addr:stale" joined by spaces. */
static void list_of(areal_rollout_ctl *ctl, char *out, size_t cap) {
    char addrs[8][128];
    bool stale[8];
    int n = areal_rollout_ctl_addrs(ctl, addrs, stale, 8);
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s:%d", i ? " " : "", addrs[i], stale[i]);
    }
}

static void registrations_are_the_server_list(void **state) {
    (void)state;
    logbuf lb = {.mu = PTHREAD_MUTEX_INITIALIZER};
    areal_discover *d = NULL;
    areal_error e;
    assert_int_equal(areal_discover_start("127.0.0.1", 0, on_log, &lb, &d, &e), AREAL_OK);
    areal_store *st = NULL;
    assert_int_equal(areal_store_connect("127.0.0.1", areal_discover_port(d), 2000, 5000, &st, &e),
                     AREAL_OK);
    areal_rollout_cfg cfg = {.group_size = 2, .n_workers = 1, .eta = 1, .batch_size = 1};
    cfg.sampling.max_new_tokens = 4;
    areal_rollout_callbacks cb = {.next_prompt = no_prompt};
    const char *seed[] = {"static-host:30000"};
    areal_rollout_ctl *ctl = NULL;
    assert_int_equal(areal_rollout_ctl_start(&cfg, seed, 1, &cb, &ctl, &e), AREAL_OK);
    assert_int_equal(areal_discover_attach(d, ctl, &e), AREAL_OK);
    char got[512];
    list_of(ctl, got, sizeof got);
    assert_string_equal(got, "static-host:30000:0"); /* nothing registered: the static list */

    assert_int_equal(areal_registry_announce(st, "job-rollout-0",
                                             "{\"addr\":\"10.0.0.1:30000\",\"version\":\"0\"}", &e),
                     AREAL_OK);
    assert_int_equal(areal_discover_poll(d, &e), AREAL_OK);
    list_of(ctl, got, sizeof got);
    assert_string_equal(got, "10.0.0.1:30000:0");
    assert_false(areal_discover_take_pending(d));
    assert_true(logged(&lb, "rollout server job-rollout-0 registered at 10.0.0.1:30000",
                       "it takes requests"));

    /* the policy moves on; a new server comes at the initial weights: kept out, pending */
    areal_rollout_ctl_set_version(ctl, 3);
    assert_int_equal(areal_registry_announce(st, "job-rollout-1",
                                             "{\"addr\":\"10.0.0.2:30000\",\"version\":\"0\"}", &e),
                     AREAL_OK);
    assert_int_equal(areal_discover_poll(d, &e), AREAL_OK);
    list_of(ctl, got, sizeof got);
    assert_string_equal(got, "10.0.0.1:30000:0 10.0.0.2:30000:1");
    assert_true(areal_discover_take_pending(d));
    assert_false(areal_discover_take_pending(d));
    assert_true(logged(&lb,
                       "job-rollout-1 registered at 10.0.0.2:30000 with weight version 0 "
                       "(policy 3)",
                       "current weights before any request"));
    assert_int_equal(areal_discover_count(d), 2);

    /* drained and deregistered: it leaves */
    assert_int_equal(areal_registry_remove(st, "job-rollout-0", &e), AREAL_OK);
    assert_int_equal(areal_discover_poll(d, &e), AREAL_OK);
    list_of(ctl, got, sizeof got);
    assert_string_equal(got, "10.0.0.2:30000:1");
    assert_true(logged(&lb, "job-rollout-0 at 10.0.0.1:30000 deregistered", NULL));

    /* a replacement pod of rollout-1 at a new address, at the policy's version */
    assert_int_equal(areal_registry_announce(st, "job-rollout-1",
                                             "{\"addr\":\"10.0.0.3:30000\",\"version\":\"3\"}", &e),
                     AREAL_OK);
    assert_int_equal(areal_discover_poll(d, &e), AREAL_OK);
    list_of(ctl, got, sizeof got);
    assert_string_equal(got, "10.0.0.3:30000:0");
    assert_true(logged(&lb, "job-rollout-1 registered again at 10.0.0.3:30000", "takes requests"));
    assert_false(areal_discover_take_pending(d));

    areal_discover_detach(d);
    areal_rollout_ctl_stop(ctl);
    areal_store_close(st);
    areal_discover_stop(d);
}

static void port_in_use_is_named(void **state) {
    (void)state;
    areal_discover *a = NULL, *b = NULL;
    areal_error e;
    assert_int_equal(areal_discover_start("127.0.0.1", 0, NULL, NULL, &a, &e), AREAL_OK);
    assert_int_equal(areal_discover_start("127.0.0.1", areal_discover_port(a), NULL, NULL, &b, &e),
                     AREAL_EIO);
    char port[16];
    snprintf(port, sizeof port, "%d", areal_discover_port(a));
    assert_non_null(strstr(e.msg, port));
    assert_null(b);
    areal_discover_stop(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(registrations_are_the_server_list),
        cmocka_unit_test(port_in_use_is_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
