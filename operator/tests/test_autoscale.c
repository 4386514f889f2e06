/* test_autoscale.c - the rollout autoscaling policy (areal/operator/autoscale.h)
 * on sequences of trainer /status samples, one every 5 s as the operator
 * reads them: scale up, scale down, never flapping on mixed or alternating
 * signals, holding while a scale is in progress, bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "areal/operator/autoscale.h"

/* 'W' waiting_for_samples, 'A' running_ahead, '.' neither, 'B' both. */
typedef struct run {
    int changes, final;
    double change_t[16];
    int change_to[16];
} run;

/* Feeds `signals` (one char per 5 s) starting at `current`; the trainer's
 * servers follow a decision after `lag` samples (a new server joining). */
static run feed(const autoscale_policy *p, const char *signals, int current, int lag) {
    autoscale_state st;
    memset(&st, 0, sizeof st);
    run r = {0};
    int servers = current, pending = 0;
    for (size_t i = 0; signals[i]; i++) {
        if (pending > 0 && --pending == 0)
            servers = current;
        autoscale_sample s = {.t_s = 5.0 * (double)i,
                              .waiting_for_samples = signals[i] == 'W' || signals[i] == 'B',
                              .running_ahead = signals[i] == 'A' || signals[i] == 'B',
                              .servers = servers};
        int want = autoscale_decide(p, &st, &s, current, NULL);
        if (want != current) {
            if (r.changes < 16) {
                r.change_t[r.changes] = s.t_s;
                r.change_to[r.changes] = want;
            }
            r.changes++;
            current = want;
            pending = lag;
            if (lag == 0)
                servers = current;
        }
    }
    r.final = current;
    return r;
}

static const autoscale_policy POLICY = {
    .min_replicas = 1, .max_replicas = 4, .up_window_s = 20, .down_window_s = 60, .cooldown_s = 30};

static void scales_up_after_the_window_one_server_at_a_time(void **state) {
    (void)state;
    /* the trainer waits for samples throughout (2 minutes) */
    run r = feed(&POLICY, "WWWWWWWWWWWWWWWWWWWWWWWWW", 2, 2);
    assert_true(r.changes >= 2);
    assert_float_equal(r.change_t[0], 20, 0); /* 0..20 s: a full window */
    assert_int_equal(r.change_to[0], 3);
    /* next: a fresh window (from 25 s) and the cooldown (until 50 s) */
    assert_float_equal(r.change_t[1], 50, 0);
    assert_int_equal(r.change_to[1], 4);
    assert_int_equal(r.final, 4); /* max: no more */
    assert_int_equal(r.changes, 2);
    /* a gap in the evidence restarts the window */
    r = feed(&POLICY, "WWW.WWW.WWW.WWW.WWWW", 2, 0);
    assert_int_equal(r.changes, 0);
    r = feed(&POLICY, "WWW.WWWWW", 2, 0);
    assert_int_equal(r.changes, 1);
    assert_float_equal(r.change_t[0], 40, 0); /* 20 s after the run began at 20 s */
}

static void scales_down_on_a_longer_window_to_the_minimum(void **state) {
    (void)state;
    /* rollouts run ahead for 5 minutes */
    char seq[64];
    memset(seq, 'A', 60);
    seq[60] = '\0';
    run r = feed(&POLICY, seq, 3, 0);
    assert_int_equal(r.changes, 2);
    assert_float_equal(r.change_t[0], 60, 0);
    assert_int_equal(r.change_to[0], 2);
    /* the window restarts after the change (65 s) and needs 60 s more */
    assert_float_equal(r.change_t[1], 125, 0);
    assert_int_equal(r.final, 1); /* min */
    /* 55 s of running ahead is not enough */
    r = feed(&POLICY, "AAAAAAAAAAAA.", 3, 0);
    assert_int_equal(r.changes, 0);
}

static void never_flaps(void **state) {
    (void)state;
    char seq[200];
    /* alternating signals every sample for 15 minutes */
    for (int i = 0; i < 180; i++)
        seq[i] = i % 2 ? 'W' : 'A';
    seq[180] = '\0';
    run r = feed(&POLICY, seq, 2, 0);
    assert_int_equal(r.changes, 0);
    /* bursts of each, shorter than the windows */
    for (int i = 0; i < 180; i++)
        seq[i] = (i / 3) % 2 ? 'W' : 'A'; /* 15 s of each */
    r = feed(&POLICY, seq, 2, 0);
    assert_int_equal(r.changes, 0);
    /* both at once is no evidence either way */
    memset(seq, 'B', 100);
    seq[100] = '\0';
    r = feed(&POLICY, seq, 2, 0);
    assert_int_equal(r.changes, 0);
    /* up, then the trainer runs ahead at once: no way back within the cooldown
     * and the down window; one change up, then one down much later, never a
     * back-and-forth faster than window + cooldown */
    snprintf(seq, sizeof seq, "WWWWW%s", "AAAAAAAAAAAAAAAAAAAA"); /* 20 s, then 100 s */
    r = feed(&POLICY, seq, 2, 0);
    assert_int_equal(r.changes, 2);
    assert_int_equal(r.change_to[0], 3);
    assert_int_equal(r.change_to[1], 2);
    assert_true(r.change_t[1] - r.change_t[0] >= 60);
}

static void holds_while_a_scale_is_in_progress(void **state) {
    (void)state;
    /* the new server takes 8 samples (40 s) to join: no second step meanwhile,
     * although the cooldown has passed, and the waiting seen meanwhile (about
     * the old capacity) does not count: the next window starts at the join */
    run r = feed(&POLICY, "WWWWWWWWWWWWWWWW", 2, 8);
    assert_int_equal(r.changes, 1);
    assert_int_equal(r.final, 3);
    r = feed(&POLICY, "WWWWWWWWWWWWWWWWWWWW", 2, 8);
    assert_int_equal(r.changes, 2);
    assert_float_equal(r.change_t[1], 80, 0); /* joined at 60 s, then a 20 s window */
    autoscale_state st;
    memset(&st, 0, sizeof st);
    autoscale_reason why;
    autoscale_sample s = {.t_s = 0, .waiting_for_samples = true, .servers = 1};
    assert_int_equal(autoscale_decide(&POLICY, &st, &s, 2, &why), 2);
    assert_int_equal(why, AUTOSCALE_IN_PROGRESS);
    assert_string_equal(autoscale_reason_name(why), "in-progress");
}

static void keeps_inside_the_bounds(void **state) {
    (void)state;
    autoscale_state st;
    memset(&st, 0, sizeof st);
    autoscale_reason why;
    autoscale_sample s = {.t_s = 0, .servers = -1};
    assert_int_equal(autoscale_decide(&POLICY, &st, &s, 9, &why), 4);
    assert_int_equal(why, AUTOSCALE_BOUNDED);
    memset(&st, 0, sizeof st);
    assert_int_equal(autoscale_decide(&POLICY, &st, &s, 0, &why), 1);
    /* at the maximum, waiting forever changes nothing */
    run r = feed(&POLICY, "WWWWWWWWWWWWWWWWWWWW", 4, 0);
    assert_int_equal(r.changes, 0);
    /* a nonsense policy leaves the count alone */
    autoscale_policy bad = {.min_replicas = 3, .max_replicas = 2};
    memset(&st, 0, sizeof st);
    assert_int_equal(autoscale_decide(&bad, &st, &s, 7, &why), 7);
    assert_int_equal(why, AUTOSCALE_HOLD);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(scales_up_after_the_window_one_server_at_a_time),
        cmocka_unit_test(scales_down_on_a_longer_window_to_the_minimum),
        cmocka_unit_test(never_flaps),
        cmocka_unit_test(holds_while_a_scale_is_in_progress),
        cmocka_unit_test(keeps_inside_the_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
