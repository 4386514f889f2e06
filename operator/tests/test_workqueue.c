/*
 * test_workqueue.c - the work queue's invariants under single-threaded
 * sequences and under concurrent producers and workers, delayed and
 * rate-limited adds, shutdown; and the key set against a reference.
 *
 * Each single-threaded test takes its queue from a fixture (q_setup /
 * q_teardown): cmocka runs the teardown after a failed assertion too, so a
 * timing bound missed on a loaded machine reads as that failure, not also as
 * a leak of the queue (ASan reported one at load 26: the failed test had
 * jumped over its workqueue_free). The timing bounds leave the scheduler
 * hundreds of milliseconds of lateness while still telling the right delay
 * from the wrong ones (the next doubling, the uncapped delay, the later of
 * two wake-ups).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "areal/clock.h"
#include "areal/keyset.h"
#include "areal/operator/workqueue.h"

static int q_setup(void **state) {
    workqueue *q = NULL;
    if (workqueue_new(NULL, &q) != 0)
        return -1;
    *state = q;
    return 0;
}

/* base 100 ms, capped at 400: 100, 200, 400, 400 */
static int q_setup_rate(void **state) {
    workqueue_config cfg = {.base_delay_ms = 100, .max_delay_ms = 400};
    workqueue *q = NULL;
    if (workqueue_new(&cfg, &q) != 0)
        return -1;
    *state = q;
    return 0;
}

static int q_teardown(void **state) {
    workqueue_free(*state);
    return 0;
}

static void dedups_and_requeues_keys_added_while_processing(void **state) {
    workqueue *q = *state;
    assert_int_equal(workqueue_add(q, "ns/a"), 0);
    assert_int_equal(workqueue_add(q, "ns/a"), 0);
    assert_int_equal(workqueue_add(q, "ns/b"), 0);
    assert_int_equal(workqueue_len(q), 2);
    char key[WORKQUEUE_KEY_MAX];
    assert_int_equal(workqueue_get(q, key, sizeof key, 0), 1);
    assert_string_equal(key, "ns/a");              /* FIFO */
    assert_int_equal(workqueue_add(q, "ns/a"), 0); /* while processing: marked, not queued */
    assert_int_equal(workqueue_len(q), 1);
    assert_int_equal(workqueue_add(q, "ns/a"), 0);
    workqueue_done(q, "ns/a"); /* queued again, once */
    assert_int_equal(workqueue_len(q), 2);
    assert_int_equal(workqueue_get(q, key, sizeof key, 0), 1);
    assert_string_equal(key, "ns/b");
    assert_int_equal(workqueue_get(q, key, sizeof key, 0), 1);
    assert_string_equal(key, "ns/a");
    workqueue_done(q, "ns/a");
    workqueue_done(q, "ns/b");
    assert_int_equal(workqueue_get(q, key, sizeof key, 0), -1); /* empty: timeout */
}

static void rejects_bad_keys_and_adds_after_shutdown(void **state) {
    workqueue *q = *state;
    char long_key[WORKQUEUE_KEY_MAX + 10];
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0';
    assert_int_equal(workqueue_add(q, ""), -2);
    assert_int_equal(workqueue_add(q, NULL), -2);
    assert_int_equal(workqueue_add(q, long_key), -2);
    char small[8];
    assert_int_equal(workqueue_get(q, small, sizeof small, 0), -1);
    assert_int_equal(workqueue_add(q, "ns/x"), 0);
    assert_int_equal(workqueue_add_after(q, "ns/later", 10000), 0);
    workqueue_shutdown(q);
    assert_int_equal(workqueue_add(q, "ns/y"), -3);
    char key[WORKQUEUE_KEY_MAX];
    assert_int_equal(workqueue_get(q, key, sizeof key, -1), 1); /* drained first */
    assert_string_equal(key, "ns/x");
    assert_int_equal(workqueue_get(q, key, sizeof key, -1), 0); /* delayed key dropped */
}

static void delayed_keys_arrive_on_time_and_earliest_wins(void **state) {
    workqueue *q = *state;
    char key[WORKQUEUE_KEY_MAX];
    long long t0 = areal_now_ms();
    assert_int_equal(workqueue_add_after(q, "ns/d", 2000), 0);
    assert_int_equal(workqueue_add_after(q, "ns/d", 60), 0);   /* earlier: wins */
    assert_int_equal(workqueue_add_after(q, "ns/d", 1000), 0); /* later: ignored */
    /* not due yet: a short get times out, unless this thread was off the CPU past
     * the due time (seen under load: then it must have been due) */
    int got = workqueue_get(q, key, sizeof key, 20);
    if (got == 1 && areal_now_ms() - t0 < 60)
        fail_msg("the key came after %lld ms, before its 60 ms", areal_now_ms() - t0);
    if (got != 1) {
        assert_int_equal(got, -1);
        assert_int_equal(workqueue_get(q, key, sizeof key, 5000), 1);
    }
    long long waited = areal_now_ms() - t0;
    if (waited < 60 || waited >= 900) /* 1000 or 2000: a later wake-up won */
        fail_msg("the key came after %lld ms, expected about 60", waited);
    workqueue_done(q, key);
    /* the superseded wake-ups (the 2000 ms heap entry surfaces) never deliver the key again */
    long long left = t0 + 2300 - areal_now_ms();
    assert_int_equal(workqueue_get(q, key, sizeof key, left > 0 ? left : 0), -1);
}

static void rate_limit_backs_off_exponentially_until_forget(void **state) {
    workqueue *q = *state;
    char key[WORKQUEUE_KEY_MAX];
    long long expect[] = {100, 200, 400, 400}; /* capped */
    for (int i = 0; i < 4; i++) {
        long long t0 = areal_now_ms();
        assert_int_equal(workqueue_add_rate_limited(q, "ns/r"), 0);
        assert_int_equal(workqueue_failures(q, "ns/r"), i + 1);
        assert_int_equal(workqueue_get(q, key, sizeof key, 5000), 1);
        long long waited = areal_now_ms() - t0;
        /* below the next doubling (the uncapped 800 for the last) with 300 ms of slack */
        if (waited < expect[i] || waited >= expect[i] + 300)
            fail_msg("retry %d waited %lld ms, expected about %lld", i, waited, expect[i]);
        workqueue_done(q, key);
    }
    workqueue_forget(q, "ns/r");
    assert_int_equal(workqueue_failures(q, "ns/r"), 0);
}

/* ---- concurrency --------------------------------------------------------- */

#define N_KEYS            64
#define N_WORKERS         4
#define N_PRODUCERS       2
#define ADDS_PER_PRODUCER 4000

typedef struct shared {
    workqueue *q;
    atomic_int holding[N_KEYS];     /* workers holding each key right now */
    atomic_long last_added[N_KEYS]; /* sequence of the latest add of a key */
    atomic_long last_seen[N_KEYS];  /* latest add sequence a worker had seen when it got the key */
    atomic_long seq;
    atomic_int violations;
    atomic_long processed;
} shared;

static void *producer(void *arg) {
    shared *s = arg;
    unsigned seed = (unsigned)(uintptr_t)&seed;
    for (int i = 0; i < ADDS_PER_PRODUCER; i++) {
        int k = rand_r(&seed) % N_KEYS;
        char key[32];
        snprintf(key, sizeof key, "ns/job-%d", k);
        long sq = atomic_fetch_add(&s->seq, 1) + 1;
        /* record before adding, so a worker that takes the key sees at least this */
        long prev = atomic_load(&s->last_added[k]);
        while (prev < sq && !atomic_compare_exchange_weak(&s->last_added[k], &prev, sq))
            ;
        if (workqueue_add(s->q, key) != 0)
            atomic_fetch_add(&s->violations, 1);
    }
    return NULL;
}

static void *worker(void *arg) {
    shared *s = arg;
    char key[WORKQUEUE_KEY_MAX];
    while (workqueue_get(s->q, key, sizeof key, -1) == 1) {
        int k = atoi(key + strlen("ns/job-"));
        if (atomic_fetch_add(&s->holding[k], 1) != 0)
            atomic_fetch_add(&s->violations, 1); /* two workers on one key */
        atomic_store(&s->last_seen[k], atomic_load(&s->last_added[k]));
        for (volatile int spin = 0; spin < 2000; spin++)
            ;
        atomic_fetch_sub(&s->holding[k], 1);
        atomic_fetch_add(&s->processed, 1);
        workqueue_done(s->q, key);
    }
    return NULL;
}

static void concurrent_workers_never_share_a_key_and_see_every_change(void **state) {
    (void)state;
    static shared s;
    memset(&s, 0, sizeof s);
    assert_int_equal(workqueue_new(NULL, &s.q), 0);
    pthread_t w[N_WORKERS], p[N_PRODUCERS];
    for (int i = 0; i < N_WORKERS; i++)
        pthread_create(&w[i], NULL, worker, &s);
    for (int i = 0; i < N_PRODUCERS; i++)
        pthread_create(&p[i], NULL, producer, &s);
    for (int i = 0; i < N_PRODUCERS; i++)
        pthread_join(p[i], NULL);
    /* wait until every key's latest add has been seen by a worker */
    long long t0 = areal_now_ms();
    for (;;) {
        bool all = true;
        for (int k = 0; k < N_KEYS; k++)
            all = all && atomic_load(&s.last_seen[k]) == atomic_load(&s.last_added[k]);
        if (all || areal_now_ms() - t0 > 10000)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    workqueue_shutdown(s.q);
    for (int i = 0; i < N_WORKERS; i++)
        pthread_join(w[i], NULL);
    assert_int_equal(atomic_load(&s.violations), 0);
    for (int k = 0; k < N_KEYS; k++)
        if (atomic_load(&s.last_added[k]) != 0)
            assert_int_equal(atomic_load(&s.last_seen[k]), atomic_load(&s.last_added[k]));
    long processed = atomic_load(&s.processed);
    print_message("%d adds collapsed into %ld reconciles\n", N_PRODUCERS * ADDS_PER_PRODUCER,
                  processed);
    assert_true(processed <= N_PRODUCERS * ADDS_PER_PRODUCER);
    workqueue_free(s.q);
}

/* ---- key set ------------------------------------------------------------- */

static void keyset_matches_a_reference_under_random_operations(void **state) {
    (void)state;
    areal_keyset s;
    areal_keyset_init(&s);
    bool ref[500] = {false};
    unsigned seed = 42;
    for (int op = 0; op < 50000; op++) {
        int k = rand_r(&seed) % 500;
        char key[32];
        snprintf(key, sizeof key, "default/obj-%d", k);
        switch (rand_r(&seed) % 3) {
        case 0:
            assert_int_equal(areal_keyset_add(&s, key), ref[k] ? 0 : 1);
            ref[k] = true;
            break;
        case 1:
            assert_int_equal(areal_keyset_remove(&s, key), ref[k]);
            ref[k] = false;
            break;
        default:
            assert_int_equal(areal_keyset_has(&s, key), ref[k]);
        }
    }
    size_t n = 0;
    for (int k = 0; k < 500; k++) {
        char key[32];
        snprintf(key, sizeof key, "default/obj-%d", k);
        assert_int_equal(areal_keyset_has(&s, key), ref[k]);
        n += ref[k];
    }
    assert_int_equal(s.len, n);
    int64_t *v = areal_keyset_value(&s, "absent");
    assert_null(v);
    areal_keyset_free(&s);
    assert_false(areal_keyset_has(&s, "default/obj-1"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(dedups_and_requeues_keys_added_while_processing, q_setup,
                                        q_teardown),
        cmocka_unit_test_setup_teardown(rejects_bad_keys_and_adds_after_shutdown, q_setup,
                                        q_teardown),
        cmocka_unit_test_setup_teardown(delayed_keys_arrive_on_time_and_earliest_wins, q_setup,
                                        q_teardown),
        cmocka_unit_test_setup_teardown(rate_limit_backs_off_exponentially_until_forget,
                                        q_setup_rate, q_teardown),
        cmocka_unit_test(concurrent_workers_never_share_a_key_and_see_every_change),
        cmocka_unit_test(keyset_matches_a_reference_under_random_operations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
