/*
 * test_rollout_batching.c - continuous batching gives every request what it
 * would get alone: greedy outputs equal areal_generate's token for token
 * (five architectures; 256 requests of mixed lengths arriving in waves, so
 * prefills join running decodes; chunked prefill; a tight KV budget that
 * forces preemption and recompute), seeded sampling equals areal_generate's
 * seeded draws whatever the batch, and logprobs equal a training forward's
 * within 1e-5. The engine serves the weights' packed twin
 * (areal_model_infer_pack) and areal_generate's model has none, so the
 * equality also holds the twin to the row-major weights.
 */
#include "engine_test_util.h"

static const char *ARCHS[] = {"ref-qwen2", "ref-qwen3", "ref-qwen3-moe", "ref-qwen2-moe",
                              "ref-llama"};

/* n_req greedy requests in waves against the engine cfg; every output equals areal_generate. */
static void greedy_waves(const char *arch, const areal_engine_config *cfg, int n_req, uint64_t seed,
                         areal_engine_stats *st_out) {
    areal_model ref;
    et_load(&ref, arch);
    areal_engine *e = et_engine(arch, cfg);
    int V = ref.cfg.vocab_size;
    et_coll c;
    et_coll_init(&c, n_req, e);
    uint64_t rs = seed;
    for (int i = 0; i < n_req; i++) {
        et_slot *s = &c.slots[i];
        s->n_ids = 1 + (int)et_rand(&rs, 60);
        s->max_new = 1 + (int)et_rand(&rs, 40);
        s->ids = et_prompt(&rs, s->n_ids, V);
    }
    for (int i = 0; i < n_req; i++) {
        areal_engine_params p = et_greedy(c.slots[i].max_new);
        et_submit_ok(e, &c.slots[i], &p);
        if (i % 16 == 15)
            et_sleep_ms(3); /* the next wave joins a running batch */
    }
    et_wait_done(&c, n_req);
    for (int i = 0; i < n_req; i++) {
        et_slot *s = &c.slots[i];
        assert_int_equal(s->done_calls, 1);
        areal_engine_result *r = s->res;
        assert_int_equal(r->n, 1);
        assert_int_equal(r->prompt_tokens, s->n_ids);
        areal_sampling sp = {.temperature = 0, .top_p = 1, .max_new_tokens = s->max_new};
        areal_gen_out o;
        et_generate(&ref, s->ids, s->n_ids, &sp, &o);
        areal_engine_sample *x = &r->samples[0];
        if (x->n_output != o.n)
            fail_msg("%s request %d: %d tokens, areal_generate %d", arch, i, x->n_output, o.n);
        assert_int_equal(x->finish, AREAL_FINISH_LENGTH);
        for (int j = 0; j < o.n; j++) {
            if (x->output_ids[j] != o.tokens[j])
                fail_msg("%s request %d token %d: %d, areal_generate %d", arch, i, j,
                         x->output_ids[j], o.tokens[j]);
            if (!(fabsf(x->output_logprobs[j] - o.logprobs[j]) <= 1e-5f))
                fail_msg("%s request %d token %d: logprob %g vs %g", arch, i, j,
                         x->output_logprobs[j], o.logprobs[j]);
        }
        areal_gen_out_free(&o);
    }
    areal_engine_get_stats(e, st_out);
    et_coll_free(&c);
    areal_engine_destroy(e);
    areal_model_free(&ref);
}

static void greedy_equals_generate_every_arch(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof ARCHS / sizeof ARCHS[0]; k++) {
        /* qwen2: 64 clients x 4 requests; the others a smaller mix */
        areal_engine_config cfg = {.kv_bytes = 8u << 20, .max_running = 64, .max_step_tokens = 96};
        areal_engine_stats st;
        greedy_waves(ARCHS[k], &cfg, k == 0 ? 256 : 24, 100 + k, &st);
        /* the engine serves the packed twin; areal_generate's model has none: equal above */
        assert_true(st.weights_packed);
        assert_int_equal(st.blocks_used, 0);
        assert_true(st.steps > 0);
        if (k == 0) { /* the batch really mixed: many at once, prefills beside decodes */
            print_message("256 requests: %llu steps (%llu with prefill and decode in one "
                          "forward), running batch up to %d\n",
                          (unsigned long long)st.steps, (unsigned long long)st.mixed_steps,
                          st.running_peak);
            assert_true(st.running_peak >= 32);
            assert_true(st.mixed_steps > 0);
        }
    }
    /* --no-prepack serves the row-major weights, with the same tokens */
    areal_engine_config cfg = {
        .kv_bytes = 8u << 20, .max_running = 16, .max_step_tokens = 96, .no_prepack = true};
    areal_engine_stats st;
    greedy_waves("ref-qwen2", &cfg, 24, 100, &st);
    assert_false(st.weights_packed);
}

static void greedy_with_preemption_and_threads(void **state) {
    (void)state;
    areal_model m;
    et_load(&m, "ref-qwen2");
    size_t block = areal_paged_kv_block_bytes(&m.cfg, 16);
    areal_model_free(&m);
    /* 12 blocks: the largest request (60 + 40 tokens, 7 blocks) fits alone, 16 of them do not */
    areal_engine_config cfg = {
        .kv_bytes = 12 * block, .max_running = 16, .max_step_tokens = 64, .threads = 2};
    areal_engine_stats st;
    greedy_waves("ref-qwen2", &cfg, 70, 7, &st);
    print_message("tight budget: %llu preemptions, peak %d of %d blocks\n",
                  (unsigned long long)st.preemptions, st.blocks_used_peak, st.blocks_total);
    assert_true(st.preemptions > 0);
    assert_true(st.blocks_used_peak <= st.blocks_total);
    assert_true(st.kv_bytes_allocated <= st.kv_bytes_budget);
}

/* Seeded requests: each equals areal_generate's draw of its prompt alone (stream 0), and
 * its logprobs equal the training forward's at that temperature. */
static void seeded_sampling_independent_of_batch(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof ARCHS / sizeof ARCHS[0]; k++) {
        areal_model ref;
        et_load(&ref, ARCHS[k]);
        areal_engine_config cfg = {.kv_bytes = 8u << 20, .max_running = 8};
        areal_engine *e = et_engine(ARCHS[k], &cfg);
        int n = 12;
        et_coll c;
        et_coll_init(&c, n, e);
        uint64_t rs = 55 + k;
        for (int i = 0; i < n; i++) {
            et_slot *s = &c.slots[i];
            s->n_ids = 2 + (int)et_rand(&rs, 30);
            s->ids = et_prompt(&rs, s->n_ids, ref.cfg.vocab_size);
            areal_engine_params p = et_greedy(12);
            p.temperature = 0.8f;
            p.top_p = i % 3 == 2 ? 0.9f : 1.0f;
            p.top_k = i % 3 == 1 ? 20 : 0;
            p.has_seed = true;
            p.sampling_seed = 1000 + (uint64_t)i;
            et_submit_ok(e, s, &p);
        }
        et_wait_done(&c, n);
        double worst = 0;
        for (int i = 0; i < n; i++) {
            et_slot *s = &c.slots[i];
            areal_engine_sample *x = &s->res->samples[0];
            areal_sampling sp = {.temperature = 0.8f,
                                 .top_p = i % 3 == 2 ? 0.9f : 1.0f,
                                 .top_k = i % 3 == 1 ? 20 : 0,
                                 .seed = 1000 + (uint64_t)i,
                                 .max_new_tokens = 12};
            areal_gen_out o;
            et_generate(&ref, s->ids, s->n_ids, &sp, &o);
            assert_int_equal(x->n_output, o.n);
            for (int j = 0; j < o.n; j++) {
                assert_int_equal(x->output_ids[j], o.tokens[j]);
                assert_true(fabsf(x->output_logprobs[j] - o.logprobs[j]) <= 1e-5f);
            }
            areal_gen_out_free(&o);
            if (i % 3 == 0) { /* unfiltered: the training forward's logprob */
                int T = s->n_ids + x->n_output;
                int32_t *seq = malloc(sizeof(int32_t) * (size_t)T);
                memcpy(seq, s->ids, sizeof(int32_t) * (size_t)s->n_ids);
                memcpy(seq + s->n_ids, x->output_ids, sizeof(int32_t) * (size_t)x->n_output);
                float *lp = et_forward_logprobs(&ref, seq, T, 0.8f);
                for (int j = 0; j < x->n_output; j++) {
                    double d = fabs((double)lp[s->n_ids - 1 + j] - x->output_logprobs[j]);
                    worst = d > worst ? d : worst;
                }
                free(lp);
                free(seq);
            }
        }
        print_message("%s: engine logprob vs training forward, max |diff| %.2e\n", ARCHS[k], worst);
        assert_true(worst <= 1e-5);
        et_coll_free(&c);
        areal_engine_destroy(e);
        areal_model_free(&ref);
    }
}

/* min_p close to 1 keeps only the most likely token: greedy output, logprob 0. */
static void min_p_near_one_is_greedy(void **state) {
    (void)state;
    areal_model ref;
    et_load(&ref, "ref-qwen3");
    areal_engine_config cfg = {.kv_bytes = 4u << 20};
    areal_engine *e = et_engine("ref-qwen3", &cfg);
    et_coll c;
    et_coll_init(&c, 1, e);
    uint64_t rs = 3;
    c.slots[0].n_ids = 9;
    c.slots[0].ids = et_prompt(&rs, 9, ref.cfg.vocab_size);
    areal_engine_params p = et_greedy(10);
    p.temperature = 1.0f;
    p.min_p = 0.999999f;
    et_submit_ok(e, &c.slots[0], &p);
    et_wait_done(&c, 1);
    areal_sampling sp = {.temperature = 0, .top_p = 1, .max_new_tokens = 10};
    areal_gen_out o;
    et_generate(&ref, c.slots[0].ids, 9, &sp, &o);
    areal_engine_sample *x = &c.slots[0].res->samples[0];
    for (int j = 0; j < 10; j++) {
        assert_int_equal(x->output_ids[j], o.tokens[j]);
        assert_true(x->output_logprobs[j] == 0.0f);
    }
    areal_gen_out_free(&o);
    et_coll_free(&c);
    areal_engine_destroy(e);
    areal_model_free(&ref);
}

/* vocab_limit: padding ids are never drawn; equal to areal_generate with the same limit. */
static void vocab_limit_masks_padding(void **state) {
    (void)state;
    areal_model ref;
    et_load(&ref, "ref-llama");
    areal_engine_config cfg = {.kv_bytes = 4u << 20, .vocab_limit = 40};
    areal_engine *e = et_engine("ref-llama", &cfg);
    et_coll c;
    et_coll_init(&c, 2, e);
    uint64_t rs = 17;
    for (int i = 0; i < 2; i++) {
        c.slots[i].n_ids = 12;
        c.slots[i].ids = et_prompt(&rs, 12, ref.cfg.vocab_size); /* prompt ids may be any */
        areal_engine_params p = et_greedy(20);
        p.temperature = i == 0 ? 0.0f : 1.2f;
        p.has_seed = true;
        p.sampling_seed = 4;
        et_submit_ok(e, &c.slots[i], &p);
    }
    et_wait_done(&c, 2);
    for (int i = 0; i < 2; i++) {
        areal_sampling sp = {.temperature = i == 0 ? 0.0f : 1.2f,
                             .top_p = 1,
                             .seed = 4,
                             .max_new_tokens = 20,
                             .vocab_limit = 40};
        areal_gen_out o;
        et_generate(&ref, c.slots[i].ids, 12, &sp, &o);
        areal_engine_sample *x = &c.slots[i].res->samples[0];
        assert_int_equal(x->n_output, o.n);
        for (int j = 0; j < o.n; j++) {
            assert_true(x->output_ids[j] < 40);
            assert_int_equal(x->output_ids[j], o.tokens[j]);
            assert_true(fabsf(x->output_logprobs[j] - o.logprobs[j]) <= 1e-5f);
        }
        areal_gen_out_free(&o);
    }
    et_coll_free(&c);
    areal_engine_destroy(e);
    areal_model_free(&ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(greedy_equals_generate_every_arch),
        cmocka_unit_test(greedy_with_preemption_and_threads),
        cmocka_unit_test(seeded_sampling_independent_of_batch),
        cmocka_unit_test(min_p_near_one_is_greedy),
        cmocka_unit_test(vocab_limit_masks_padding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
