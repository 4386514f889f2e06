/*
 * test_model_shard.c - the model's shard, stage and reduction seams against
 * the whole model on the tiny HF fixtures (Qwen2 with qkv bias, Qwen3 tied
 * with qk-norm, Qwen3-MoE with one MoE and one dense layer).
 *
 * - A shard's loaded parameters equal the corresponding slices of the whole
 *   model's: which tensors are present, their shapes and every value, with
 *   the expected slice computed here from the tensor names (column-parallel
 *   rows, row-parallel columns, the layer range, the expert range), not by
 *   the library's slicer.
 * - Running stage [0, 1) then [1, 2) equals the whole forward (logits bit for
 *   bit) and backward (every gradient; the tied embedding's two stage copies
 *   summed).
 * - Two tensor-parallel shards, and two expert-parallel shards, each pair in
 *   two threads joined by a hook that sums their partial results, equal the
 *   whole model's logits and gradients (within float reassociation), so the
 *   reduction points sit where the partial sums are.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "areal/model/model.h"
#include "areal/model/shard.h"
#include "model_ref_util.h"
#include "model_test_util.h"

static const char *const CASES[] = {"ref-qwen2", "ref-qwen3", "ref-qwen3-moe"};
#define NCASES 3

static void load(areal_model *m, const char *name, const areal_model_shard *s) {
    char dir[256];
    areal_error err;
    snprintf(dir, sizeof dir, FIX "%s", name);
    if (areal_model_load_shard(m, dir, s, NULL, &err) != AREAL_OK)
        fail_msg("%s: %s", dir, err.msg);
}

typedef struct batch_buf {
    areal_batch b;
    int32_t *tokens, *cu;
} batch_buf;

static void batch_of(batch_buf *bb, const char *name) {
    char file[300];
    areal_st_file ref;
    areal_error err;
    snprintf(file, sizeof file, FIX "%s/ref.safetensors", name);
    if (areal_st_open(file, &ref, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    size_t n = 0, ns = 0;
    bb->tokens = ref_i32(&ref, "tokens", &n);
    bb->cu = ref_i32(&ref, "cu_seqlens", &ns);
    areal_st_close(&ref);
    assert_non_null(bb->tokens);
    assert_non_null(bb->cu);
    bb->b = (areal_batch){
        .tokens = bb->tokens, .cu_seqlens = bb->cu, .n_tokens = (int)n, .n_seqs = (int)ns - 1};
}

static void batch_free(batch_buf *bb) {
    free(bb->tokens);
    free(bb->cu);
}

static float *param(const areal_model *m, const char *name) {
    int i = areal_model_find(m, name);
    return i < 0 ? NULL : m->params + m->offset[i];
}

static float *grad(const areal_model *m, const char *name) {
    int i = areal_model_find(m, name);
    return i < 0 ? NULL : m->grads + m->offset[i];
}

static size_t numel(const areal_tensor_spec *t) {
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}

static bool has(const char *s, const char *part) {
    return strstr(s, part) != NULL;
}

/* The test's own rule: 0 column-parallel (rows split), 1 row-parallel (columns), -1 whole. */
static int split_dim(const char *name, bool moe_layer) {
    if (has(name, "mlp.experts.") || has(name, "shared_expert") || (moe_layer && has(name, "mlp.")))
        return -1;
    if (has(name, "q_proj.") || has(name, "k_proj.") || has(name, "v_proj.") ||
        has(name, "gate_proj.") || has(name, "up_proj."))
        return 0;
    if (has(name, "o_proj.weight") || has(name, "down_proj.weight"))
        return 1;
    return -1;
}

/* Whether the shard holds HF tensor `name`, by the test's own reading of the names. */
static bool expect_present(const areal_model_config *c, const areal_model_shard *s,
                           const char *name) {
    bool first = s->pp_stage == 0, last = s->pp_stage == s->pp - 1;
    if (strcmp(name, "model.embed_tokens.weight") == 0)
        return first || (last && c->tie_word_embeddings);
    if (strcmp(name, "model.norm.weight") == 0 || strcmp(name, "lm_head.weight") == 0)
        return last;
    int l = -1, e = -1;
    sscanf(name, "model.layers.%d.", &l);
    if (l < s->first_layer || l >= s->first_layer + s->n_layers)
        return false;
    const char *ex = strstr(name, "mlp.experts.");
    if (ex != NULL && sscanf(ex, "mlp.experts.%d.", &e) == 1)
        return e / (c->num_experts / s->ep) == s->ep_rank;
    return true;
}

/* Every whole tensor: present in the shard or not as expected; when present, the right slice. */
static void check_shard(const areal_model *w, const areal_model *s) {
    const areal_model_shard *sh = &s->shard;
    size_t present = 0;
    for (size_t i = 0; i < w->n_specs; i++) {
        const areal_tensor_spec *t = &w->specs[i];
        bool want = expect_present(&w->cfg, sh, t->name);
        int j = areal_model_find(s, t->name);
        if (want != (j >= 0))
            fail_msg("%s: tp %d/%d pp %d/%d ep %d/%d: present %d, want %d", t->name, sh->tp_rank,
                     sh->tp, sh->pp_stage, sh->pp, sh->ep_rank, sh->ep, j >= 0, want);
        if (j < 0)
            continue;
        present++;
        int l = -1;
        sscanf(t->name, "model.layers.%d.", &l);
        bool moe = l >= 0 && w->cfg.num_experts > 0 && w->cfg.moe_layer[l];
        int dim = sh->tp > 1 ? split_dim(t->name, moe) : -1;
        const areal_tensor_spec *st = &s->specs[j];
        size_t rows = (size_t)t->shape[0], cols = t->ndim == 2 ? (size_t)t->shape[1] : 1;
        size_t lr = dim == 0 ? rows / (size_t)sh->tp : rows;
        size_t lc = dim == 1 ? cols / (size_t)sh->tp : cols;
        assert_int_equal(st->ndim, t->ndim);
        assert_int_equal(numel(st), lr * lc);
        const float *full = w->params + w->offset[i], *got = s->params + s->offset[j];
        size_t r0 = dim == 0 ? lr * (size_t)sh->tp_rank : 0;
        size_t c0 = dim == 1 ? lc * (size_t)sh->tp_rank : 0;
        for (size_t r = 0; r < lr; r++)
            for (size_t c = 0; c < lc; c++)
                if (got[r * lc + c] != full[(r0 + r) * cols + c0 + c])
                    fail_msg("%s: tp rank %d element (%zu, %zu) differs from the whole tensor",
                             t->name, sh->tp_rank, r, c);
    }
    assert_int_equal(present, s->n_specs);
}

static void shard_slices_equal_whole_slices(void **state) {
    (void)state;
    for (int k = 0; k < NCASES; k++) {
        areal_model w, s;
        load(&w, CASES[k], NULL);
        areal_model_shard sh = areal_model_shard_whole(&w.cfg);
        load(&s, CASES[k], &sh); /* the whole-model shard: everything, whole */
        check_shard(&w, &s);
        assert_int_equal(s.n_params, w.n_params);
        areal_model_free(&s);
        for (int r = 0; r < 2; r++) {
            sh = areal_model_shard_whole(&w.cfg);
            sh.tp = 2, sh.tp_rank = r;
            load(&s, CASES[k], &sh);
            check_shard(&w, &s);
            assert_true(s.n_params < w.n_params);
            areal_model_free(&s);
            assert_int_equal(areal_model_shard_stage(&w.cfg, r, 2, &sh, NULL), AREAL_OK);
            assert_int_equal(sh.first_layer, r);
            assert_int_equal(sh.n_layers, 1);
            load(&s, CASES[k], &sh);
            check_shard(&w, &s);
            areal_model_free(&s);
            if (w.cfg.num_experts > 0) {
                sh = areal_model_shard_whole(&w.cfg);
                sh.ep = 2, sh.ep_rank = r, sh.tp = 2, sh.tp_rank = 1 - r;
                load(&s, CASES[k], &sh);
                check_shard(&w, &s);
                areal_model_free(&s);
            }
        }
        areal_model_free(&w);
    }
}

/* dlogits: a fixed, deterministic gradient (not the output of anything under test). */
static float *make_dlogits(int T, int V) {
    float *d = malloc(sizeof(float) * (size_t)T * V);
    assert_non_null(d);
    for (size_t i = 0; i < (size_t)T * V; i++)
        d[i] = 0.01f * (float)sin(0.37 * (double)i + 1.0);
    return d;
}

static void stages_chain_to_the_whole_model(void **state) {
    (void)state;
    for (int k = 0; k < NCASES; k++) {
        areal_model w, s0, s1;
        areal_model_shard a0, a1;
        areal_error err;
        batch_buf bb;
        load(&w, CASES[k], NULL);
        batch_of(&bb, CASES[k]);
        assert_int_equal(areal_model_shard_stage(&w.cfg, 0, 2, &a0, NULL), AREAL_OK);
        assert_int_equal(areal_model_shard_stage(&w.cfg, 1, 2, &a1, NULL), AREAL_OK);
        load(&s0, CASES[k], &a0);
        load(&s1, CASES[k], &a1);
        areal_acts aw, x0, x1;
        assert_int_equal(areal_model_forward(&w, &bb.b, &aw, &err), AREAL_OK);
        assert_int_equal(areal_model_forward_stage(&s0, &bb.b, NULL, &x0, &err), AREAL_OK);
        assert_null(x0.logits);
        assert_non_null(x0.hidden);
        assert_int_equal(areal_model_forward_stage(&s1, &bb.b, x0.hidden, &x1, &err), AREAL_OK);
        assert_null(x1.hidden);
        int T = bb.b.n_tokens, V = w.cfg.vocab_size, H = w.cfg.hidden_size;
        assert_memory_equal(x1.logits, aw.logits, sizeof(float) * (size_t)T * V);
        float *dl = make_dlogits(T, V), *dx = malloc(sizeof(float) * (size_t)T * H);
        assert_non_null(dx);
        assert_int_equal(areal_model_backward(&w, &aw, dl, &err), AREAL_OK);
        assert_int_equal(areal_model_backward_stage(&s1, &x1, dl, dx, &err), AREAL_OK);
        assert_int_equal(areal_model_backward_stage(&s0, &x0, dx, NULL, &err), AREAL_OK);
        for (size_t i = 0; i < w.n_specs; i++) {
            const char *name = w.specs[i].name;
            const float *gw = w.grads + w.offset[i], *g0 = grad(&s0, name), *g1 = grad(&s1, name);
            size_t n = numel(&w.specs[i]);
            assert_true(g0 != NULL || g1 != NULL);
            if (g0 != NULL && g1 != NULL) { /* the tied embedding: both stages hold a copy */
                float *sum = malloc(sizeof(float) * n);
                assert_non_null(sum);
                for (size_t j = 0; j < n; j++)
                    sum[j] = g0[j] + g1[j];
                double e = ref_rel_err(sum, gw, n);
                free(sum);
                if (e > 1e-6)
                    fail_msg("%s %s: summed stage gradients off by %g", CASES[k], name, e);
            } else if (memcmp(g0 != NULL ? g0 : g1, gw, sizeof(float) * n) != 0) {
                fail_msg("%s %s: the stage gradient differs from the whole model's", CASES[k],
                         name);
            }
        }
        free(dl);
        free(dx);
        areal_acts_free(&aw);
        areal_acts_free(&x0);
        areal_acts_free(&x1);
        areal_model_free(&w);
        areal_model_free(&s0);
        areal_model_free(&s1);
        batch_free(&bb);
    }
}

/* ---- two tensor-parallel shards in two threads, summed by the hook */

typedef struct tp_pair {
    pthread_barrier_t bar;
    float *bufs[2];
    int calls[2];
} tp_pair;

typedef struct tp_rank {
    tp_pair *pair;
    int rank;
    areal_model m;
    const areal_batch *b;
    const float *dlogits;
    areal_acts a;
    int rc;
    areal_error err;
} tp_rank;

/* All-reduce by sum of two ranks in one process: both see bufs[0] + bufs[1], in that order. */
static int pair_sum(void *ctx, areal_reduce_point pt, int layer, float *buf, size_t n,
                    areal_error *err) {
    (void)pt, (void)layer, (void)err;
    tp_rank *r = ctx;
    tp_pair *p = r->pair;
    float *tmp = malloc(sizeof(float) * n);
    p->bufs[r->rank] = buf;
    p->calls[r->rank]++;
    pthread_barrier_wait(&p->bar);
    for (size_t i = 0; tmp != NULL && i < n; i++)
        tmp[i] = p->bufs[0][i] + p->bufs[1][i];
    pthread_barrier_wait(&p->bar);
    if (tmp == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "test hook: out of memory");
    memcpy(buf, tmp, sizeof(float) * n);
    free(tmp);
    return AREAL_OK;
}

static void *tp_thread(void *arg) {
    tp_rank *r = arg;
    r->rc = areal_model_forward(&r->m, r->b, &r->a, &r->err);
    if (r->rc == AREAL_OK)
        r->rc = areal_model_backward(&r->m, &r->a, r->dlogits, &r->err);
    return NULL;
}

/* Model `name` as two shards (tp 2 when ep is 0, else ep 2) in two threads, against the whole. */
static void pair_equals_whole(const char *name, int ep) {
    {
        areal_model w;
        areal_error err;
        batch_buf bb;
        load(&w, name, NULL);
        batch_of(&bb, name);
        int T = bb.b.n_tokens, V = w.cfg.vocab_size;
        float *dl = make_dlogits(T, V);
        areal_acts aw;
        assert_int_equal(areal_model_forward(&w, &bb.b, &aw, &err), AREAL_OK);
        assert_int_equal(areal_model_backward(&w, &aw, dl, &err), AREAL_OK);
        tp_pair pair = {0};
        pthread_barrier_init(&pair.bar, NULL, 2);
        tp_rank rk[2];
        pthread_t th[2];
        for (int r = 0; r < 2; r++) {
            memset(&rk[r], 0, sizeof rk[r]);
            areal_model_shard sh = areal_model_shard_whole(&w.cfg);
            if (ep)
                sh.ep = 2, sh.ep_rank = r;
            else
                sh.tp = 2, sh.tp_rank = r;
            load(&rk[r].m, name, &sh);
            rk[r] = (tp_rank){.pair = &pair, .rank = r, .m = rk[r].m, .b = &bb.b, .dlogits = dl};
            areal_model_set_reduce(&rk[r].m, pair_sum, &rk[r]);
        }
        for (int r = 0; r < 2; r++)
            pthread_create(&th[r], NULL, tp_thread, &rk[r]);
        for (int r = 0; r < 2; r++)
            pthread_join(th[r], NULL);
        pthread_barrier_destroy(&pair.bar);
        for (int r = 0; r < 2; r++) {
            if (rk[r].rc != AREAL_OK)
                fail_msg("%s rank %d: %s", name, r, rk[r].err.msg);
            /* tp: attention and dense MLP, forward and backward; ep: the MoE layers' pair */
            int moe = 0;
            for (int l = 0; l < w.cfg.num_layers; l++)
                moe += w.cfg.num_experts > 0 && w.cfg.moe_layer[l];
            assert_int_equal(pair.calls[r], ep ? 2 * moe : 4 * w.cfg.num_layers - 2 * moe);
            double e = ref_rel_err(rk[r].a.logits, aw.logits, (size_t)T * V);
            if (e > 1e-5)
                fail_msg("%s rank %d: logits off by %g", name, r, e);
            for (size_t i = 0; i < rk[r].m.n_specs; i++) {
                const areal_tensor_spec *t = &rk[r].m.specs[i];
                int j = areal_model_find(&w, t->name);
                assert_true(j >= 0);
                size_t n = numel(t);
                float *want = malloc(sizeof(float) * n);
                assert_non_null(want);
                areal_tensor_slice_copy(want, w.grads + w.offset[j], &w.specs[j],
                                        &rk[r].m.slices[i]);
                /* qk-norm weights (tp: own heads) and the router (ep: own experts) sum up */
                bool partial = ep ? has(t->name, "mlp.gate.weight")
                                  : has(t->name, "q_norm") || has(t->name, "k_norm");
                assert_int_equal(areal_model_shard_grad_partial(&rk[r].m.shard, t->name), partial);
                float *got = rk[r].m.grads + rk[r].m.offset[i];
                if (partial) {
                    const float *other = rk[1 - r].m.grads + rk[1 - r].m.offset[i];
                    for (size_t x = 0; x < n; x++)
                        want[x] -= other[x]; /* got + other == whole */
                }
                e = ref_rel_err(got, want, n);
                free(want);
                if (e > 1e-4)
                    fail_msg("%s rank %d %s: gradient off by %g", name, r, t->name, e);
            }
        }
        for (int r = 0; r < 2; r++) {
            areal_acts_free(&rk[r].a);
            areal_model_free(&rk[r].m);
        }
        free(dl);
        areal_acts_free(&aw);
        areal_model_free(&w);
        batch_free(&bb);
    }
}

static void tensor_parallel_pair_equals_whole(void **state) {
    (void)state;
    for (int k = 0; k < NCASES; k++)
        pair_equals_whole(CASES[k], 0);
}

static void expert_parallel_pair_equals_whole(void **state) {
    (void)state;
    pair_equals_whole("ref-qwen3-moe", 1);
    pair_equals_whole("ref-qwen2-moe", 1); /* with a shared expert */
}

static void bad_shards_are_refused(void **state) {
    (void)state;
    areal_model w, s;
    areal_error err;
    load(&w, "ref-qwen2", NULL);
    areal_model_shard sh = areal_model_shard_whole(&w.cfg);
    sh.tp = 3;
    assert_int_equal(areal_model_init_shard(&s, &w.cfg, &sh, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "num_attention_heads"));
    sh = areal_model_shard_whole(&w.cfg);
    sh.pp = 2, sh.n_layers = 1; /* stage 0 of 2 must start at 0: fine; but ends short of... */
    assert_int_equal(areal_model_init_shard(&s, &w.cfg, &sh, NULL, &err), AREAL_OK);
    areal_model_free(&s);
    sh.pp_stage = 1; /* stage 1 starting at layer 0 */
    assert_int_equal(areal_model_init_shard(&s, &w.cfg, &sh, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "first stage starts at layer 0"));
    sh = areal_model_shard_whole(&w.cfg);
    sh.ep = 2;
    assert_int_equal(areal_model_init_shard(&s, &w.cfg, &sh, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "num_experts"));
    assert_int_equal(areal_model_shard_stage(&w.cfg, 0, 3, &sh, &err), AREAL_EINVAL);
    /* the stage's forward needs its input exactly on the later stages */
    batch_buf bb;
    batch_of(&bb, "ref-qwen2");
    areal_acts a;
    float x[1] = {0};
    assert_int_equal(areal_model_forward_stage(&w, &bb.b, x, &a, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "x_in"));
    assert_int_equal(areal_model_shard_stage(&w.cfg, 1, 2, &sh, NULL), AREAL_OK);
    load(&s, "ref-qwen2", &sh);
    assert_int_equal(areal_model_forward_stage(&s, &bb.b, NULL, &a, &err), AREAL_EINVAL);
    assert_null(param(&s, "model.embed_tokens.weight"));
    assert_non_null(param(&s, "lm_head.weight"));
    areal_model_free(&s);
    batch_free(&bb);
    areal_model_free(&w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shard_slices_equal_whole_slices),
        cmocka_unit_test(stages_chain_to_the_whole_model),
        cmocka_unit_test(tensor_parallel_pair_equals_whole),
        cmocka_unit_test(expert_parallel_pair_equals_whole),
        cmocka_unit_test(bad_shards_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
