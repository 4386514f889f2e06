/*
 * test_rl_staleness.c - AReaL's capacity formula and counters, stepped by
 * hand: eta = 0 (synchronous), eta = 2, the concurrency cap, rejection, the
 * recovery reset of `accepted`, and a simulated run asserting that no
 * trained rollout is more than eta versions older than the policy that
 * trains on it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "areal/rl/staleness.h"

static void eta0_is_synchronous(void **st) {
    (void)st;
    areal_staleness s;
    areal_staleness_init(&s, 100, 4, 0);
    /* version 0: (0 + 0 + 1) * 4 - 0 = 4 rollouts may start */
    assert_int_equal(areal_staleness_capacity(&s, 0), 4);
    for (int i = 0; i < 4; i++) {
        areal_staleness_on_enqueued(&s);
        areal_staleness_on_submitted(&s);
    }
    assert_int_equal(s.running, 4);
    assert_int_equal(s.enqueued, 0);
    assert_int_equal(areal_staleness_capacity(&s, 0), 0);
    assert_false(areal_staleness_can_submit(&s, 0));
    for (int i = 0; i < 4; i++)
        areal_staleness_on_accepted(&s);
    /* all accepted, but no update yet: still nothing more at version 0 */
    assert_int_equal(areal_staleness_capacity(&s, 0), 0);
    /* after the weight update (version 1), exactly one more batch */
    assert_int_equal(areal_staleness_capacity(&s, 1), 4);
    assert_int_equal(areal_staleness_pending_limit(&s), 4);
}

static void eta2_allows_three_batches_ahead(void **st) {
    (void)st;
    areal_staleness s;
    areal_staleness_init(&s, 1000, 8, 2);
    assert_int_equal(areal_staleness_capacity(&s, 0), 24);
    assert_int_equal(areal_staleness_pending_limit(&s), 24);
    for (int i = 0; i < 10; i++) {
        areal_staleness_on_enqueued(&s);
        areal_staleness_on_submitted(&s);
    }
    for (int i = 0; i < 6; i++)
        areal_staleness_on_accepted(&s);
    /* accepted 6 + running 4 = 10 -> 24 - 10 */
    assert_int_equal(areal_staleness_capacity(&s, 0), 14);
    assert_int_equal(areal_staleness_capacity(&s, 3), 38);
}

static void concurrency_cap_and_default(void **st) {
    (void)st;
    areal_staleness s;
    areal_staleness_init(&s, 3, 8, 4);
    assert_int_equal(areal_staleness_capacity(&s, 0), 3);
    areal_staleness_on_enqueued(&s);
    areal_staleness_on_submitted(&s);
    assert_int_equal(areal_staleness_capacity(&s, 0), 2);
    /* max_concurrent None (<= 0) means the consumer batch size */
    areal_staleness_init(&s, 0, 5, 10);
    assert_int_equal(s.max_concurrent, 5);
    assert_int_equal(areal_staleness_capacity(&s, 0), 5);
}

static void rejected_rollouts_free_capacity(void **st) {
    (void)st;
    areal_staleness s;
    areal_staleness_init(&s, 100, 2, 0);
    areal_staleness_on_enqueued(&s);
    areal_staleness_on_submitted(&s);
    areal_staleness_on_enqueued(&s);
    areal_staleness_on_submitted(&s);
    assert_int_equal(areal_staleness_capacity(&s, 0), 0);
    areal_staleness_on_rejected(&s);
    /* a rejected rollout counts neither as running nor as accepted */
    assert_int_equal(s.rejected, 1);
    assert_int_equal(areal_staleness_capacity(&s, 0), 1);
}

static void recovery_resets_accepted(void **st) {
    (void)st;
    areal_staleness s;
    areal_staleness_init(&s, 1000, 16, 2);
    /* a fresh manager after restoring version 7: without the reset the
     * capacity would be (2 + 7 + 1) * 16 = 160, a burst of 10 batches */
    assert_int_equal(areal_staleness_capacity(&s, 7), 160);
    areal_staleness_on_version_recovered(&s, 7);
    assert_int_equal(s.accepted, 7 * 16);
    assert_int_equal(areal_staleness_capacity(&s, 7), 3 * 16);
}

static void unbounded_eta_does_not_overflow(void **st) {
    (void)st;
    areal_staleness s;
    areal_staleness_init(&s, 64, 1L << 40, AREAL_STALENESS_UNBOUNDED);
    assert_int_equal(areal_staleness_capacity(&s, 5), 64);
}

/*
 * A simulated asynchronous run: rollouts start whenever capacity allows and
 * carry the version current at their start; the trainer consumes B accepted
 * rollouts per step (oldest first) and bumps the version. Every consumed
 * rollout must satisfy trainer_version - start_version <= eta.
 */
static void simulated_run_respects_eta(void **st) {
    (void)st;
    for (long eta = 0; eta <= 3; eta++) {
        const long B = 4;
        areal_staleness s;
        areal_staleness_init(&s, 6, B, eta);
        long version = 0, started[4096], queue_head = 0, n_started = 0, done = 0;
        long max_lag = 0;
        for (int tick = 0; tick < 400 && version < 40; tick++) {
            while (areal_staleness_can_submit(&s, version) && n_started < 4096) {
                areal_staleness_on_enqueued(&s);
                areal_staleness_on_submitted(&s);
                started[n_started++] = version;
            }
            /* one rollout finishes per tick (in start order) */
            if (done < n_started) {
                areal_staleness_on_accepted(&s);
                done++;
            }
            if (done - queue_head >= B) {
                for (long i = 0; i < B; i++) {
                    long lag = version - started[queue_head + i];
                    if (lag > max_lag)
                        max_lag = lag;
                }
                queue_head += B;
                version++;
            }
        }
        assert_true(version >= 20);
        if (max_lag > eta)
            fail_msg("eta %ld: a rollout was trained %ld versions stale", eta, max_lag);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(eta0_is_synchronous),
        cmocka_unit_test(eta2_allows_three_batches_ahead),
        cmocka_unit_test(concurrency_cap_and_default),
        cmocka_unit_test(rejected_rollouts_free_capacity),
        cmocka_unit_test(recovery_resets_accepted),
        cmocka_unit_test(unbounded_eta_does_not_overflow),
        cmocka_unit_test(simulated_run_respects_eta),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
