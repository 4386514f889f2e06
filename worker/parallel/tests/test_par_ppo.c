/*
 * test_par_ppo.c - the GRPO step's loss on the pipeline's last stage
 * (areal/parallel/ppo.h), in one process: its refusals name the field, and
 * the token-level aggregation makes two micro-batches' summed loss and
 * their logits' gradients those of the whole batch as one micro-batch (the
 * forked layouts of the other tests prove it across dp ranks).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "par_test_util.h"

#define T_ 12
#define V_ 8

typedef struct ppo_data {
    float logits[T_ * V_], prox[T_], behav[T_], adv[T_], mask[T_];
    int32_t targets[T_];
    int64_t cu_whole[3], cu_a[2], cu_b[2];
} ppo_data;

/* Two sequences of 5 and 7 tokens; every value a fixed hash. */
static void make(ppo_data *d) {
    for (int i = 0; i < T_ * V_; i++)
        d->logits[i] = 2.0f * pt_hash_unit("logits", (size_t)i);
    for (int t = 0; t < T_; t++) {
        int last = t == 4 || t == T_ - 1;
        d->targets[t] = last ? -1 : (int32_t)((t * 3 + 1) % V_);
        d->mask[t] = !last && t != 0 && t != 5; /* the first token of each is the prompt */
        d->prox[t] = -2.0f + 0.5f * pt_hash_unit("prox", (size_t)t);
        d->behav[t] = d->prox[t] - 0.1f * (1.0f + pt_hash_unit("behav", (size_t)t));
        d->adv[t] = t < 5 ? 0.8f : -0.6f;
    }
    int64_t w[3] = {0, 5, 12}, a[2] = {0, 5}, b[2] = {0, 7};
    memcpy(d->cu_whole, w, sizeof w), memcpy(d->cu_a, a, sizeof a), memcpy(d->cu_b, b, sizeof b);
}

static areal_ppo_loss_opts opts(void) {
    areal_ppo_loss_opts o;
    memset(&o, 0, sizeof o);
    o.eps_clip = 0.2;
    o.scale = 1.0;
    return o;
}

static void micro_batches_add_up_to_the_whole_batch(void **state) {
    (void)state;
    ppo_data d;
    make(&d);
    areal_ppo_loss_opts o = opts();
    areal_error e;
    areal_par_ppo_mb whole = {d.targets, d.prox, d.behav, d.adv, d.mask, d.cu_whole, 2};
    areal_par_ppo_mb two[2] = {
        {d.targets, d.prox, d.behav, d.adv, d.mask, d.cu_a, 1},
        {d.targets + 5, d.prox + 5, d.behav + 5, d.adv + 5, d.mask + 5, d.cu_b, 1},
    };
    areal_par_ppo c1, c2;
    assert_int_equal(areal_par_ppo_init(&c1, &whole, 1, &o, 0.9f, NULL, &e), AREAL_OK);
    assert_int_equal(areal_par_ppo_init(&c2, two, 2, &o, 0.9f, NULL, &e), AREAL_OK);
    assert_int_equal(c1.n_valid_global, 8);
    assert_int_equal(c2.n_valid_global, 8);
    float g1[T_ * V_], g2[T_ * V_];
    double l1 = 0, l2 = 0;
    assert_int_equal(areal_par_ppo_loss(&c1, 0, d.logits, T_, V_, g1, &l1, &e), AREAL_OK);
    assert_int_equal(areal_par_ppo_loss(&c2, 0, d.logits, 5, V_, g2, &l2, &e), AREAL_OK);
    assert_int_equal(areal_par_ppo_loss(&c2, 1, d.logits + 5 * V_, 7, V_, g2 + 5 * V_, &l2, &e),
                     AREAL_OK);
    assert_true(l1 != 0);
    assert_true(fabs(l1 - l2) <= 1e-6 * fabs(l1));
    assert_true(pt_rel_err(g2, g1, T_ * V_) <= 1e-6);
    assert_int_equal(c1.stats.n_valid, 8);
    assert_int_equal(c2.stats.n_valid, 8);
    /* a micro-batch's loss alone is not the batch mean (the scale is global, not per-batch) */
    areal_par_ppo c3;
    double l3 = 0;
    assert_int_equal(areal_par_ppo_init(&c3, &two[1], 1, &o, 0.9f, NULL, &e), AREAL_OK);
    assert_int_equal(areal_par_ppo_loss(&c3, 0, d.logits + 5 * V_, 7, V_, g2, &l3, &e), AREAL_OK);
    assert_true(fabs(l3 - l2) > 1e-3 * fabs(l2));
}

static void refusals(void **state) {
    (void)state;
    ppo_data d;
    make(&d);
    areal_ppo_loss_opts o = opts();
    areal_error e;
    areal_par_ppo c;
    areal_par_ppo_mb whole = {d.targets, d.prox, d.behav, d.adv, d.mask, d.cu_whole, 2};
    assert_int_equal(areal_par_ppo_init(&c, &whole, 0, &o, 1.0f, NULL, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "n_mb is 0"));
    assert_int_equal(areal_par_ppo_init(&c, &whole, 1, &o, 0.0f, NULL, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "actor.temperature"));
    assert_int_equal(areal_par_ppo_init(&c, &whole, 1, &o, 1.0f, NULL, &e), AREAL_OK);
    float g[T_ * V_];
    double l = 0;
    assert_int_equal(areal_par_ppo_loss(&c, 1, d.logits, T_, V_, g, &l, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "micro-batch 1 of 1"));
    assert_int_equal(areal_par_ppo_loss(&c, 0, d.logits, T_ - 1, V_, g, &l, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "cu_seqlens end at 12"));
    /* the loss's own refusal passes through: a non-finite advantage under the mask */
    d.adv[2] = NAN;
    assert_int_equal(areal_par_ppo_loss(&c, 0, d.logits, T_, V_, g, &l, &e), AREAL_EINVAL);
    assert_true(l == 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(micro_batches_add_up_to_the_whole_batch),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
