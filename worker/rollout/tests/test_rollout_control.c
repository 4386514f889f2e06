/*
 * test_rollout_control.c - the rollout engine's control paths: abort at
 * several points and resubmit prompt + partial output as AReaL's client does
 * (greedy: exactly the uninterrupted output, reusing the cached prefix;
 * seeded: the resumed logprobs are the served weights' even across a weight
 * swap); pause in both modes and continue; weight swaps (abort or in place,
 * the wrong architecture refused, the prefix cache flushed); queue-full
 * backpressure and draining; stop tokens, EOS, the caller's stop; prompt
 * scoring; bad requests and settings named in the error; requests flowing
 * while another thread pauses, flushes, aborts and swaps.
 */
#include <stdatomic.h>

#include "engine_test_util.h"

#define ARCH "ref-qwen2"

static void make_prompt(et_slot *s, uint64_t seed, int n, int V) {
    uint64_t st = seed;
    s->n_ids = n;
    s->ids = et_prompt(&st, n, V);
}

/* s2's ids = s's ids + s's output so far (the resubmission). */
static void resubmission(et_slot *s2, const et_slot *s) {
    const areal_engine_sample *x = &s->res->samples[0];
    s2->n_ids = s->n_ids + x->n_output;
    s2->ids = malloc(sizeof(int32_t) * (size_t)s2->n_ids);
    assert_non_null(s2->ids);
    memcpy(s2->ids, s->ids, sizeof(int32_t) * (size_t)s->n_ids);
    memcpy(s2->ids + s->n_ids, x->output_ids, sizeof(int32_t) * (size_t)x->n_output);
}

static void abort_and_resubmit_greedy(void **state) {
    (void)state;
    areal_model ref;
    et_load(&ref, ARCH);
    areal_engine_config cfg = {.kv_bytes = 4u << 20};
    areal_engine *e = et_engine(ARCH, &cfg);
    const int max_new = 40, plen = 37, points[] = {1, 4, 13, 27, 39};
    const int np = (int)(sizeof points / sizeof points[0]);
    et_coll c;
    et_coll_init(&c, 2 * np + 2, e);
    areal_sampling sp = {.temperature = 0, .top_p = 1, .max_new_tokens = max_new};
    areal_gen_out want;
    make_prompt(&c.slots[0], 9, plen, ref.cfg.vocab_size);
    et_generate(&ref, c.slots[0].ids, plen, &sp, &want);
    for (int k = 0; k < np; k++) {
        et_slot *s = &c.slots[2 * k], *s2 = &c.slots[2 * k + 1];
        if (k > 0)
            make_prompt(s, 9, plen, ref.cfg.vocab_size);
        s->abort_at = points[k];
        snprintf(s->rid, sizeof s->rid, "same-rid"); /* AReaL reuses the rid */
        snprintf(s2->rid, sizeof s2->rid, "same-rid");
        areal_engine_params p = et_greedy(max_new);
        et_submit_ok(e, s, &p);
        et_wait_done(&c, 2 * k + 1);
        areal_engine_sample *x = &s->res->samples[0];
        if (x->finish != AREAL_FINISH_ABORT || x->n_output != points[k])
            fail_msg("abort at %d: finish %d after %d tokens", points[k], x->finish, x->n_output);
        /* the abort lands at the next step boundary */
        resubmission(s2, s);
        p = et_greedy(max_new - x->n_output);
        et_submit_ok(e, s2, &p);
        et_wait_done(&c, 2 * k + 2);
        areal_engine_sample *y = &s2->res->samples[0];
        assert_int_equal(y->finish, AREAL_FINISH_LENGTH);
        assert_int_equal(x->n_output + y->n_output, want.n);
        for (int j = 0; j < want.n; j++) {
            int32_t got = j < x->n_output ? x->output_ids[j] : y->output_ids[j - x->n_output];
            if (got != want.tokens[j])
                fail_msg("abort at %d: token %d is %d, uninterrupted %d", points[k], j, got,
                         want.tokens[j]);
        }
        /* the aborted request's full blocks serve the resubmission */
        assert_int_equal(y->cached_tokens, (s2->n_ids - 1) / 16 * 16);
    }
    /* pause(abort) from another thread at an arbitrary point: same outcome */
    et_slot *s = &c.slots[2 * np], *s2 = &c.slots[2 * np + 1];
    make_prompt(s, 9, plen, ref.cfg.vocab_size);
    s->signal_at = 7;
    areal_engine_params p = et_greedy(max_new);
    et_submit_ok(e, s, &p);
    et_wait_signal(s);
    areal_engine_pause(e, AREAL_PAUSE_ABORT);
    assert_int_equal(c.n_done, 2 * np + 1); /* on_done ran before pause returned */
    areal_engine_continue(e);
    areal_engine_sample *x = &s->res->samples[0];
    assert_int_equal(x->finish, AREAL_FINISH_ABORT);
    assert_true(x->n_output >= 7 && x->n_output < max_new);
    resubmission(s2, s);
    p = et_greedy(max_new - x->n_output);
    et_submit_ok(e, s2, &p);
    et_wait_done(&c, 2 * np + 2);
    areal_engine_sample *y = &s2->res->samples[0];
    for (int j = 0; j < want.n; j++)
        assert_int_equal(j < x->n_output ? x->output_ids[j] : y->output_ids[j - x->n_output],
                         want.tokens[j]);
    areal_gen_out_free(&want);
    et_coll_free(&c);
    areal_engine_destroy(e);
    areal_model_free(&ref);
}

/* A copy of m's weights with every parameter scaled (same architecture, other outputs). */
static void perturbed(areal_engine *e, areal_model *out, float scale) {
    areal_error err;
    if (areal_engine_copy_model(e, out, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    for (size_t i = 0; i < out->n_params; i++)
        out->params[i] *= (i % 7 == 3) ? -scale : scale;
}

static void seeded_resume_across_weight_swap(void **state) {
    (void)state;
    areal_engine_config cfg = {.kv_bytes = 4u << 20, .weight_version = "v0"};
    areal_engine *e = et_engine(ARCH, &cfg);
    areal_model next, next_ref;
    perturbed(e, &next, 1.1f);
    perturbed(e, &next_ref, 1.1f);
    int V = next.cfg.vocab_size;
    et_coll c;
    et_coll_init(&c, 2, e);
    make_prompt(&c.slots[0], 21, 23, V);
    c.slots[0].abort_at = 6;
    areal_engine_params p = et_greedy(20);
    p.temperature = 0.9f;
    p.has_seed = true;
    p.sampling_seed = 77;
    et_submit_ok(e, &c.slots[0], &p);
    et_wait_done(&c, 1);
    assert_string_equal(c.slots[0].res->weight_version, "v0");
    areal_error err;
    if (areal_engine_swap_model(e, &next, "v1", true, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_null(next.params); /* the engine owns it now */
    resubmission(&c.slots[1], &c.slots[0]);
    p.max_new_tokens = 20 - c.slots[0].res->samples[0].n_output;
    et_submit_ok(e, &c.slots[1], &p);
    et_wait_done(&c, 2);
    areal_engine_result *r = c.slots[1].res;
    assert_string_equal(r->weight_version, "v1");
    assert_int_equal(r->samples[0].cached_tokens, 0); /* old-weights KV is never reused */
    int T = c.slots[1].n_ids + r->samples[0].n_output;
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)T);
    memcpy(seq, c.slots[1].ids, sizeof(int32_t) * (size_t)c.slots[1].n_ids);
    memcpy(seq + c.slots[1].n_ids, r->samples[0].output_ids,
           sizeof(int32_t) * (size_t)r->samples[0].n_output);
    float *lp = et_forward_logprobs(&next_ref, seq, T, 0.9f);
    double worst = 0;
    for (int j = 0; j < r->samples[0].n_output; j++) {
        double d = fabs((double)lp[c.slots[1].n_ids - 1 + j] - r->samples[0].output_logprobs[j]);
        worst = d > worst ? d : worst;
    }
    print_message("resumed logprobs vs the new weights' forward: max |diff| %.2e\n", worst);
    assert_true(worst <= 1e-5);
    areal_engine_stats st;
    areal_engine_get_stats(e, &st);
    assert_string_equal(st.weight_version, "v1");
    assert_int_equal(st.weight_updates, 1);
    free(lp);
    free(seq);
    et_coll_free(&c);
    areal_engine_destroy(e);
    areal_model_free(&next_ref);
}

static void weight_swap_mid_run(void **state) {
    (void)state;
    areal_engine_config cfg = {.kv_bytes = 4u << 20, .max_running = 4};
    areal_engine *e = et_engine(ARCH, &cfg);
    areal_model ref_new, next;
    perturbed(e, &ref_new, 0.95f);
    int V = ref_new.cfg.vocab_size, n = 8;
    et_coll c;
    et_coll_init(&c, 2 * n, e);
    c.slots[0].signal_at = 3;
    /* both models made before the requests run: loading them between the signal and the
     * swap let the requests finish first on a loaded machine */
    areal_model other;
    et_load(&other, "ref-qwen3");
    perturbed(e, &next, 0.95f);
    for (int i = 0; i < n; i++) {
        make_prompt(&c.slots[i], 40 + (uint64_t)i, 10 + i, V);
        areal_engine_params p = et_greedy(60);
        et_submit_ok(e, &c.slots[i], &p);
    }
    et_wait_signal(&c.slots[0]);
    /* the wrong architecture is refused and the old weights keep serving */
    areal_error err;
    assert_int_equal(areal_engine_swap_model(e, &other, "bad", true, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "architecture") ? err.msg : strstr(err.msg, "tensor"));
    areal_model_free(&other);
    if (areal_engine_swap_model(e, &next, "v2", true, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(c.n_done, n); /* abort_live: everything ended before the swap */
    for (int i = 0; i < n; i++) {
        assert_int_equal(c.slots[i].res->samples[0].finish, AREAL_FINISH_ABORT);
        assert_string_equal(c.slots[i].res->weight_version, "0");
    }
    /* after the swap: the new weights' greedy output, the new version */
    for (int i = 0; i < n; i++) {
        et_slot *s = &c.slots[n + i];
        make_prompt(s, 40 + (uint64_t)i, 10 + i, V);
        areal_engine_params p = et_greedy(15);
        et_submit_ok(e, s, &p);
    }
    et_wait_done(&c, 2 * n);
    for (int i = 0; i < n; i++) {
        et_slot *s = &c.slots[n + i];
        areal_sampling sp = {.temperature = 0, .top_p = 1, .max_new_tokens = 15};
        areal_gen_out o;
        et_generate(&ref_new, s->ids, s->n_ids, &sp, &o);
        assert_string_equal(s->res->weight_version, "v2");
        assert_int_equal(s->res->samples[0].n_output, o.n);
        for (int j = 0; j < o.n; j++)
            assert_int_equal(s->res->samples[0].output_ids[j], o.tokens[j]);
        areal_gen_out_free(&o);
    }
    /* in place: held requests continue on the new weights and finish */
    et_coll c2;
    et_coll_init(&c2, 2, e);
    c2.slots[0].signal_at = 2;
    for (int i = 0; i < 2; i++) {
        make_prompt(&c2.slots[i], 90 + (uint64_t)i, 12, V);
        areal_engine_params p = et_greedy(30);
        et_submit_ok(e, &c2.slots[i], &p);
    }
    et_wait_signal(&c2.slots[0]);
    areal_engine_pause(e, AREAL_PAUSE_IN_PLACE);
    perturbed(e, &next, 1.0f);
    if (areal_engine_swap_model(e, &next, NULL, false, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    areal_engine_continue(e);
    et_wait_done(&c2, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(c2.slots[i].res->samples[0].finish, AREAL_FINISH_LENGTH);
        assert_int_equal(c2.slots[i].res->samples[0].n_output, 30);
        assert_string_equal(c2.slots[i].res->weight_version, "v2"); /* NULL keeps the version */
    }
    et_coll_free(&c2);
    et_coll_free(&c);
    areal_engine_destroy(e);
    areal_model_free(&ref_new);
}

static void pause_in_place_holds_and_continues(void **state) {
    (void)state;
    areal_model ref;
    et_load(&ref, ARCH);
    areal_engine_config cfg = {.kv_bytes = 4u << 20};
    areal_engine *e = et_engine(ARCH, &cfg);
    et_coll c;
    et_coll_init(&c, 2, e);
    make_prompt(&c.slots[0], 5, 30, ref.cfg.vocab_size);
    make_prompt(&c.slots[1], 6, 8, ref.cfg.vocab_size);
    c.slots[0].signal_at = 5;
    areal_engine_params p = et_greedy(50);
    et_submit_ok(e, &c.slots[0], &p);
    et_wait_signal(&c.slots[0]);
    areal_engine_pause(e, AREAL_PAUSE_IN_PLACE);
    pthread_mutex_lock(&c.mu);
    int held = c.slots[0].tokens;
    pthread_mutex_unlock(&c.mu);
    et_submit_ok(e, &c.slots[1], &p); /* a paused engine queues, admits nothing */
    et_sleep_ms(30);
    areal_engine_stats st;
    areal_engine_get_stats(e, &st);
    assert_true(st.paused);
    assert_int_equal(st.running, 1);
    assert_int_equal(st.queued, 1);
    pthread_mutex_lock(&c.mu);
    assert_int_equal(c.slots[0].tokens, held);
    assert_int_equal(c.slots[1].tokens, 0);
    assert_int_equal(c.n_done, 0);
    pthread_mutex_unlock(&c.mu);
    areal_engine_continue(e);
    et_wait_done(&c, 2);
    for (int i = 0; i < 2; i++) {
        areal_sampling sp = {.temperature = 0, .top_p = 1, .max_new_tokens = 50};
        areal_gen_out o;
        et_generate(&ref, c.slots[i].ids, c.slots[i].n_ids, &sp, &o);
        assert_int_equal(c.slots[i].res->samples[0].n_output, o.n);
        for (int j = 0; j < o.n; j++)
            assert_int_equal(c.slots[i].res->samples[0].output_ids[j], o.tokens[j]);
        areal_gen_out_free(&o);
    }
    et_coll_free(&c);
    areal_engine_destroy(e);
    areal_model_free(&ref);
}

static void pause_abort_ends_running_and_queued(void **state) {
    (void)state;
    areal_engine_config cfg = {.kv_bytes = 4u << 20, .max_running = 2};
    areal_engine *e = et_engine(ARCH, &cfg);
    int V = areal_engine_model_config(e)->vocab_size;
    et_coll c;
    et_coll_init(&c, 4, e);
    for (int i = 0; i < 4; i++)
        make_prompt(&c.slots[i], 70 + (uint64_t)i, 9, V);
    c.slots[0].signal_at = 3;
    areal_engine_params p = et_greedy(80);
    for (int i = 0; i < 3; i++)
        et_submit_ok(e, &c.slots[i], &p);
    et_wait_signal(&c.slots[0]);
    areal_engine_pause(e, AREAL_PAUSE_ABORT);
    assert_int_equal(c.n_done, 3);
    for (int i = 0; i < 3; i++) {
        areal_engine_sample *x = &c.slots[i].res->samples[0];
        assert_int_equal(x->finish, AREAL_FINISH_ABORT);
        assert_true(x->n_output < 80);
    }
    assert_true(c.slots[0].res->samples[0].n_output >= 3);    /* partial output kept */
    assert_int_equal(c.slots[2].res->samples[0].n_output, 0); /* was queued */
    p = et_greedy(5);
    et_submit_ok(e, &c.slots[3], &p);
    et_sleep_ms(20);
    assert_int_equal(c.n_done, 3);
    areal_engine_continue(e);
    et_wait_done(&c, 4);
    assert_int_equal(c.slots[3].res->samples[0].n_output, 5);
    areal_engine_stats st;
    areal_engine_get_stats(e, &st);
    assert_int_equal(st.requests_aborted, 3);
    assert_int_equal(st.requests_finished, 1);
    et_coll_free(&c);
    areal_engine_destroy(e);
}

static void queue_full_backpressure_and_drain(void **state) {
    (void)state;
    areal_engine_config cfg = {.kv_bytes = 4u << 20, .max_queued = 4};
    areal_engine *e = et_engine(ARCH, &cfg);
    int V = areal_engine_model_config(e)->vocab_size;
    et_coll c;
    et_coll_init(&c, 7, e);
    for (int i = 0; i < 7; i++)
        make_prompt(&c.slots[i], 200 + (uint64_t)i, 6, V);
    areal_engine_pause(e, AREAL_PAUSE_IN_PLACE);
    areal_engine_params p = et_greedy(4);
    for (int i = 0; i < 3; i++)
        et_submit_ok(e, &c.slots[i], &p);
    areal_error err;
    areal_engine_params p2 = p;
    p2.n = 2;
    assert_int_equal(et_submit(e, &c.slots[3], &p2, &err), AREAL_ENGINE_EFULL);
    assert_non_null(strstr(err.msg, "retry"));
    et_submit_ok(e, &c.slots[3], &p);
    assert_int_equal(et_submit(e, &c.slots[4], &p, &err), AREAL_ENGINE_EFULL);
    areal_engine_continue(e);
    et_wait_done(&c, 4);
    et_submit_ok(e, &c.slots[4], &p); /* room again */
    areal_engine_drain(e, false);
    assert_int_equal(c.n_done, 5);
    assert_int_equal(c.slots[4].res->samples[0].n_output, 4);
    assert_int_equal(et_submit(e, &c.slots[5], &p, &err), AREAL_ENGINE_ESTOPPED);
    et_coll_free(&c);
    areal_engine_destroy(e);
}

static void stop_tokens_eos_and_caller_stop(void **state) {
    (void)state;
    areal_model ref;
    et_load(&ref, ARCH);
    int V = ref.cfg.vocab_size;
    et_coll c;
    et_coll_init(&c, 6, NULL);
    for (int i = 0; i < 6; i++)
        make_prompt(&c.slots[i], 300, 15, V);
    areal_sampling sp = {.temperature = 0, .top_p = 1, .max_new_tokens = 30};
    areal_gen_out o;
    et_generate(&ref, c.slots[0].ids, 15, &sp, &o);
    int32_t stop = o.tokens[4];
    int first = 0;
    while (o.tokens[first] != stop)
        first++;
    areal_engine_config cfg = {.kv_bytes = 4u << 20, .eos_token_ids = &stop, .n_eos_token_ids = 1};
    areal_engine *e = et_engine(ARCH, &cfg);
    for (int i = 0; i < 6; i++)
        c.slots[i].e = e;
    areal_engine_params p = et_greedy(30);
    et_submit_ok(e, &c.slots[0], &p); /* EOS */
    p.ignore_eos = true;
    et_submit_ok(e, &c.slots[1], &p); /* EOS ignored: full length */
    p.stop_token_ids = &stop;
    p.n_stop_token_ids = 1;
    et_submit_ok(e, &c.slots[2], &p); /* stop_token_ids still apply */
    p = et_greedy(30);
    p.ignore_eos = true;
    c.slots[3].stop_at = 2; /* on_token returns 1: the HTTP layer's stop string */
    et_submit_ok(e, &c.slots[3], &p);
    p.max_new_tokens = 0;
    et_submit_ok(e, &c.slots[4], &p);
    et_wait_done(&c, 5);
    areal_engine_sample *x = &c.slots[0].res->samples[0];
    assert_int_equal(x->finish, AREAL_FINISH_STOP);
    assert_int_equal(x->matched_token, stop);
    assert_int_equal(x->n_output, first + 1);
    assert_int_equal(x->output_ids[first], stop);
    x = &c.slots[1].res->samples[0];
    assert_int_equal(x->finish, AREAL_FINISH_LENGTH);
    assert_int_equal(x->n_output, 30);
    assert_int_equal(x->matched_token, -1);
    x = &c.slots[2].res->samples[0];
    assert_int_equal(x->finish, AREAL_FINISH_STOP);
    assert_int_equal(x->n_output, first + 1);
    x = &c.slots[3].res->samples[0];
    assert_int_equal(x->finish, AREAL_FINISH_STOP);
    assert_int_equal(x->matched_token, -1);
    assert_int_equal(x->n_output, 3);
    x = &c.slots[4].res->samples[0];
    assert_int_equal(x->finish, AREAL_FINISH_LENGTH);
    assert_int_equal(x->n_output, 0);
    /* areal_engine_stop from outside */
    c.slots[5].signal_at = 2;
    p = et_greedy(200);
    p.ignore_eos = true;
    et_submit_ok(e, &c.slots[5], &p);
    et_wait_signal(&c.slots[5]);
    assert_int_equal(areal_engine_stop(e, "r5"), AREAL_OK);
    et_wait_done(&c, 6);
    assert_int_equal(c.slots[5].res->samples[0].finish, AREAL_FINISH_STOP);
    assert_int_equal(areal_engine_stop(e, "r5"), AREAL_ENGINE_ENOENT);
    assert_int_equal(areal_engine_abort(e, "nobody"), AREAL_ENGINE_ENOENT);
    areal_gen_out_free(&o);
    et_coll_free(&c);
    areal_engine_destroy(e);
    areal_model_free(&ref);
}

static void prompt_scoring(void **state) {
    (void)state;
    areal_model ref;
    et_load(&ref, ARCH);
    areal_engine_config cfg = {.kv_bytes = 4u << 20};
    areal_engine *e = et_engine(ARCH, &cfg);
    et_coll c;
    et_coll_init(&c, 3, e);
    for (int i = 0; i < 3; i++)
        make_prompt(&c.slots[i], 400, 150, ref.cfg.vocab_size); /* 3 chunks of 64 score rows */
    float *lp = et_forward_logprobs(&ref, c.slots[0].ids, 150, 1.0f);
    areal_engine_params p = et_greedy(1);
    p.logprob_start_len = 0;
    p.top_logprobs_num = 3;
    et_submit_ok(e, &c.slots[0], &p);
    et_wait_done(&c, 1);
    p.logprob_start_len = 100; /* the prompt is cached now; scored rows must still be computed */
    et_submit_ok(e, &c.slots[1], &p);
    et_wait_done(&c, 2);
    p.logprob_start_len = -1;
    et_submit_ok(e, &c.slots[2], &p);
    et_wait_done(&c, 3);
    areal_engine_result *r = c.slots[0].res;
    assert_int_equal(r->n_input_logprobs, 150);
    assert_true(isnan(r->input_logprobs[0]));
    double worst = 0;
    for (int i = 1; i < 150; i++) {
        double d = fabs((double)r->input_logprobs[i] - lp[i - 1]);
        worst = d > worst ? d : worst;
        const areal_engine_top *t = r->input_top + (size_t)i * 3;
        assert_true(t[0].logprob >= t[1].logprob && t[1].logprob >= t[2].logprob);
        assert_true(r->input_logprobs[i] <= t[0].logprob + 1e-6f);
    }
    print_message("prompt scoring vs training forward: max |diff| %.2e\n", worst);
    assert_true(worst <= 1e-5);
    /* greedy: the chosen token tops its list */
    assert_int_equal(r->samples[0].output_top[0].id, r->samples[0].output_ids[0]);
    r = c.slots[1].res;
    assert_int_equal(r->n_input_logprobs, 50);
    assert_true(r->samples[0].cached_tokens <= 99);
    assert_true(r->samples[0].cached_tokens > 0);
    for (int i = 0; i < 50; i++)
        assert_true(fabs((double)r->input_logprobs[i] - lp[100 + i - 1]) <= 1e-5);
    r = c.slots[2].res;
    assert_null(r->input_logprobs);
    assert_int_equal(r->samples[0].cached_tokens, 144); /* (150 - 1) / 16 full blocks */
    free(lp);
    et_coll_free(&c);
    areal_engine_destroy(e);
    areal_model_free(&ref);
}

static void expect_refusal(areal_engine *e, const areal_engine_request *r, int code,
                           const char *field) {
    areal_error err;
    int rc = areal_engine_submit(e, r, &err);
    if (rc != code || strstr(err.msg, field) == NULL)
        fail_msg("expected %d naming %s, got %d: %s", code, field, rc, err.msg);
}

static void bad_requests_and_settings(void **state) {
    (void)state;
    areal_model m;
    et_load(&m, ARCH);
    areal_engine *e = NULL;
    areal_error err;
    /* t > 1 needs its tp group (test_rollout_tp.c runs real ones) */
    areal_engine_config tp = {.kv_bytes = 4u << 20, .tensor_parallel = 2};
    assert_int_equal(areal_engine_create(&m, &tp, &e, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "tp_group"));
    assert_non_null(m.params); /* still the caller's */
    areal_model half; /* a tensor-parallel shard at t = 1 is refused: it is not the model */
    areal_model_shard sh = areal_model_shard_whole(&m.cfg);
    sh.tp = 2;
    if (areal_model_init_shard(&half, &m.cfg, &sh, NULL, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    areal_engine_config ok = {.kv_bytes = 4u << 20};
    assert_int_equal(areal_engine_create(&half, &ok, &e, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "shard"));
    areal_model_free(&half);
    areal_engine_config tiny = {.kv_bytes = 100};
    assert_int_equal(areal_engine_create(&m, &tiny, &e, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "kv_bytes"));
    areal_engine_config small = {.kv_bytes = 4 * areal_paged_kv_block_bytes(&m.cfg, 16)};
    if (areal_engine_create(&m, &small, &e, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    int32_t ids[4] = {1, 2, 3, 4};
    et_coll c;
    et_coll_init(&c, 1, e);
    areal_engine_request r = {
        .input_ids = ids, .n_input = 4, .on_done = et_on_done, .user = &c.slots[0]};
    areal_engine_params_default(&r.params);
    r.params.max_new_tokens = 8;
    ids[2] = 96;
    expect_refusal(e, &r, AREAL_EINVAL, "input_ids[2]");
    ids[2] = -1;
    expect_refusal(e, &r, AREAL_EINVAL, "input_ids[2]");
    ids[2] = 3;
    r.n_input = 0;
    expect_refusal(e, &r, AREAL_EINVAL, "input_ids");
    r.n_input = 4;
    r.params.max_new_tokens = 253;
    expect_refusal(e, &r, AREAL_EINVAL, "max_new_tokens");
    r.params.max_new_tokens = 61; /* fits the context, not the 4-block budget */
    expect_refusal(e, &r, AREAL_EINVAL, "kv-memory");
    r.params.max_new_tokens = 8;
    r.params.top_p = 0;
    expect_refusal(e, &r, AREAL_EINVAL, "top_p");
    r.params.top_p = 1;
    r.params.temperature = -1;
    expect_refusal(e, &r, AREAL_EINVAL, "temperature");
    r.params.temperature = NAN;
    expect_refusal(e, &r, AREAL_EINVAL, "temperature");
    r.params.temperature = 1;
    r.params.min_p = 1;
    expect_refusal(e, &r, AREAL_EINVAL, "min_p");
    r.params.min_p = 0;
    r.params.top_k = -2;
    expect_refusal(e, &r, AREAL_EINVAL, "top_k");
    r.params.top_k = 0;
    r.params.n = -3;
    expect_refusal(e, &r, AREAL_EINVAL, "n:");
    r.params.n = 1;
    r.on_done = NULL;
    expect_refusal(e, &r, AREAL_EINVAL, "on_done");
    r.on_done = et_on_done;
    r.rid = "dup";
    r.params.max_new_tokens = 50;
    r.params.ignore_eos = true;
    /* paused, the first "dup" stays live however fast the engine would finish it */
    assert_int_equal(areal_engine_pause(e, AREAL_PAUSE_IN_PLACE), 0);
    assert_int_equal(areal_engine_submit(e, &r, &err), AREAL_OK);
    expect_refusal(e, &r, AREAL_EINVAL, "rid");
    assert_int_equal(areal_engine_abort_all(e), 1);
    et_wait_done(&c, 1);
    assert_int_equal(c.slots[0].res->samples[0].finish, AREAL_FINISH_ABORT);
    et_coll_free(&c);
    areal_engine_destroy(e);
}

/* Destroy with requests still live: each gets exactly one on_done (ABORT). */
static void destroy_aborts_live_requests(void **state) {
    (void)state;
    areal_engine_config cfg = {.kv_bytes = 4u << 20, .max_running = 2};
    areal_engine *e = et_engine(ARCH, &cfg);
    et_coll c;
    et_coll_init(&c, 5, e);
    for (int i = 0; i < 5; i++) {
        make_prompt(&c.slots[i], 500 + (uint64_t)i, 20, 96);
        areal_engine_params p = et_greedy(100);
        p.ignore_eos = true;
        et_submit_ok(e, &c.slots[i], &p);
    }
    areal_engine_destroy(e);
    assert_int_equal(c.n_done, 5);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(c.slots[i].done_calls, 1);
        assert_int_equal(c.slots[i].res->samples[0].finish, AREAL_FINISH_ABORT);
    }
    et_coll_free(&c);
}

typedef struct stress_ctl {
    areal_engine *e;
    atomic_int stop;
    int swaps, pauses;
} stress_ctl;

/* Pauses (both modes), continues, flushes, aborts everything and swaps weights at random. */
static void *stress_controller(void *arg) {
    stress_ctl *x = arg;
    uint64_t rs = 99;
    static const int script[] = {0, 3, 1, 0, 4, 2, 0, 3}; /* each kind at least once first */
    for (int it = 0; !atomic_load(&x->stop) || it < 8; it++) {
        switch (it < 8 ? script[it] : (int)et_rand(&rs, 8)) {
        case 0:
            areal_engine_pause(x->e,
                               et_rand(&rs, 4) == 0 ? AREAL_PAUSE_ABORT : AREAL_PAUSE_IN_PLACE);
            x->pauses++;
            et_sleep_ms(1);
            areal_engine_continue(x->e);
            break;
        case 1:
            areal_engine_flush_cache(x->e);
            break;
        case 2:
            if (et_rand(&rs, 8) == 0)
                areal_engine_abort_all(x->e);
            break;
        case 3:
        case 4: {
            areal_model m;
            areal_error err;
            if (areal_engine_copy_model(x->e, &m, &err) == AREAL_OK) {
                char v[16];
                snprintf(v, sizeof v, "s%d", x->swaps);
                if (areal_engine_swap_model(x->e, &m, v, et_rand(&rs, 4) == 0, &err) == AREAL_OK)
                    x->swaps++;
                else
                    areal_model_free(&m);
            }
            break;
        }
        default: {
            areal_engine_stats st;
            areal_engine_get_stats(x->e, &st);
            break;
        }
        }
        et_sleep_ms(1);
    }
    return NULL;
}

/* Requests flow while another thread pauses, flushes, aborts and swaps: every request is
 * answered exactly once, nothing deadlocks, every block comes back. */
static void control_under_load(void **state) {
    (void)state;
    areal_engine_config cfg = {.kv_bytes = 4u << 20, .max_running = 16, .max_queued = 4000};
    areal_engine *e = et_engine(ARCH, &cfg);
    const int N = 300;
    et_coll c;
    et_coll_init(&c, N, e);
    stress_ctl x = {.e = e};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stress_controller, &x), 0);
    uint64_t rs = 5;
    for (int i = 0; i < N; i++) {
        et_slot *s = &c.slots[i];
        make_prompt(s, 600 + (uint64_t)i, 1 + (int)et_rand(&rs, 50), 96);
        areal_engine_params p = et_greedy(1 + (int)et_rand(&rs, 60));
        p.n = 1 + (int)et_rand(&rs, 3);
        p.temperature = et_rand(&rs, 2) ? 0.7f : 0.0f;
        p.logprob_start_len = et_rand(&rs, 4) == 0 ? (int)et_rand(&rs, (uint32_t)s->n_ids) : -1;
        p.top_logprobs_num = (int)et_rand(&rs, 3);
        if (et_rand(&rs, 8) == 0)
            s->stop_at = (int)et_rand(&rs, 5);
        if (et_rand(&rs, 8) == 0)
            s->abort_at = 1 + (int)et_rand(&rs, 5);
        et_submit_ok(e, s, &p);
        if (i % 10 == 9)
            et_sleep_ms(2);
    }
    et_wait_done(&c, N);
    atomic_store(&x.stop, 1);
    pthread_join(th, NULL);
    areal_engine_continue(e);
    areal_engine_drain(e, false);
    areal_engine_stats st;
    areal_engine_get_stats(e, &st);
    print_message("under load: %d pauses, %d swaps, %llu aborted, %llu finished\n", x.pauses,
                  x.swaps, (unsigned long long)st.requests_aborted,
                  (unsigned long long)st.requests_finished);
    for (int i = 0; i < N; i++) {
        assert_int_equal(c.slots[i].done_calls, 1);
        areal_engine_result *r = c.slots[i].res;
        for (int k = 0; k < r->n; k++)
            assert_true(r->samples[k].finish >= AREAL_FINISH_STOP &&
                        r->samples[k].finish <= AREAL_FINISH_ABORT);
    }
    assert_int_equal(st.requests_finished + st.requests_aborted, (uint64_t)N);
    assert_true(x.swaps >= 3 && x.pauses >= 3);
    assert_int_equal(st.weight_updates, (uint64_t)x.swaps);
    assert_int_equal(st.blocks_used, 0);
    assert_int_equal(st.live_requests, 0);
    et_coll_free(&c);
    areal_engine_destroy(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(abort_and_resubmit_greedy),
        cmocka_unit_test(seeded_resume_across_weight_swap),
        cmocka_unit_test(weight_swap_mid_run),
        cmocka_unit_test(pause_in_place_holds_and_continues),
        cmocka_unit_test(pause_abort_ends_running_and_queued),
        cmocka_unit_test(queue_full_backpressure_and_drain),
        cmocka_unit_test(stop_tokens_eos_and_caller_stop),
        cmocka_unit_test(prompt_scoring),
        cmocka_unit_test(bad_requests_and_settings),
        cmocka_unit_test(destroy_aborts_live_requests),
        cmocka_unit_test(control_under_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
