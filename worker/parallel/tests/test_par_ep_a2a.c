/*
 * test_par_ep_a2a.c - expert parallelism with real token dispatch on forked
 * ranks (CPU backend): the ep ranks hold different sequences, each routes
 * its own tokens, the slots go by all-to-all(v) to their experts' ranks
 * (split inside each expert over etp where etp > 1) and come back, and one
 * training step equals one process (ep_test_util.h: harness and tolerance).
 * Besides loss, norm, gradients and weights, each layout checks the router
 * load: every expert's received rows, summed over edp, equal the
 * one-process forward's (token, expert) counts (ep_test_util.h).
 * Layouts: e2, e4 (one expert a rank; again with the router tied so that
 * one expert gets no token on any rank), e2 t2 etp1 (the tp ranks dispatch
 * halves of their tokens), e2 t2 etp2 (each expert split over the tp
 * ranks), the Qwen2-MoE shared expert, e2 p2 (dispatch inside pipeline
 * stages) and the hybrid megatron:(attn:d2p2t2|ffn:d2p2e2).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "areal/alloc.h"
#include "ep_test_util.h"

#define LAYOUT(nm, D, T, P, E, ETP, MB, MODEL, EMPTY)                                              \
    ((ep_layout){                                                                                  \
        .base = {.name = nm, .dp = D, .tp = T, .pp = P, .ep = E, .n_mb = MB, .model = MODEL},      \
        .etp = ETP,                                                                                \
        .want_empty = EMPTY})

static void e2(void **state) {
    (void)state;
    ep_layout L = LAYOUT("a2a-e2", 2, 1, 1, 2, 1, 1, "ref-qwen3-moe", 0);
    assert_int_equal(ep_run(&L), 0);
}

static void e4(void **state) {
    (void)state;
    ep_layout L = LAYOUT("a2a-e4", 4, 1, 1, 4, 1, 2, "ref-qwen3-moe", 0);
    assert_int_equal(ep_run(&L), 0);
}

/* The router tied so the last expert is never chosen: rank 3 of e4 runs no token at all. */
static void e4_empty_expert(void **state) {
    (void)state;
    ep_layout L = LAYOUT("a2a-e4-emp", 4, 1, 1, 4, 1, 2, "ref-qwen3-moe", 2);
    L.tie_router = 1;
    assert_int_equal(ep_run(&L), 0);
}

static void e2_t2_etp1(void **state) {
    (void)state;
    ep_layout L = LAYOUT("a2a-e2t2", 2, 2, 1, 2, 1, 1, "ref-qwen3-moe", 0);
    assert_int_equal(ep_run(&L), 0);
}

static void e2_t2_etp2(void **state) {
    (void)state;
    ep_layout L = LAYOUT("a2a-e2t2x2", 2, 2, 1, 2, 2, 1, "ref-qwen3-moe", 0);
    assert_int_equal(ep_run(&L), 0);
}

static void e2_qwen2_shared(void **state) {
    (void)state;
    ep_layout L = LAYOUT("a2a-q2moe", 2, 1, 1, 2, 1, 2, "ref-qwen2-moe", 0);
    assert_int_equal(ep_run(&L), 0);
}

static void e2_p2(void **state) {
    (void)state;
    ep_layout L = LAYOUT("a2a-e2p2", 2, 1, 2, 2, 1, 2, "ref-qwen3-moe", 0);
    assert_int_equal(ep_run(&L), 0);
}

/*
 * The hybrid form: attention d2 p2 t2, experts d2 p2 e2 on the same 8 ranks
 * (the parser derives etp 1 and edp 2; the expert layout's groups come from
 * the layout engine): the tp pairs split their tokens for the dispatch, the
 * experts' gradients sum over edp and the rest over dp, inside two stages.
 */
static void hybrid_attn_d2p2t2_ffn_d2p2e2(void **state) {
    (void)state;
    areal_alloc a;
    areal_error e;
    assert_int_equal(areal_alloc_parse("megatron:(attn:d2p2t2|ffn:d2p2e2)", &a, &e), AREAL_OK);
    const areal_strategy *s = &a.comp[0].strategy;
    assert_true(a.comp[0].hybrid);
    assert_int_equal(s->etp, 1);
    assert_int_equal(s->edp, 2);
    ep_layout L = LAYOUT("hybrid", s->dp, s->tp, s->pp, s->ep, s->etp, 2, "ref-qwen3-moe", 0);
    assert_int_equal(ep_run(&L), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(e2),
        cmocka_unit_test(e4),
        cmocka_unit_test(e4_empty_expert),
        cmocka_unit_test(e2_t2_etp1),
        cmocka_unit_test(e2_t2_etp2),
        cmocka_unit_test(e2_qwen2_shared),
        cmocka_unit_test(e2_p2),
        cmocka_unit_test(hybrid_attn_d2p2t2_ffn_d2p2e2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
